package agentenv

import (
	"fmt"
	"strings"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Ref names one cluster object.
type Ref struct {
	GVR             schema.GroupVersionResource
	Namespace, Name string
}

// String names the object as kubectl would: "clusters.fleet.cattle.io
// fleet-default/edge-1", "clusters.management.cattle.io c-m-abc".
func (r Ref) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s.%s %s", r.GVR.Resource, r.GVR.Group, r.Name)
	}
	return fmt.Sprintf("%s.%s %s/%s", r.GVR.Resource, r.GVR.Group, r.Namespace, r.Name)
}

func refOf(gvr schema.GroupVersionResource, u *unstructured.Unstructured) Ref {
	return Ref{GVR: gvr, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Routing says, for one fleet Cluster, which object the controller reads
// and writes.
type Routing struct {
	// Target is the object that is the source of the cluster's agent env:
	// its spec.agentEnvVars is written and its override annotations apply.
	Target *unstructured.Unstructured
	// TargetRef names it.
	TargetRef Ref
	// RancherManaged is true when Rancher generates the fleet Cluster:
	// the env then also reaches cattle-cluster-agent, and on provisioned
	// clusters the system agent of every node.
	RancherManaged bool
	// Provisioned is true for RKE2/K3s clusters Rancher provisions.
	Provisioned bool
	// Replans is true when a write of the target's spec.agentEnvVars
	// re-runs system-agent's upgrade Plan on every node of the cluster:
	// provisioned clusters (their Plans carry the provisioning Cluster's
	// env), and, beside Rancher v2.15+, imported RKE2/K3s clusters with
	// day-2 operations (rancher.ImportedDay2Ops: their Plans carry the
	// management Cluster's env).
	Replans bool
	// ClusterAgentReads is true when cattle-cluster-agent reads the
	// CATTLE_ELECTION_* entries of this list
	// (rancher.Version.ClusterAgentReadsElectionEnv).
	ClusterAgentReads bool
	// Legacy is true for legacy Rancher clusters (rancher.IsLegacyName),
	// whose management Cluster is the source.
	Legacy bool
	// Ignored are other objects of this cluster that carry override
	// annotations Rancher never copies there (so a user put them there):
	// they do not apply.
	Ignored []*unstructured.Unstructured
}

// hasOverride reports whether u carries an override annotation.
func hasOverride(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	_, set := OverridesOf(u)
	return set[0] || set[1] || set[2]
}

// Route decides which object is the source of a fleet Cluster's agent env
// (docs/design.md, "How the timings reach each process"; the facts and their sources are in pkg/rancher):
//
//   - standalone (no management.cattle.io/cluster-name label): the fleet
//     Cluster;
//   - legacy Rancher clusters (management name c-xxxxx or local): the
//     management Cluster, from which Rancher generates the provisioning
//     Cluster without env;
//   - imported clusters (no spec.rkeConfig) beside Rancher v2.11+: the
//     management Cluster (rancher.Version.ImportedSourceIsManagement);
//   - every other Rancher cluster, provisioned (RKE2/K3s) or imported
//     before v2.11: the provisioning Cluster, from which
//     provisioningv2/cluster/controller.go (createNewCluster) generates the
//     management Cluster's spec.agentEnvVars and annotations.
//
// Rancher then generates the fleet Cluster's env from the management
// Cluster (provisioningv2/fleetcluster/fleetcluster.go, createCluster). The
// generated objects are never written: Rancher would put them back.
//
// prov is the provisioning Cluster whose status.clusterName is the label's
// value (nil if none); mgmt the management Cluster of that name (nil if
// none). It returns an error when the source is not there (yet).
func Route(fc, prov, mgmt *unstructured.Unstructured, rv rancher.Version) (Routing, error) {
	mgmtName, managed := fc.GetLabels()[rancher.ClusterNameLabel]
	if !managed {
		return Routing{Target: fc, TargetRef: refOf(fleet.ClusterGVR, fc)}, nil
	}
	legacy := rancher.IsLegacyName(mgmtName)
	imported := prov != nil && !rancher.HasRKEConfig(prov)
	if legacy || (imported && rv.ImportedSourceIsManagement()) {
		if mgmt == nil {
			return Routing{}, fmt.Errorf("fleet Cluster %s/%s: management Cluster %q not found", fc.GetNamespace(), fc.GetName(), mgmtName)
		}
		rt := Routing{Target: mgmt, TargetRef: refOf(rancher.ManagementClusterGVR, mgmt), RancherManaged: true, Legacy: legacy,
			ClusterAgentReads: rv.ClusterAgentReadsElectionEnv(),
			Replans:           ManagementReplans(mgmt, rv)}
		// Rancher copies no election.cattle.io/* key to the provisioning or
		// the fleet Cluster here (CleanAnnotationsForExport drops keys
		// containing "cattle.io/"; v2.11's updateImportedCluster reads the
		// provisioning Cluster's annotations not at all): any there are a
		// user's, and do not apply.
		return rt.withIgnored(fc, prov), nil
	}
	if prov == nil {
		return Routing{}, fmt.Errorf("fleet Cluster %s/%s: no provisioning Cluster with status.clusterName %q", fc.GetNamespace(), fc.GetName(), mgmtName)
	}
	rt := Routing{Target: prov, TargetRef: refOf(rancher.ProvisioningClusterGVR, prov), RancherManaged: true, Provisioned: !imported, Replans: !imported,
		ClusterAgentReads: rv.ClusterAgentReadsElectionEnv()}
	// The management Cluster carries Rancher's copies of every annotation
	// of the provisioning Cluster: never reported. The fleet Cluster gets
	// none of election.cattle.io/* (fleetcluster.go copies annotations from
	// v2.9.3 through CleanAnnotationsForExport; none before).
	return rt.withIgnored(fc), nil
}

// ManagementReplans reports whether, beside Rancher rv, a write of the
// management Cluster mgmt's spec.agentEnvVars re-runs system-agent's
// upgrade Plan on every node of its cluster
// (rv.ImportedPlansReadAgentEnv and rancher.ImportedDay2Ops, which read
// the management Cluster alone, as Rancher's handler does: a legacy-named
// imported cluster counts too). Route and leasetune cleanup both ask it.
func ManagementReplans(mgmt *unstructured.Unstructured, rv rancher.Version) bool {
	if !rv.ImportedPlansReadAgentEnv() {
		return false
	}
	driver, _, _ := unstructured.NestedString(mgmt.Object, "status", "driver")
	return rancher.ImportedDay2Ops(mgmt.GetName(), mgmt.GetLabels(), mgmt.GetAnnotations(), driver)
}

// IsSource reports whether u, an object of kind gvr, is the source of a
// cluster's agent env by the same rules as Route, from the object alone
// (its fleet Cluster may be gone): a fleet Cluster without the
// management label; a provisioning Cluster whose management name is not
// legacy, unless it is imported beside Rancher v2.11+; a management Cluster
// with a legacy name, or of an imported cluster beside v2.11+ (prov is its
// provisioning Cluster, nil if none). Objects Rancher generates are not.
func IsSource(gvr schema.GroupVersionResource, u, prov *unstructured.Unstructured, rv rancher.Version) bool {
	switch gvr {
	case fleet.ClusterGVR:
		_, managed := u.GetLabels()[rancher.ClusterNameLabel]
		return !managed
	case rancher.ProvisioningClusterGVR:
		name := rancher.ManagementNameOf(u)
		if name == "" {
			name = u.GetName()
		}
		return !rancher.IsLegacyName(name) && (rancher.HasRKEConfig(u) || !rv.ImportedSourceIsManagement())
	case rancher.ManagementClusterGVR:
		return rancher.IsLegacyName(u.GetName()) || (rv.ImportedSourceIsManagement() && prov != nil && !rancher.HasRKEConfig(prov))
	}
	return false
}

// withIgnored records the objects other than the target that carry
// override annotations.
func (rt Routing) withIgnored(objs ...*unstructured.Unstructured) Routing {
	for _, o := range objs {
		if o != nil && o != rt.Target && hasOverride(o) {
			rt.Ignored = append(rt.Ignored, o)
		}
	}
	return rt
}

// Strip returns the agent env of an object the project wrote to, without
// the entries its record shows (with the recorded value), and whether there
// were any: what `leasetune cleanup` writes. When another CATTLE_ELECTION_*
// entry is there too (someone edited one the project wrote), removing the
// rest would leave a partial triple the agent may refuse, so it returns an
// error and the object is to be left as it is.
func Strip(u *unstructured.Unstructured) ([]map[string]interface{}, bool, error) {
	env, err := EnvVars(u)
	if err != nil {
		return nil, false, err
	}
	rec := ownRecord(u)
	var out []map[string]interface{}
	var foreign []string
	for _, e := range env {
		name, _ := e["name"].(string)
		if !election.CattlePrefix.Owns(name) {
			out = append(out, e)
			continue
		}
		value, isString := e["value"].(string)
		_, fromSource := e["valueFrom"]
		if want, ok := rec[name]; !ok || !isString || fromSource || want != value {
			foreign = append(foreign, fmt.Sprintf("%s=%q", name, value))
			out = append(out, e)
		}
	}
	removed := len(out) < len(env)
	if removed && len(foreign) > 0 {
		return nil, false, fmt.Errorf("spec.agentEnvVars has %s, which leasetune did not write: removing its own entries would leave a partial triple", strings.Join(foreign, ", "))
	}
	return out, removed, nil
}
