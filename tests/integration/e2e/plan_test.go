package e2e_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestPlanWritesNothingAndCleanupRemovesWhatWasWritten.
func TestPlanWritesNothingAndCleanupRemovesWhatWasWritten(t *testing.T) {
	e := newEnv(t)
	installFleet(t, e)
	clusterNS := cp.Namespace(t)
	addCluster(t, clusterNS, "edge-1", map[string]string{"election.cattle.io/retry-period": "5s"})
	// Settings as a user left them while the controller was not running.
	p := start(t, e, "seed") // creates the Setting objects and converges...
	eventually(t, "converged", func() bool { return strings.HasSuffix(clusterEnv(t, clusterNS, "edge-1"), "RETRY_PERIOD=5s") })
	if code := p.term(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	setSetting(t, "fleet-leader-election-retry-period", "4s") // ...this change is not applied yet

	before := versions(t, e)
	out := runCLI(t, e, "plan")
	for _, want := range []string{
		"fleet-controller: leaseDuration=30s renewDeadline=25s retryPeriod=4s",
		"fleet agent channel: agentmanagement",
		"Deployment " + e.fleetNS + "/gitjob\n  container gitjob env CATTLE_ELECTION_RETRY_PERIOD: 10s → 4s\n  restarts: a rollout of gitjob",
		"Deployment " + e.fleetNS + "/fleet-controller\n  container fleet-agentmanagement env CATTLE_ELECTION_RETRY_PERIOD: 10s → 4s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	if after := versions(t, e); after != before {
		t.Errorf("plan wrote something")
	}

	// cleanup without --yes lists and removes nothing.
	out = runCLI(t, e, "cleanup")
	if !strings.Contains(out, "clusters.fleet.cattle.io "+clusterNS+"/edge-1\n  spec.agentEnvVars: HTTPS_PROXY=http://proxy:3128 CATTLE_ELECTION_LEASE_DURATION=30s CATTLE_ELECTION_RENEW_DEADLINE=25s CATTLE_ELECTION_RETRY_PERIOD=5s → HTTPS_PROXY=http://proxy:3128") ||
		!strings.Contains(out, "Nothing was removed") {
		t.Errorf("cleanup listing:\n%s", out)
	}
	if after := versions(t, e); after != before {
		t.Errorf("cleanup without --yes wrote something")
	}
	runCLI(t, e, "cleanup", "--yes")
	if got := clusterEnv(t, clusterNS, "edge-1"); got != "HTTPS_PROXY=http://proxy:3128" {
		t.Errorf("after cleanup: %s", got)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "leasetune-state", metav1.GetOptions{}); err == nil {
		t.Error("state ConfigMap left")
	}
	if controllerTriple(t, e, "gitjob") != mustParse("30s", "25s", "10s") {
		t.Error("cleanup touched a Deployment")
	}
}
