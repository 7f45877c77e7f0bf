package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/settings"
)

// Removal is one cluster object `leasetune cleanup` writes: the env
// entries the project owns and its annotations go.
type Removal struct {
	Routing agentenv.Routing
	Env     []map[string]interface{}
	// Entries is true when agent env entries are removed (the agent then
	// restarts); false when only annotations go.
	Entries bool
}

// Removals lists what cleanup would remove from the clusters.
func (r *Report) Removals() ([]Removal, error) {
	var out []Removal
	for _, rt := range r.clusters {
		env, removed, err := rt.Strip()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rt.TargetRef, err)
		}
		_, rec := rt.Target.GetAnnotations()[agentenv.RecordAnnotation]
		_, status := rt.Source.GetAnnotations()[agentenv.StatusAnnotation]
		if removed || rec || status {
			out = append(out, Removal{Routing: rt, Env: env, Entries: removed})
		}
	}
	return out, nil
}

// PrintRemovals lists the removals and what cleanup leaves.
func PrintRemovals(w io.Writer, rs []Removal, opts Options) {
	for _, rm := range rs {
		if rm.Entries {
			fmt.Fprintf(w, "%s\n  spec.agentEnvVars: %s → %s\n  restarts: %s\n", rm.Routing.TargetRef, envString(rm.Routing.Target), envItems(rm.Env), restarts(rm.Routing))
		} else {
			fmt.Fprintf(w, "%s\n  annotations %s, %s removed (no restart)\n", rm.Routing.TargetRef, agentenv.RecordAnnotation, agentenv.StatusAnnotation)
		}
	}
	fmt.Fprintf(w, "ConfigMaps %s/leasetune-state and %s/%s: deleted\n", opts.Namespace, opts.Namespace, fleetsettings.ChannelConfigMapName)
	fmt.Fprintf(w, `
Left in place: the CATTLE_ELECTION_* and FLEET_AGENT_ELECTION_* values on the Fleet
Deployments and in rancher-config (removing them would send those processes back to
wrangler's 2s retry; the next helm upgrade of Fleet resets them to the chart's values),
and the Setting objects (your values).
`)
}

// ApplyCleanup removes what Removals listed, each write with the
// resourceVersion read, and deletes the project's state ConfigMaps.
func ApplyCleanup(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, rs []Removal, opts Options) error {
	for _, rm := range rs {
		rt := rm.Routing
		if err := agentenv.Write(ctx, dyn, rt.TargetRef, rt.Target.GetResourceVersion(), rm.Env, nil); err != nil {
			return fmt.Errorf("%s: %w (run cleanup again)", rt.TargetRef, err)
		}
		if _, ok := rt.Source.GetAnnotations()[agentenv.StatusAnnotation]; ok {
			body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
				"annotations": map[string]interface{}{agentenv.StatusAnnotation: nil}}})
			var r dynamic.ResourceInterface = dyn.Resource(rt.SourceRef.GVR)
			if rt.SourceRef.Namespace != "" {
				r = dyn.Resource(rt.SourceRef.GVR).Namespace(rt.SourceRef.Namespace)
			}
			if _, err := r.Patch(ctx, rt.SourceRef.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: agentenv.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: %w", rt.SourceRef, err)
			}
		}
	}
	for _, name := range []string{settings.DefaultStateName, fleetsettings.ChannelConfigMapName} {
		if err := cs.CoreV1().ConfigMaps(opts.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
