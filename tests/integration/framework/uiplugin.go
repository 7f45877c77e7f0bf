package framework

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/uiplugin"
)

// InstallUIPluginCRD installs Rancher's UIPlugin CRD
// (tests/integration/uiplugin/testdata, from rancher/rancher v2.11.3) if
// it is not there and waits until the kind is served.
func (c *ControlPlane) InstallUIPluginCRD(t testing.TB) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "tests", "integration", "uiplugin", "testdata", "catalog.cattle.io_uiplugins.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for crd.Name == "" { // the file starts with a comment and an empty document
		if err := dec.Decode(&crd); err != nil {
			t.Fatal(err)
		}
	}
	crds := apiextclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(context.Background(), &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(c.Config)
	Eventually(t, "the UIPlugin kind served", func() bool {
		_, err := dyn.Resource(uiplugin.UIPluginGVR).Namespace("default").List(context.Background(), metav1.ListOptions{})
		return err == nil
	})
}
