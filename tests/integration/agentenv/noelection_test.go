package agentenv_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// TestNoElectionChannelRetunesClusterAgents: beside Fleet v0.10–v0.11
// (Rancher v2.9, v2.10; channel none), whose agents run no leader
// election, a cluster's override reaches only Rancher's
// cattle-cluster-agent (its own lock kube-system/cattle-controllers): on a
// Rancher-managed cluster leasetune writes CATTLE_ELECTION_* on the source
// (the provisioning Cluster), once; on a standalone fleet Cluster nothing
// reads it, so nothing is written and the cluster is reported; the global
// agent triple alone writes nothing anywhere (docs/support.md).
func TestNoElectionChannelRetunesClusterAgents(t *testing.T) {
	defer useFleetCRD(t, "v0.14.10")
	useFleetCRD(t, "v0.12.0") // the nearest fixture CRD: v0.10–v0.11's Cluster has the same fields leasetune reads
	ns := cp.Namespace(t)
	ctx := context.Background()
	over := map[string]string{agentenv.RetryPeriodAnnotation: "5s"}
	// A Rancher-managed cluster (provisioned through the current UI).
	mgmtName := ns + "-prov"
	cp.Create(t, mgmtGVR, kit.ManagementCluster(mgmtName, kit.WithSpec(map[string]interface{}{"displayName": "prod"}), kit.WithEnv(user)))
	p := cp.Create(t, provGVR, kit.ProvisioningCluster(ns, "prod", kit.WithSpec(map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1", "rkeConfig": map[string]interface{}{}}),
		kit.WithAnnotations(over), kit.WithEnv(user)))
	_ = unstructured.SetNestedField(p.Object, mgmtName, "status", "clusterName")
	if _, err := cp.Resource(provGVR, ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.Create(t, fleetGVR, fleetCluster(ns, "prod", kit.WithLabels(map[string]string{rancher.ClusterNameLabel: mgmtName}), kit.WithEnv(user)))
	// A standalone fleet Cluster with the same override, and one without.
	cp.Create(t, fleetGVR, fleetCluster(ns, "edge-1", kit.WithAnnotations(over), kit.WithEnv(user)))
	cp.Create(t, fleetGVR, fleetCluster(ns, "edge-2", kit.WithEnv(user)))

	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelNoElection)
	want := []string{"HTTPS_PROXY=http://proxy:3128", "CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	framework.Eventually(t, "the provisioning Cluster written for cattle-cluster-agent", func() bool {
		return reflect.DeepEqual(kit.AgentEnv(getObj(t, provGVR, ns, "prod")), want)
	})
	r.settle()
	// Two writes: the env of the provisioning Cluster, and edge-1's status
	// annotation saying why its override reaches nothing.
	w := r.writes.AcceptedByPath()
	if len(w) != 2 || w["/apis/provisioning.cattle.io/v1/namespaces/"+ns+"/clusters/prod"] != 1 || w["/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/clusters/edge-1"] != 1 {
		t.Errorf("writes %v, want one to the provisioning Cluster prod and one (the status) to edge-1", w)
	}
	for _, name := range []string{"edge-1", "edge-2", "prod"} {
		if got := kit.AgentEnv(getObj(t, fleetGVR, ns, name)); !reflect.DeepEqual(got, []string{"HTTPS_PROXY=http://proxy:3128"}) {
			t.Errorf("fleet Cluster %s: %v, want the user's entry alone", name, got)
		}
	}
	st := getObj(t, fleetGVR, ns, "edge-1").GetAnnotations()[agentenv.StatusAnnotation]
	if !strings.Contains(st, "no leader election") {
		t.Errorf("edge-1's status %q, want it to say its agent runs no leader election", st)
	}
	if st := getObj(t, fleetGVR, ns, "edge-2").GetAnnotations()[agentenv.StatusAnnotation]; st != "" {
		t.Errorf("edge-2 (no override): status %q, want none", st)
	}
}
