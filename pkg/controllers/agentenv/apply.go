package agentenv

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// applied is what apply did.
type applied struct {
	// wrote: the write was accepted (or its object was gone).
	wrote bool
	// message is the status message a writeFence wrote.
	message string
}

// apply makes the one write out decides for st's routed object: a merge
// patch of the StatusAnnotation alone (writeStatus), of the env, the record
// and the StatusAnnotation with the resourceVersion read (writeEnv, paced
// by Options.ClustersPerMinute), or the revert guard's status message
// after reading who else writes the env (writeFence: the cache keeps no
// managedFields). A conflict is returned as it is, for sync to decide again.
func (c *Controller) apply(ctx context.Context, st state, out outcome) (applied, error) {
	rt := st.route
	switch out.action {
	case none:
		return applied{}, nil
	case writeStatus:
		err := c.patchStatus(ctx, rt.TargetRef, out.status)
		return applied{wrote: err == nil}, err
	case writeFence:
		var writer string
		if live, err := c.resource(rt.TargetRef).Get(ctx, rt.TargetRef.Name, metav1.GetOptions{}); err == nil {
			writer = envWriters(live)
		}
		msg := fenceMessage(writer, out.reverts, rt)
		err := c.patchStatus(ctx, rt.TargetRef, msg)
		return applied{wrote: err == nil, message: msg}, err
	case writeEnv:
		if c.pace != nil {
			if err := c.pace.Wait(ctx); err != nil {
				return applied{}, err
			}
		}
		d := out.decision
		err := Write(ctx, c.patcher, rt.TargetRef, rt.Target.GetResourceVersion(), d.Env, d.Record, out.status)
		return applied{wrote: err == nil}, err
	}
	return applied{}, nil
}

// patchStatus sets (a string) or removes (nil) the StatusAnnotation of
// ref's object; a gone object is no error. It never touches the cached
// objects, which the informer owns.
func (c *Controller) patchStatus(ctx context.Context, ref Ref, value interface{}) error {
	body, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"annotations": map[string]interface{}{StatusAnnotation: value}}})
	if err != nil {
		return err
	}
	err = c.patcher.MergePatch(ctx, ref, body)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Write patches spec.agentEnvVars and the ownership record of the object
// ref, with the resourceVersion read: a JSON merge patch replaces the list
// whole, so the precondition is what keeps a concurrent edit from being
// lost (the API server answers a conflict). An empty env removes the
// field; a nil record removes the annotation; status is the value of the
// StatusAnnotation in the same patch (nil removes it), so that a change and
// its report are one write.
func Write(ctx context.Context, p Patcher, ref Ref, resourceVersion string,
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
			"annotations":     map[string]interface{}{RecordAnnotation: recValue, StatusAnnotation: status},
		},
		"spec": map[string]interface{}{"agentEnvVars": envValue},
	})
	if err != nil {
		return err
	}
	return p.MergePatch(ctx, ref, body)
}

// Patcher sends a JSON merge patch of a cluster object with FieldManager.
type Patcher interface {
	MergePatch(ctx context.Context, ref Ref, body []byte) error
}

// DynamicPatcher patches through a dynamic client (which decodes the
// object the apiserver answers with).
type DynamicPatcher struct{ Client dynamic.Interface }

// MergePatch implements Patcher.
func (d DynamicPatcher) MergePatch(ctx context.Context, ref Ref, body []byte) error {
	var r dynamic.ResourceInterface = d.Client.Resource(ref.GVR)
	if ref.Namespace != "" {
		r = d.Client.Resource(ref.GVR).Namespace(ref.Namespace)
	}
	_, err := r.Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
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
	rc, err := NewRESTClient(cfg)
	return RawPatcher{REST: rc}, err
}

// MergePatch implements Patcher.
func (r RawPatcher) MergePatch(ctx context.Context, ref Ref, body []byte) error {
	path := []string{"/apis", ref.GVR.Group, ref.GVR.Version}
	if ref.Namespace != "" {
		path = append(path, "namespaces", ref.Namespace)
	}
	path = append(path, ref.GVR.Resource, ref.Name)
	return r.REST.Patch(types.MergePatchType).AbsPath(path...).Param("fieldManager", FieldManager).
		Body(body).Do(ctx).Error()
}
