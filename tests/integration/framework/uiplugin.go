package framework

import (
	"bytes"
	"context"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/uiplugin"
)

// UIPluginCRDVersions are the Rancher releases whose UIPlugin CRD
// (pkg/crds/yaml/generated/catalog.cattle.io_uiplugins.yaml at that tag)
// ../shared/fixtures/rancher holds, oldest first.
var UIPluginCRDVersions = []string{"v2.11.3", "v2.15.0"}

// InstallUIPluginCRD installs the newest of Rancher's UIPlugin CRDs if no
// UIPlugin CRD is there, and waits until the kind is served.
func (c *ControlPlane) InstallUIPluginCRD(t testing.TB) {
	t.Helper()
	c.installUIPluginCRD(t, UIPluginCRDVersions[len(UIPluginCRDVersions)-1], false)
}

// InstallUIPluginCRDOf installs the UIPlugin CRD of Rancher release
// version (one of UIPluginCRDVersions), replacing the spec and annotations
// of the one there, and waits until the kind is served from it.
func (c *ControlPlane) InstallUIPluginCRDOf(t testing.TB, version string) {
	t.Helper()
	c.installUIPluginCRD(t, version, true)
}

// UIPluginCRD reads the UIPlugin CRD of Rancher release version from
// ../shared/fixtures/rancher.
func UIPluginCRD(t testing.TB, version string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	p, b := ReadSharedFixture(t, "rancher/catalog.cattle.io_uiplugins-crd-"+version+".yaml")
	crd := &apiextv1.CustomResourceDefinition{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for crd.Name == "" { // a comment may come first, as an empty document
		if err := dec.Decode(crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	return crd
}

func (c *ControlPlane) installUIPluginCRD(t testing.TB, version string, replace bool) {
	t.Helper()
	crd := UIPluginCRD(t, version)
	crds := apiextclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()
	_, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err) && replace:
		old, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old.Spec, old.Annotations = crd.Spec, crd.Annotations
		if _, err := crds.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("replace the UIPlugin CRD with Rancher %s's: %v", version, err)
		}
	case err != nil && !apierrors.IsAlreadyExists(err):
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(c.Config)
	Eventually(t, "the UIPlugin kind served", func() bool {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil || (replace && got.Annotations["controller-gen.kubebuilder.io/version"] != crd.Annotations["controller-gen.kubebuilder.io/version"]) {
			return false
		}
		_, err = dyn.Resource(uiplugin.UIPluginGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil
	})
}
