package uiplugin

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The UIPlugin kind and where Rancher reads it.
var (
	// UIPluginGVR is catalog.cattle.io/v1 uiplugins (rancher/rancher
	// v2.11.3 pkg/apis/catalog.cattle.io/v1/plugin.go).
	UIPluginGVR = schema.GroupVersionResource{Group: "catalog.cattle.io", Version: "v1", Resource: "uiplugins"}
	// CRDGVR is apiextensions.k8s.io/v1 customresourcedefinitions.
	CRDGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

const (
	// CRDName is the UIPlugin CRD Rancher installs (rancher/rancher v2.11.3
	// pkg/crds/names.go UIPluginsCRD).
	CRDName = "uiplugins.catalog.cattle.io"
	// Namespace is the only namespace Rancher reads UIPlugins from
	// (pkg/namespace UIPluginNamespace, read by
	// pkg/controllers/dashboard/plugin/controller.go; the UI's
	// UI_PLUGIN_NAMESPACE in shell/config/uiplugins.js).
	Namespace = "cattle-ui-plugin-system"
	// Name is the UIPlugin's name (the extension's package name, which
	// Embedded's manifest also says).
	Name = "leasetune"
	// FieldManager is the field manager of the UIPlugin's owned fields.
	FieldManager = "leasetune-uiplugin"
	// ManagedByLabel marks the UIPlugin as leasetune's: cleanup deletes
	// only a UIPlugin that carries it with ManagedByValue.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "leasetune"
	// BundleHashKey, in spec.plugin.metadata, is the bundle's SHA-256: a new
	// bundle under the same version changes the spec, so Rancher's
	// controller (Generation > Status.ObservedGeneration: forceUpdate)
	// drops its cached copy and fetches again.
	BundleHashKey = "leasetune.io/bundle-sha256"
	// APIProxyKey, in spec.plugin.metadata, is the path under Rancher's
	// server at which the page reaches leasetune's API: Rancher's proxy of
	// the local cluster's kube-apiserver to leasetune's HTTPS Service
	// (/k8s/clusters/local/api/v1/namespaces/<ns>/services/https:<service>:443/proxy).
	// Rancher's index hands spec.plugin.metadata to the UI as it is
	// (pkg/controllers/dashboard/plugin/index.go Generate).
	APIProxyKey = "leasetune.io/api-proxy"
)

// APIProxyPath is APIProxyKey's value for leasetune's HTTPS Service
// (port 443) in namespace.
func APIProxyPath(namespace, service string) string {
	return "/k8s/clusters/local/api/v1/namespaces/" + namespace + "/services/https:" + service + ":443/proxy"
}

// Desired is the UIPlugin leasetune keeps for bundle b at endpoint (the
// base URL Rancher fetches <endpoint>/plugin/package.json and
// <endpoint>/files.txt from): metadata.name and spec.plugin.name are both
// the extension's name (Rancher's index is keyed by spec.plugin.name and
// updates readiness by metadata.name: index.go Generate and Ready), version
// the bundle's, and spec.plugin.metadata the package.json's rancher
// annotations with BundleHashKey and extra (leasetune's own keys, such as
// APIProxyKey, which the page reads from Rancher's /v1/uiplugins index).
// It holds exactly the fields leasetune
// owns: noCache and noAuth are left to their CRD defaults (false) and to
// Rancher, whose controller sets noCache itself when a file is over its
// size limit (controller.go OnPluginChange).
func Desired(b *Bundle, endpoint string, extra map[string]string) *unstructured.Unstructured {
	meta := map[string]interface{}{BundleHashKey: b.SHA256}
	for k, v := range b.Annotations {
		meta[k] = v
	}
	for k, v := range extra {
		meta[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "catalog.cattle.io/v1",
		"kind":       "UIPlugin",
		"metadata": map[string]interface{}{
			"name":      b.Name,
			"namespace": Namespace,
			"labels":    map[string]interface{}{ManagedByLabel: ManagedByValue, "app.kubernetes.io/name": "leasetune"},
		},
		"spec": map[string]interface{}{"plugin": map[string]interface{}{
			"name":     b.Name,
			"version":  b.Version,
			"endpoint": endpoint,
			"metadata": meta,
		}},
	}}
	return u
}

// Differs reports whether the live UIPlugin lacks any field desired sets,
// or has another value there, and names the first such field; other fields
// (other labels, other metadata keys, status) do not count. A nil live
// object differs ("absent").
func Differs(live, desired *unstructured.Unstructured) (string, bool) {
	if live == nil {
		return "absent", true
	}
	for k, v := range desired.GetLabels() {
		if live.GetLabels()[k] != v {
			return "metadata.labels." + k, true
		}
	}
	want, _, _ := unstructured.NestedMap(desired.Object, "spec", "plugin")
	have, _, _ := unstructured.NestedMap(live.Object, "spec", "plugin")
	for k, v := range want {
		if k == "metadata" {
			haveMeta, _ := have["metadata"].(map[string]interface{})
			for mk, mv := range v.(map[string]interface{}) {
				if haveMeta[mk] != mv {
					return "spec.plugin.metadata." + mk, true
				}
			}
			continue
		}
		if !reflect.DeepEqual(have[k], v) {
			return "spec.plugin." + k, true
		}
	}
	return "", false
}

// Apply writes desired with server-side apply under FieldManager, forcing
// ownership of exactly its fields (a hand edit of the endpoint is taken
// back; other fields and other managers' metadata keys stay). It creates the
// UIPlugin when there is none. Errors are the API server's, wrapped with
// the object's name (NotFound when cattle-ui-plugin-system does not exist).
func Apply(ctx context.Context, dyn dynamic.Interface, desired *unstructured.Unstructured) error {
	body, err := desired.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = dyn.Resource(UIPluginGVR).Namespace(desired.GetNamespace()).Patch(ctx, desired.GetName(), "application/apply-patch+yaml",
		body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return fmt.Errorf("apply UIPlugin %s/%s: %w", desired.GetNamespace(), desired.GetName(), err)
	}
	return nil
}

// Found is a UIPlugin `leasetune cleanup` looked at.
type Found struct {
	// Ref names it: "UIPlugin cattle-ui-plugin-system/leasetune".
	Ref string
	// Ours is true when it carries ManagedByLabel=ManagedByValue (only then
	// is it deleted); UID is the object's, for a delete precondition.
	Ours bool
	UID  string
}

// Find looks for the UIPlugin called name in Namespace: nil when there is
// none or the UIPlugin kind is not served (no Rancher). Other errors are
// the API server's.
func Find(ctx context.Context, dyn dynamic.Interface, name string) (*Found, error) {
	u, err := dyn.Resource(UIPluginGVR).Namespace(Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // the object, or the whole kind
	}
	if err != nil {
		return nil, fmt.Errorf("read UIPlugin %s/%s: %w", Namespace, name, err)
	}
	return &Found{Ref: "UIPlugin " + Namespace + "/" + name, Ours: u.GetLabels()[ManagedByLabel] == ManagedByValue, UID: string(u.GetUID())}, nil
}

// Remove deletes the UIPlugin f found, if it is leasetune's, with a UID
// precondition (an object made anew since is left alone). Rancher's
// controller then drops the extension from its index and cache
// (controller.go OnPluginChange regenerates the index from the UIPlugins
// left; fscache.go SyncWithIndex deletes cached files not in it).
func Remove(ctx context.Context, dyn dynamic.Interface, f *Found, name string) error {
	if f == nil || !f.Ours {
		return nil
	}
	uid := types.UID(f.UID)
	err := dyn.Resource(UIPluginGVR).Namespace(Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", f.Ref, err)
	}
	return nil
}
