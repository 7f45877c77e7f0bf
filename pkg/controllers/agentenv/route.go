package agentenv

import (
	"fmt"
	"strings"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"

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

// Routing says, for one fleet Cluster, which objects the controller reads
// and writes.
type Routing struct {
	// Target is the object whose spec.agentEnvVars is written.
	Target *unstructured.Unstructured
	// TargetRef names it.
	TargetRef Ref
	// Source is the object whose override annotations apply.
	Source *unstructured.Unstructured
	// SourceRef names it.
	SourceRef Ref
	// RancherManaged is true when Rancher generates the fleet Cluster:
	// the env then also reaches cattle-cluster-agent, and on provisioned
	// clusters the system agent of every node.
	RancherManaged bool
	// Provisioned is true for RKE2/K3s clusters Rancher provisions.
	Provisioned bool
	// Ignored are the other objects of this cluster that carry override
	// annotations, which do not apply (they are read from Source only).
	Ignored []*unstructured.Unstructured
}

// hasOverride reports whether u carries an override annotation.
func hasOverride(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	_, set := overrides(u)
	return set[0] || set[1] || set[2]
}

// withIgnored records the objects other than the source that carry
// override annotations.
func (rt Routing) withIgnored(objs ...*unstructured.Unstructured) Routing {
	for _, o := range objs {
		if o != nil && o != rt.Source && hasOverride(o) {
			rt.Ignored = append(rt.Ignored, o)
		}
	}
	return rt
}

// Route decides where the override annotations of a fleet Cluster are read
// and where its agent env is written (DESIGN.md section 2):
//
//	standalone (no management.cattle.io/cluster-name label): the fleet Cluster, for both;
//	Rancher-provisioned (provisioning Cluster with spec.rkeConfig): the provisioning Cluster, for both;
//	imported or legacy: annotations from the provisioning Cluster, else the
//	management Cluster; env written on the management Cluster.
//
// prov is the provisioning Cluster whose status.clusterName is the label's
// value (nil if none); mgmt the management Cluster of that name (nil if
// none). It returns an error when a Rancher-managed cluster's writable
// object is not there (yet).
func Route(fc, prov, mgmt *unstructured.Unstructured) (Routing, error) {
	mgmtName, managed := fc.GetLabels()[MgmtNameLabel]
	if !managed {
		r := refOf(FleetClusterGVR, fc)
		return Routing{Target: fc, TargetRef: r, Source: fc, SourceRef: r}, nil
	}
	if prov != nil && hasRKEConfig(prov) {
		r := refOf(ProvisioningClusterGVR, prov)
		return Routing{Target: prov, TargetRef: r, Source: prov, SourceRef: r, RancherManaged: true, Provisioned: true}.withIgnored(fc, mgmt), nil
	}
	if mgmt == nil {
		return Routing{}, fmt.Errorf("fleet Cluster %s/%s: management Cluster %q not found", fc.GetNamespace(), fc.GetName(), mgmtName)
	}
	out := Routing{Target: mgmt, TargetRef: refOf(ManagementClusterGVR, mgmt), RancherManaged: true}
	if prov != nil {
		out.Source, out.SourceRef = prov, refOf(ProvisioningClusterGVR, prov)
	} else {
		out.Source, out.SourceRef = mgmt, out.TargetRef
	}
	return out.withIgnored(fc, mgmt), nil
}

// Decide runs Decide on the routed objects: the target's agent env and
// ownership record, the source's override annotations.
func (rt Routing) Decide(global election.Timings, channel fleet.AgentChannel) Decision {
	env, err := agentEnvVars(rt.Target)
	if err != nil {
		return Decision{Problem: ProblemForeign, Err: err}
	}
	vals, set := overrides(rt.Source)
	return Decide(env, ownRecord(rt.Target), vals, set, global, channel)
}

// Strip returns the agent env of an object the project wrote to, without
// the entries its record shows (with the recorded value), and whether there
// were any: what `leasetune cleanup` writes. When another CATTLE_ELECTION_*
// entry is there too (someone edited one the project wrote), removing the
// rest would leave a partial triple the agent may refuse, so it returns an
// error and the object is to be left as it is.
func Strip(u *unstructured.Unstructured) ([]map[string]interface{}, bool, error) {
	env, err := agentEnvVars(u)
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
