package agentenv

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// slim is the informers' transform (client-go SetTransform): it keeps of a
// cluster object only what the controller reads, so the caches grow with
// those fields, not with whole objects (a management Cluster carries a
// large status; Rancher's apply annotation holds a whole copy of the
// object). Kept: apiVersion, kind, name, namespace, uid, resourceVersion,
// labels, annotations but the two that hold object copies, and
// spec.agentEnvVars; spec.rkeConfig only as a marker; status.clusterName.
// Writes never start from the slim copy alone: a conflict is retried from
// a live read.
func slim(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]interface{}{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetLabels(u.GetLabels())
	if ann := u.GetAnnotations(); len(ann) > 0 {
		kept := make(map[string]string, len(ann))
		for k, v := range ann {
			if k == "kubectl.kubernetes.io/last-applied-configuration" || strings.HasPrefix(k, "objectset.rio.cattle.io/applied") {
				continue
			}
			kept[k] = v
		}
		out.SetAnnotations(kept)
	}
	if env, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "agentEnvVars"); found {
		_ = unstructured.SetNestedField(out.Object, env, "spec", "agentEnvVars")
	}
	if hasRKEConfig(u) {
		_ = unstructured.SetNestedField(out.Object, map[string]interface{}{}, "spec", "rkeConfig")
	}
	if name := provClusterName(u); name != "" {
		_ = unstructured.SetNestedField(out.Object, name, "status", "clusterName")
	}
	return out, nil
}
