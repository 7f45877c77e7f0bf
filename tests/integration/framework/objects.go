package framework

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
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
	r := c.Resource(gvr, u.GetNamespace())
	out, err := r.Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	name := u.GetName()
	t.Cleanup(func() { _ = r.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return out
}
