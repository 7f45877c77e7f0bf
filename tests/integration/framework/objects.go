package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/electionstatus"
)

// SettingsGVR is Rancher's Setting resource (settings.management.cattle.io,
// cluster-scoped), as the Setting CRD serves it.
var SettingsGVR = v3.SchemeGroupVersion.WithResource("settings")

// Resource is the admin dynamic client of gvr in namespace ns ("" for a
// cluster-scoped resource).
func (c *ControlPlane) Resource(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return c.Dynamic.Resource(gvr)
	}
	return c.Dynamic.Resource(gvr).Namespace(ns)
}

// Create creates u (in its namespace) and deletes it when t ends: envtest
// runs no namespace controller, so objects outlive their test's namespace,
// and every controller a later test starts would see them. It returns the
// object as created and fails t when the API server refuses it.
func (c *ControlPlane) Create(t testing.TB, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out := c.CreateKept(t, gvr, u)
	r, name := c.Resource(gvr, u.GetNamespace()), u.GetName()
	t.Cleanup(func() { _ = r.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return out
}

// CreateKept creates u and keeps it after t ends: for an installation a
// package's tests share.
func (c *ControlPlane) CreateKept(t testing.TB, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := c.Resource(gvr, u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	return out
}

// Cluster is a Cluster object of gvr (fleet, provisioning or management)
// in ns ("" for cluster-scoped) with spec, labels and annotations.
func Cluster(gvr schema.GroupVersionResource, ns, name string, spec map[string]interface{}, labels, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": gvr.GroupVersion().String(), "kind": "Cluster", "spec": spec}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(ann)
	return u
}

// SeedRancherConfig creates rancher-config in ns with the least of the
// fleet values Rancher writes there (an apiServerURL).
func (c *ControlPlane) SeedRancherConfig(t testing.TB, ns string) {
	t.Helper()
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher-config"}, Data: map[string]string{"fleet": "apiServerURL: https://x\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// InEffect is field (leaseDuration, renewDeadline or retryPeriod) of
// component's triple in effect in the ElectionStatus, read
// through dyn; "" while there is none.
func InEffect(ctx context.Context, dyn dynamic.Interface, component, field string) string {
	u, err := dyn.Resource(electionstatus.GVR).Get(ctx, electionstatus.Name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	comps, _, _ := unstructured.NestedSlice(u.Object, "status", "components")
	for _, c := range comps {
		if m, _ := c.(map[string]interface{}); m["component"] == component {
			v, _, _ := unstructured.NestedString(m, "inEffect", field)
			return v
		}
	}
	return ""
}
