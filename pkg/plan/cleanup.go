package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/settings"
)

// clusterObject is one object of the three cluster kinds.
type clusterObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

func (o clusterObject) ref() agentenv.Ref {
	return agentenv.Ref{GVR: o.gvr, Namespace: o.obj.GetNamespace(), Name: o.obj.GetName()}
}

// restarts says what a change of this object's agent env redeploys.
func (o clusterObject) restarts() string {
	switch {
	case o.gvr == agentenv.ProvisioningClusterGVR:
		return "fleet-agent, cattle-cluster-agent, the system agent on every node"
	case o.gvr == agentenv.ManagementClusterGVR:
		return "fleet-agent, cattle-cluster-agent"
	}
	return "fleet-agent"
}

// Removal is one cluster object `leasetune cleanup` writes: the env
// entries the project owns and its annotations go.
type Removal struct {
	Object clusterObject
	Env    []map[string]interface{}
	// Entries is true when agent env entries are removed (the agent then
	// restarts); false when only annotations go.
	Entries bool
}

// Removals lists what cleanup would remove: from every cluster object
// that carries the project's record or status annotation, wherever the
// controller routes today (a cluster may have moved, or its fleet Cluster
// be gone). An object where removing the project's entries would leave a
// partial triple is listed in LeftAlone and not touched.
func (r *Report) Removals() []Removal {
	var out []Removal
	for _, o := range r.objects {
		ann := o.obj.GetAnnotations()
		_, rec := ann[agentenv.RecordAnnotation]
		_, status := ann[agentenv.StatusAnnotation]
		if !rec && !status {
			continue
		}
		env, removed, err := agentenv.Strip(o.obj)
		if err != nil {
			r.LeftAlone = append(r.LeftAlone, fmt.Sprintf("%s: %v", o.ref(), err))
			continue
		}
		out = append(out, Removal{Object: o, Env: env, Entries: removed})
	}
	return out
}

// PrintRemovals lists the removals and what cleanup leaves.
func PrintRemovals(w io.Writer, rs []Removal, opts Options) {
	for _, rm := range rs {
		if rm.Entries {
			fmt.Fprintf(w, "%s\n  spec.agentEnvVars: %s → %s\n  restarts: %s\n", rm.Object.ref(), envString(rm.Object.obj), envItems(rm.Env), rm.Object.restarts())
		} else {
			fmt.Fprintf(w, "%s\n  annotations %s, %s removed (no restart)\n", rm.Object.ref(), agentenv.RecordAnnotation, agentenv.StatusAnnotation)
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
		ref, obj := rm.Object.ref(), rm.Object.obj
		if _, rec := obj.GetAnnotations()[agentenv.RecordAnnotation]; rec {
			if err := agentenv.Write(ctx, dyn, ref, obj.GetResourceVersion(), rm.Env, nil); err != nil {
				return fmt.Errorf("%s: %w (run cleanup again)", ref, err)
			}
		}
		if _, ok := obj.GetAnnotations()[agentenv.StatusAnnotation]; ok {
			body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
				"annotations": map[string]interface{}{agentenv.StatusAnnotation: nil}}})
			var res dynamic.ResourceInterface = dyn.Resource(ref.GVR)
			if ref.Namespace != "" {
				res = dyn.Resource(ref.GVR).Namespace(ref.Namespace)
			}
			if _, err := res.Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: agentenv.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: %w", ref, err)
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
