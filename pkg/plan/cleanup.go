package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/patch"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// clusterObject is one object of the three cluster kinds.
type clusterObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
	// rv is the Rancher version beside which it is written.
	rv rancher.Version
}

func (o clusterObject) ref() agentenv.Ref {
	return agentenv.Ref{GVR: o.gvr, Namespace: o.obj.GetNamespace(), Name: o.obj.GetName()}
}

// restarts says what a change of this object's agent env redeploys.
func (o clusterObject) restarts() string {
	switch o.gvr {
	case rancher.ProvisioningClusterGVR:
		if v, found, _ := unstructured.NestedFieldNoCopy(o.obj.Object, "spec", "rkeConfig"); found && v != nil {
			return "fleet-agent, cattle-cluster-agent and the system agent on every node"
		}
		return "fleet-agent and cattle-cluster-agent"
	case rancher.ManagementClusterGVR:
		if agentenv.ManagementReplans(o.obj, o.rv) {
			return "fleet-agent, cattle-cluster-agent and the system agent on every node"
		}
		return "fleet-agent and cattle-cluster-agent"
	}
	return "fleet-agent"
}

// clusterObjects are every cluster object of the three kinds: the fleet,
// then the provisioning, then the management Clusters, each in list order.
func clusterObjects(snap *inventory.Snapshot) []clusterObject {
	var out []clusterObject
	for _, l := range []struct {
		gvr   schema.GroupVersionResource
		items []unstructured.Unstructured
	}{
		{fleet.ClusterGVR, snap.FleetClusters},
		{rancher.ProvisioningClusterGVR, snap.ProvisioningClusters},
		{rancher.ManagementClusterGVR, snap.ManagementClusters},
	} {
		for i := range l.items {
			out = append(out, clusterObject{gvr: l.gvr, obj: &l.items[i], rv: snap.RancherVersion})
		}
	}
	return out
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

// Cleanup is what `leasetune cleanup` removes.
type Cleanup struct {
	Removals []Removal
	// LeftAlone lists the objects cleanup does not touch, and why.
	LeftAlone []string
	// Own lists the project's own objects that exist ("ConfigMap ns/name", …).
	Own []string
}

// ownObjects are the project's own objects in its namespace, by kind.
func ownObjects(opts Options) []struct{ kind, name string } {
	return []struct{ kind, name string }{
		{"ConfigMap", settings.DefaultStateName},
		{"ConfigMap", fleetenv.ChannelConfigMapName},
		{"Secret", own.WebhookSecret},
		{"Lease", opts.Lease()},
	}
}

// Lease is the controller's Lease: LeaseName, or own.Lease.
func (o Options) Lease() string {
	if o.LeaseName == "" {
		return own.Lease
	}
	return o.LeaseName
}

// Cleanup lists what cleanup would remove: from every object that is the
// source of a cluster's agent env (agentenv.IsSource, so also one whose
// fleet Cluster is gone) and carries the project's record or status
// annotation, and the project's own objects that exist. Objects Rancher
// generates are never written (Rancher would put them back, and the copies
// of the project's annotations there are Rancher's): they lose the entries
// when their source does. An object where removing the project's entries
// would leave a partial triple is left alone.
func (r *Report) Cleanup(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Cleanup, error) {
	c := &Cleanup{}
	provBy := r.snap.ProvisioningByClusterName()
	for _, o := range clusterObjects(r.snap) {
		ann := o.obj.GetAnnotations()
		_, rec := ann[agentenv.RecordAnnotation]
		_, status := ann[agentenv.StatusAnnotation]
		if !rec && !status {
			continue
		}
		if !agentenv.IsSource(o.gvr, o.obj, provBy[o.obj.GetName()], r.Rancher) {
			c.LeftAlone = append(c.LeftAlone, fmt.Sprintf("%s: leasetune's annotations there are Rancher's copies (Rancher generates this object): not written", o.ref()))
			continue
		}
		env, removed, err := agentenv.Strip(o.obj)
		if err != nil {
			c.LeftAlone = append(c.LeftAlone, fmt.Sprintf("%s: %v", o.ref(), err))
			continue
		}
		c.Removals = append(c.Removals, Removal{Object: o, Env: env, Entries: removed})
	}
	for _, oo := range ownObjects(opts) {
		var err error
		switch oo.kind {
		case "ConfigMap":
			_, err = cs.CoreV1().ConfigMaps(opts.Namespace).Get(ctx, oo.name, metav1.GetOptions{})
		case "Secret":
			_, err = cs.CoreV1().Secrets(opts.Namespace).Get(ctx, oo.name, metav1.GetOptions{})
		case "Lease":
			_, err = cs.CoordinationV1().Leases(opts.Namespace).Get(ctx, oo.name, metav1.GetOptions{})
		}
		switch {
		case err == nil:
			c.Own = append(c.Own, oo.kind+" "+opts.Namespace+"/"+oo.name)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	// The ElectionStatus the leader keeps (cluster scoped; its CRD stays,
	// as Helm leaves the CRDs it installed).
	if u, err := dyn.Resource(electionStatusGVR).Get(ctx, electionstatus.Name, metav1.GetOptions{}); err == nil {
		if u.GetLabels()[own.ManagedByLabel] == own.FieldManager {
			c.Own = append(c.Own, electionstatus.Kind+" "+electionstatus.Name)
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	return c, nil
}

// electionStatusGVR is the ElectionStatus resource.
var electionStatusGVR = schema.GroupVersionResource{Group: electionstatus.APIGroup, Version: electionstatus.Version, Resource: electionstatus.Resource}

// Print lists the cleanup; done says whether it has been applied. Each
// object names only the project's annotations it carries.
func (c *Cleanup) Print(w io.Writer, done bool) {
	// are is the verb for a subject of n things.
	are := func(n int) string {
		switch {
		case !done:
			return "would be"
		case n == 1:
			return "was"
		}
		return "were"
	}
	for _, rm := range c.Removals {
		ann := rm.Object.obj.GetAnnotations()
		var present []string
		for _, a := range []string{agentenv.RecordAnnotation, agentenv.StatusAnnotation} {
			if _, ok := ann[a]; ok {
				present = append(present, a)
			}
		}
		noun := "annotations"
		if len(present) == 1 {
			noun = "annotation"
		}
		annLine := fmt.Sprintf("%s %s: %s removed", noun, strings.Join(present, ", "), are(len(present)))
		if rm.Entries {
			fmt.Fprintf(w, "%s\n  spec.agentEnvVars: %s → %s\n  %s\n  restarts: %s\n",
				rm.Object.ref(), envString(rm.Object.obj), envItems(rm.Env), annLine, rm.Object.restarts())
		} else {
			fmt.Fprintf(w, "%s\n  %s (no restart)\n", rm.Object.ref(), annLine)
		}
	}
	for _, o := range c.Own {
		fmt.Fprintf(w, "%s: %s deleted\n", o, are(1))
	}
	if len(c.Removals) == 0 && len(c.Own) == 0 {
		fmt.Fprintln(w, "Nothing of leasetune's found (check --namespace).")
	}
	for _, l := range c.LeftAlone {
		fmt.Fprintf(w, "left alone: %s\n", l)
	}
	fmt.Fprint(w, `
Left in place: the CATTLE_ELECTION_* and FLEET_AGENT_ELECTION_* values on the Fleet
Deployments and in rancher-config (removing them would send those processes back to
wrangler's 2s retry; the next helm upgrade of Fleet resets them to the chart's values),
the Rancher Deployment's CATTLE_ELECTION_* entries and its leasetune.io/rancher-election-env
annotation (a helm upgrade of Rancher keeps them; to remove them, set the
rancher-leader-election-* settings back to their defaults while leasetune runs, and wait for
the Rancher rollout it makes), the Setting objects (your values) and the Setting CRD.
`)
}

// Apply removes what Cleanup listed, each cluster write with the
// resourceVersion read, and deletes the project's own objects.
func (c *Cleanup) Apply(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, opts Options) error {
	for _, rm := range c.Removals {
		ref, obj := rm.Object.ref(), rm.Object.obj
		if rm.Entries {
			if err := patch.Write(ctx, patch.DynamicPatcher{Client: dyn}, ref, obj.GetResourceVersion(), rm.Env, nil, nil); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: %w (run cleanup again)", ref, err)
			}
			continue
		}
		// Only annotations go: the env list is not written at all.
		body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{
			agentenv.RecordAnnotation: nil, agentenv.StatusAnnotation: nil}}})
		var res dynamic.ResourceInterface = dyn.Resource(ref.GVR)
		if ref.Namespace != "" {
			res = dyn.Resource(ref.GVR).Namespace(ref.Namespace)
		}
		if _, err := res.Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: own.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w", ref, err)
		}
	}
	for _, oo := range ownObjects(opts) {
		var err error
		switch oo.kind {
		case "ConfigMap":
			err = cs.CoreV1().ConfigMaps(opts.Namespace).Delete(ctx, oo.name, metav1.DeleteOptions{})
		case "Secret":
			err = cs.CoreV1().Secrets(opts.Namespace).Delete(ctx, oo.name, metav1.DeleteOptions{})
		case "Lease":
			err = cs.CoordinationV1().Leases(opts.Namespace).Delete(ctx, oo.name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s/%s: %w", oo.kind, opts.Namespace, oo.name, err)
		}
	}
	for _, o := range c.Own {
		if o != electionstatus.Kind+" "+electionstatus.Name {
			continue
		}
		if err := dyn.Resource(electionStatusGVR).Delete(ctx, electionstatus.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", electionstatus.Kind, electionstatus.Name, err)
		}
	}
	return nil
}
