package framework

import (
	"bytes"
	"context"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// UseFleetCRD replaces clusters.fleet.cattle.io with the CRD of a Fleet
// release (../shared/fixtures/fleet/fleet-<version>-clusters-crd.yaml) and
// waits until it is established.
func (c *ControlPlane) UseFleetCRD(t testing.TB, version string) {
	t.Helper()
	_, b := ReadSharedFixture(t, "fleet/fleet-"+version+"-clusters-crd.yaml")
	var crd apiextv1.CustomResourceDefinition
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&crd); err != nil {
		t.Fatal(err)
	}
	c.UpdateCRD(t, &crd)
}

// UpdateCRD replaces the CRD of crd's name with crd and waits until it is
// established.
func (c *ControlPlane) UpdateCRD(t testing.TB, crd *apiextv1.CustomResourceDefinition) {
	t.Helper()
	crds := apiextclient.NewForConfigOrDie(c.Config).ApiextensionsV1().CustomResourceDefinitions()
	cur, err := crds.Get(context.Background(), crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.ResourceVersion = cur.ResourceVersion
	if _, err := crds.Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "CRD established", func() bool {
		got, err := crds.Get(context.Background(), crd.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}
