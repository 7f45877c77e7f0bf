package e2e_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

func runCLI(t *testing.T, e env, args ...string) string {
	t.Helper()
	args = append(args, "--kubeconfig", kubeconfig, "--namespace", e.ns, "--fleet-namespace", e.fleetNS, "--rancher-namespace", e.rancherNS)
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("leasetune %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestPlanWritesNothingAndCleanupRemovesWhatWasWritten: plan lists the
// writes the controller would make (Deployments, and cluster env where
// Fleet's agent manifest renders no election names) and writes nothing;
// cleanup lists and, with --yes, removes what leasetune wrote to clusters
// (entries and record on Fleet v0.9.9; on v0.14, where no cluster is
// written, the status annotation reporting the override) and its state,
// and leaves the Deployments alone.
func TestPlanWritesNothingAndCleanupRemovesWhatWasWritten(t *testing.T) {
	t.Run(fleetV014, func(t *testing.T) { planAndCleanup(t, fleetV014) })
	t.Run(fleetV09, func(t *testing.T) { planAndCleanup(t, fleetV09) })
}

func planAndCleanup(t *testing.T, fleetVersion string) {
	e := newEnv(t)
	installFleet(t, e, fleetVersion)
	clusterNS := cp.Namespace(t)
	const proxy = "HTTPS_PROXY=http://proxy:3128"
	addCluster(t, clusterNS, "edge-1", map[string]string{"election.cattle.io/retry-period": "5s"})
	edge1 := "clusters.fleet.cattle.io " + clusterNS + "/edge-1"
	// Settings as a user left them while the controller was not running.
	p := start(t, e, "seed") // creates the Setting objects and converges...
	switch fleetVersion {
	case fleetV014:
		framework.Eventually(t, "converged", func() bool {
			return strings.Contains(annotations(t, fleetGVR, clusterNS, "edge-1")[agentenv.StatusAnnotation], "cannot be applied on agentmanagement")
		})
		if got := clusterEnv(t, clusterNS, "edge-1"); got != proxy {
			t.Errorf("edge-1 written on Fleet v0.14: %s", got)
		}
	case fleetV09:
		framework.Eventually(t, "converged", func() bool { return strings.HasSuffix(clusterEnv(t, clusterNS, "edge-1"), "RETRY_PERIOD=5s") })
	}
	if code := p.term(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	setSetting(t, "fleet-leader-election-retry-period", "4s")          // ...these changes are not applied yet
	setSetting(t, "fleet-agent-leader-election-lease-duration", "40s") //

	before := versions(t, e)
	out := runCLI(t, e, "plan")
	wants := []string{
		"fleet-controller: leaseDuration=30s renewDeadline=25s retryPeriod=4s",
		"fleet-agent: leaseDuration=40s renewDeadline=25s retryPeriod=10s",
		"Deployment " + e.fleetNS + "/gitjob\n  container gitjob env CATTLE_ELECTION_RETRY_PERIOD: 10s → 4s\n  restarts: a rollout of gitjob",
	}
	var unwanted []string
	switch fleetVersion {
	case fleetV014:
		wants = append(wants,
			"fleet agent channel: agentmanagement",
			"Deployment "+e.fleetNS+"/fleet-controller\n  container fleet-agentmanagement env CATTLE_ELECTION_RETRY_PERIOD: 10s → 4s",
			"Deployment "+e.fleetNS+"/fleet-controller\n  container fleet-agentmanagement env FLEET_AGENT_ELECTION_LEASE_DURATION: 30s → 40s",
			"left alone: "+edge1+": unsupported: per-cluster overrides cannot be applied on agentmanagement")
		unwanted = append(unwanted, edge1+"\n  spec.agentEnvVars")
	case fleetV09:
		wants = append(wants,
			"fleet agent channel: cluster-env-v0.9",
			"Deployment "+e.fleetNS+"/fleet-controller\n  container fleet-controller env CATTLE_ELECTION_RETRY_PERIOD: 10s → 4s",
			edge1+"\n  spec.agentEnvVars: "+proxy+" CATTLE_ELECTION_LEASE_DURATION=30s CATTLE_ELECTION_RENEW_DEADLINE=25s CATTLE_ELECTION_RETRY_PERIOD=5s → "+
				proxy+" CATTLE_ELECTION_LEASE_DURATION=40s CATTLE_ELECTION_RENEW_DEADLINE=25s CATTLE_ELECTION_RETRY_PERIOD=5s\n  restarts: fleet-agent\n")
		unwanted = append(unwanted, "left alone: "+edge1, "FLEET_AGENT_ELECTION")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	for _, u := range unwanted {
		if strings.Contains(out, u) {
			t.Errorf("plan output has %q:\n%s", u, out)
		}
	}
	if after := versions(t, e); after != before {
		t.Errorf("plan wrote something")
	}

	// cleanup without --yes lists and removes nothing.
	out = runCLI(t, e, "cleanup")
	var listing string
	switch fleetVersion {
	case fleetV014:
		// Nothing was written to the cluster's env: only the status
		// annotation goes, and no agent restarts.
		listing = edge1 + "\n  annotation leasetune.io/agent-env-status: would be removed (no restart)\n"
	case fleetV09:
		listing = edge1 + "\n  spec.agentEnvVars: " + proxy + " CATTLE_ELECTION_LEASE_DURATION=30s CATTLE_ELECTION_RENEW_DEADLINE=25s CATTLE_ELECTION_RETRY_PERIOD=5s → " + proxy +
			"\n  annotation leasetune.io/agent-env: would be removed\n  restarts: fleet-agent\n"
	}
	if !strings.Contains(out, listing) || !strings.Contains(out, "Nothing was removed") {
		t.Errorf("cleanup listing lacks %q:\n%s", listing, out)
	}
	if after := versions(t, e); after != before {
		t.Errorf("cleanup without --yes wrote something")
	}
	runCLI(t, e, "cleanup", "--yes")
	if got := clusterEnv(t, clusterNS, "edge-1"); got != proxy {
		t.Errorf("after cleanup: %s", got)
	}
	ann := annotations(t, fleetGVR, clusterNS, "edge-1")
	for _, a := range []string{agentenv.RecordAnnotation, agentenv.StatusAnnotation} {
		if _, ok := ann[a]; ok {
			t.Errorf("after cleanup edge-1 keeps %s: %q", a, ann[a])
		}
	}
	if ann["election.cattle.io/retry-period"] != "5s" {
		t.Errorf("cleanup removed the user's override: %v", ann)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "leasetune-state", metav1.GetOptions{}); err == nil {
		t.Error("state ConfigMap left")
	}
	if controllerTriple(t, e, "gitjob") != kit.Timings("30s", "25s", "10s") {
		t.Error("cleanup touched a Deployment")
	}
}
