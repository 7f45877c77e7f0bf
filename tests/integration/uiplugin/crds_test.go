package uiplugin_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/uiplugin"
	"leasetune.io/leasetune/tests/integration/framework"
)

// TestUIPluginCRDs installs the UIPlugin CRD of each Rancher release in
// ../shared/fixtures/rancher and the chart's UIPlugin under it, as helm
// install does: every CRD accepts it and keeps spec.plugin exactly as the
// chart rendered it (nothing pruned by the CRD's schema), so Rancher's
// plugin controller reads the endpoint and metadata leasetune gave.
func TestUIPluginCRDs(t *testing.T) {
	ensureNamespace(t, uiplugin.Namespace)
	ns := cp.Namespace(t)
	t.Cleanup(func() {
		cp.InstallUIPluginCRDOf(t, framework.UIPluginCRDVersions[len(framework.UIPluginCRDVersions)-1])
	})
	for _, v := range framework.UIPluginCRDVersions {
		t.Run("Rancher "+v, func(t *testing.T) {
			cp.InstallUIPluginCRDOf(t, v)
			deleteUIPlugin(t)
			u := chartUIPlugin(t, ns, "uiPlugin.endpoint=http://127.0.0.1:1")
			if u == nil {
				t.Fatal("the chart renders no UIPlugin where the UIPlugin kind is served")
			}
			got, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "helm"})
			if err != nil {
				t.Fatalf("create the chart's UIPlugin under Rancher %s's CRD: %v", v, err)
			}
			t.Cleanup(func() { deleteUIPlugin(t) })
			want, _, _ := unstructured.NestedMap(u.Object, "spec", "plugin")
			have, _, _ := unstructured.NestedMap(got.Object, "spec", "plugin")
			// What the CRD's schema defaults is added; nothing else changes.
			schema := framework.UIPluginCRD(t, v).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["plugin"].Properties
			for k, val := range have {
				if _, rendered := want[k]; rendered {
					continue
				}
				def := schema[k].Default
				if def == nil || string(def.Raw) != fmt.Sprint(val) {
					t.Errorf("Rancher %s's CRD stored spec.plugin.%s = %v, which the chart did not render and the schema does not default", v, k, val)
				}
				delete(have, k)
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("Rancher %s's CRD stored spec.plugin %v, the chart rendered %v", v, have, want)
			}
		})
	}
}
