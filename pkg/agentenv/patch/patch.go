// Package patch writes a cluster object's agent env: the one JSON merge
// patch of spec.agentEnvVars, the ownership record and the status
// annotation (Write) that the agentenv controller makes and that
// `leasetune cleanup` (pkg/plan) makes to remove leasetune's entries, both
// with the field manager own.FieldManager (the revert guard tells
// the project's writes from others' by it).
package patch

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/own"
)

// Write patches spec.agentEnvVars and the ownership record of the object
// ref, with the resourceVersion read: a JSON merge patch replaces the list
// whole, so the precondition is what keeps a concurrent edit from being
// lost (the API server answers a conflict). An empty env removes the
// field; a nil record removes the annotation; status is the value of the
// agentenv.StatusAnnotation in the same patch (nil removes it), so that a
// change and its report are one write.
func Write(ctx context.Context, p Patcher, ref agentenv.Ref, resourceVersion string,
	env []map[string]interface{}, rec map[string]string, status interface{}) error {
	var recValue interface{}
	if rec != nil {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		recValue = string(b)
	}
	var envValue interface{}
	if len(env) > 0 {
		envValue = env
	}
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]interface{}{agentenv.RecordAnnotation: recValue, agentenv.StatusAnnotation: status},
		},
		"spec": map[string]interface{}{"agentEnvVars": envValue},
	})
	if err != nil {
		return err
	}
	return p.MergePatch(ctx, ref, body)
}

// Patcher sends a JSON merge patch of a cluster object with the field
// manager own.FieldManager.
type Patcher interface {
	MergePatch(ctx context.Context, ref agentenv.Ref, body []byte) error
}

// DynamicPatcher patches through a dynamic client (which decodes the
// object the apiserver answers with).
type DynamicPatcher struct{ Client dynamic.Interface }

// MergePatch implements Patcher.
func (d DynamicPatcher) MergePatch(ctx context.Context, ref agentenv.Ref, body []byte) error {
	var r dynamic.ResourceInterface = d.Client.Resource(ref.GVR)
	if ref.Namespace != "" {
		r = d.Client.Resource(ref.GVR).Namespace(ref.Namespace)
	}
	_, err := r.Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: own.FieldManager})
	return err
}

// RawPatcher patches through a REST client without decoding the object the
// apiserver answers with: the controller never reads it (the informer
// brings the new object), and decoding a whole cluster object into an
// unstructured map for every write was a third of the controller's
// allocations during a global change at 10,000 clusters (hack/bench
// -profile). An error answer is still decoded into a StatusError.
type RawPatcher struct{ REST rest.Interface }

// NewRawPatcher returns a RawPatcher for cfg (its QPS and burst apply to
// these writes).
func NewRawPatcher(cfg *rest.Config) (RawPatcher, error) {
	rc, err := slim.NewRESTClient(cfg)
	return RawPatcher{REST: rc}, err
}

// MergePatch implements Patcher.
func (r RawPatcher) MergePatch(ctx context.Context, ref agentenv.Ref, body []byte) error {
	path := []string{"/apis", ref.GVR.Group, ref.GVR.Version}
	if ref.Namespace != "" {
		path = append(path, "namespaces", ref.Namespace)
	}
	path = append(path, ref.GVR.Resource, ref.Name)
	return r.REST.Patch(types.MergePatchType).AbsPath(path...).Param("fieldManager", own.FieldManager).
		Body(body).Do(ctx).Error()
}
