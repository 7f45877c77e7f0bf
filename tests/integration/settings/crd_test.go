package settings_test

import (
	"context"
	"testing"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/crds"
)

// TestEnsureSettingNeverReplacesExistingCRD: in a Rancher installation the
// Setting CRD is Rancher's; EnsureSetting must leave it exactly as it is.
func TestEnsureSettingNeverReplacesExistingCRD(t *testing.T) {
	ctx := context.Background()
	c := apiextclient.NewForConfigOrDie(cp.Config)
	crdc := c.ApiextensionsV1().CustomResourceDefinitions()
	existing, err := crdc.Get(ctx, "settings.management.cattle.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	existing.Annotations = map[string]string{"owner": "rancher"}
	existing, err = crdc.Update(ctx, existing, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created, err := crds.EnsureSetting(ctx, c)
	if err != nil || created {
		t.Fatalf("EnsureSetting = %v, %v; want false, nil", created, err)
	}
	after, err := crdc.Get(ctx, existing.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != existing.ResourceVersion || after.Annotations["owner"] != "rancher" {
		t.Errorf("the existing CRD was written: resourceVersion %s → %s", existing.ResourceVersion, after.ResourceVersion)
	}
}
