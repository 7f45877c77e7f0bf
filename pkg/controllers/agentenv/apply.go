package agentenv

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/patch"
)

// applied is what apply did.
type applied struct {
	// wrote: the write was accepted (or its object was gone).
	wrote bool
	// message is the status message a writeFence wrote.
	message string
}

// apply makes the one write out decides for st's routed object: a merge
// patch of the StatusAnnotation alone (writeStatus), of the env, the
// record and the StatusAnnotation with the resourceVersion read
// (writeEnv, patch.Write, paced by Options.ClustersPerMinute), or the
// revert guard's status message after reading who else writes the env
// (writeFence: the cache keeps no managedFields). A conflict is returned
// as it is, for sync to decide again.
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
		msg := agentenv.FenceMessage(writer, out.reverts, RevertWindow, rt)
		err := c.patchStatus(ctx, rt.TargetRef, msg)
		return applied{wrote: err == nil, message: msg}, err
	case writeEnv:
		if c.pace != nil {
			if err := c.pace.Wait(ctx); err != nil {
				return applied{}, err
			}
		}
		d := out.decision
		err := patch.Write(ctx, c.patcher, rt.TargetRef, rt.Target.GetResourceVersion(), d.Env, d.Record, out.status)
		return applied{wrote: err == nil}, err
	}
	return applied{}, nil
}

// patchStatus sets (a string) or removes (nil) the agentenv.StatusAnnotation of
// ref's object; a gone object is no error. It never touches the cached
// objects, which the informer owns.
func (c *Controller) patchStatus(ctx context.Context, ref agentenv.Ref, value interface{}) error {
	body, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"annotations": map[string]interface{}{agentenv.StatusAnnotation: value}}})
	if err != nil {
		return err
	}
	err = c.patcher.MergePatch(ctx, ref, body)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
