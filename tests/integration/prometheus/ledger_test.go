package prometheus_test

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/controllers/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// The Events' messages, as pkg/settings (report.go: ledger) and
// pkg/controllers/agentenv (propagation.go: summary) write them.
var (
	ledgerRe  = regexp.MustCompile(`before this change leasetune's writes had restarted \(since its start\): (\d+) Fleet Deployment rollout\(s\), (\d+) Rancher rollout\(s\), (\d+) fleet-agent, (\d+) cattle-cluster-agent redeploy\(s\), (\d+) node plan\(s\)`)
	summaryRe = regexp.MustCompile(`(\d+) cluster\(s\) had CATTLE_ELECTION_\* written to their agent env and (\d+) had leasetune's entries removed, each redeploying its fleet-agent \((\d+) also cattle-cluster-agent, (\d+) re-planning every node\); (\d+) cluster\(s\) are left alone`)
)

// ledgerKinds are the restart ledger's kinds in the order of the
// TimingsApplied message.
var ledgerKinds = []string{"deployment-rollout", "rancher-rollout", "fleet-agent", "cattle-cluster-agent", "node-plan"}

// counts is what the dashboard shows at one time: the restart ledger by
// kind, the writes by target, and the clusters left alone.
type counts struct {
	restarts, writes string // sorted "key=value" lists, comparable
	r, w             map[string]float64
	leftAlone        float64
}

func (c counts) String() string { return "restarts " + c.restarts + "; writes " + c.writes }

func canon(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%g", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// dashboardCounts evaluates the dashboard's restart ledger, writes and
// clusters-left-alone panels now.
func (e *env) dashboardCounts(t *testing.T) (counts, error) {
	t.Helper()
	r, err := e.prom.byLabel(expand(t, e.dashboardQuery(t, "leasetune_restarts_total"), time.Minute), "kind", time.Time{})
	if err != nil {
		return counts{}, err
	}
	w, err := e.prom.byLabel(expand(t, e.dashboardQuery(t, "leasetune_writes_total"), time.Minute), "target", time.Time{})
	if err != nil {
		return counts{}, err
	}
	left, err := e.prom.total(expand(t, e.dashboardQuery(t, "leasetune_clusters_left_alone"), time.Minute), time.Time{})
	if err != nil {
		return counts{}, err
	}
	return counts{restarts: canon(r), writes: canon(w), r: r, w: w, leftAlone: left}, nil
}

// settled waits until the dashboard's counts have not changed for 3 s
// (several scrapes after the controller's last write) and returns them.
func (e *env) settled(t *testing.T, what string) counts {
	t.Helper()
	var last counts
	s := framework.WaitQuiet(t, what, 3*time.Second, time.Minute, func() (string, bool) {
		c, err := e.dashboardCounts(t)
		if err != nil {
			return err.Error(), false
		}
		last = c
		return c.String(), true
	}, func(time.Time) string { return last.String() })
	if s != last.String() {
		t.Fatalf("%s: settled on %q, last read %q", what, s, last)
	}
	return last
}

// fromEvents is the restart ledger and the clusters left alone as the
// controller's Events tell them: every AgentTimingsPropagated summary
// (on the fleet-agent retry-period Setting; the other two carry the same),
// every AgentEnvUpdated Event of a cluster written on its own, and every
// RancherElectionEnvUpdated Event on the Rancher Deployment.
// deployment-rollout is not in an Event of its own: the TimingsApplied
// ledger says it.
type fromEvents struct {
	restarts  map[string]float64
	leftAlone float64 // from the latest summary
	summaries []string
}

func (e *env) fromEvents(t *testing.T) fromEvents {
	t.Helper()
	out := fromEvents{restarts: map[string]float64{}}
	for _, ev := range events(t, "", "fleet-agent-leader-election-retry-period", agentenvcontroller.ReasonPropagated) {
		out.summaries = append(out.summaries, ev.message)
		n := ints(summaryRe, ev.message)
		if n == nil {
			if !strings.Contains(ev.message, "needed no change") {
				t.Fatalf("an %s Event this test cannot read: %q", agentenvcontroller.ReasonPropagated, ev.message)
			}
			continue
		}
		c := float64(ev.count)
		out.restarts["fleet-agent"] += c * float64(n[0]+n[1])
		out.restarts["cattle-cluster-agent"] += c * float64(n[2])
		out.restarts["node-plan"] += c * float64(n[3])
		out.leftAlone = float64(n[4])
	}
	for _, ev := range events(t, "", "", agentenvcontroller.ReasonUpdated) {
		c := float64(ev.count)
		out.restarts["fleet-agent"] += c
		if strings.Contains(ev.message, "cattle-cluster-agent") {
			out.restarts["cattle-cluster-agent"] += c
		}
		if strings.Contains(ev.message, "system agent on every node") {
			out.restarts["node-plan"] += c
		}
	}
	for _, ev := range events(t, e.rancherNS, "rancher", rancherenv.ReasonUpdated) {
		out.restarts["rancher-rollout"] += float64(ev.count)
	}
	return out
}

// ledgerOf returns the ledger a TimingsApplied Event quotes (before its
// change), by kind.
func ledgerOf(t *testing.T, msg string) map[string]float64 {
	t.Helper()
	n := ints(ledgerRe, msg)
	if n == nil {
		t.Fatalf("a %s Event without the ledger this test reads: %q", settings.ReasonApplied, msg)
	}
	out := map[string]float64{}
	for i, k := range ledgerKinds {
		out[k] = float64(n[i])
	}
	return out
}

// appliedWith waits for the TimingsApplied Event on the Setting name whose
// message names triple, and returns its message.
func appliedWith(t *testing.T, name, triple string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, "TimingsApplied for "+triple+" on "+name, func() bool {
		for _, ev := range events(t, "", name, settings.ReasonApplied) {
			if strings.Contains(ev.message, triple) {
				msg = ev.message
				return true
			}
		}
		return false
	})
	return msg
}

// sameLedger fails t unless the dashboard's restart ledger (zero where a
// kind has no series yet) equals want for every kind.
func sameLedger(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for _, k := range ledgerKinds {
		if got[k] != want[k] {
			t.Errorf("%s: %s: the dashboard shows %g, the Events say %g (dashboard %v, Events %v)", what, k, got[k], want[k], got, want)
		}
	}
}

// TestRestartLedgerMatchesEvents: the dashboard's restart ledger, writes
// and clusters left alone, evaluated by Prometheus from leasetune's
// /metrics, equal what the controller's Events say, at start-up (the
// first pass writes the Fleet v0.9.9 clusters), after a change of the
// fleet-agent triple (every cluster but the one left alone written, its
// agents redeployed) and after a change of Rancher's triple (one Rancher
// rollout); and the TimingsApplied Event of each change quotes the ledger
// the dashboard showed just before it.
func TestRestartLedgerMatchesEvents(t *testing.T) {
	e := sharedEnv(t)
	t.Parallel()

	// Start-up: the first pass over the clusters is summed up in one Event.
	framework.Eventually(t, "the first pass's AgentTimingsPropagated Event", func() bool {
		return len(e.fromEvents(t).summaries) > 0
	})
	c0 := e.settled(t, "the dashboard after start-up")
	ev0 := e.fromEvents(t)
	t.Logf("after start-up: %s; Events: %v", c0, ev0.summaries)
	for _, k := range []string{"fleet-agent", "cattle-cluster-agent", "node-plan", "rancher-rollout"} {
		if c0.r[k] != ev0.restarts[k] {
			t.Errorf("after start-up, %s: the dashboard shows %g, the Events say %g", k, c0.r[k], ev0.restarts[k])
		}
	}
	if ev0.restarts["fleet-agent"] != 3 || ev0.restarts["cattle-cluster-agent"] != 2 || ev0.restarts["node-plan"] != 1 {
		t.Errorf("start-up restarts from the Events %v: want 3 fleet-agent (edge-1, legacy, rke2), 2 cattle-cluster-agent, 1 node plan", ev0.restarts)
	}
	if c0.leftAlone != 1 || ev0.leftAlone != 1 {
		t.Errorf("clusters left alone: the dashboard shows %g, the Event says %g; want 1 (%s)", c0.leftAlone, ev0.leftAlone, invalidCluster)
	}
	if c0.r["deployment-rollout"] == 0 || c0.w["deployment"] != c0.r["deployment-rollout"] {
		t.Errorf("Fleet Deployment writes %g and rollouts %g: want equal and not zero (the Fleet v0.9.9 Deployments get CATTLE_ELECTION_*)", c0.w["deployment"], c0.r["deployment-rollout"])
	}

	// A new fleet-agent triple.
	const agentTriple = "leaseDuration=40s renewDeadline=30s retryPeriod=5s"
	if err := e.patchSettings("fleet-agent-leader-election-lease-duration", "40s",
		"fleet-agent-leader-election-renew-deadline", "30s", "fleet-agent-leader-election-retry-period", "5s"); err != nil {
		t.Fatal(err)
	}
	sameLedger(t, "the ledger quoted by the agent triple's TimingsApplied", c0.r,
		ledgerOf(t, appliedWith(t, "fleet-agent-leader-election-retry-period", agentTriple)))
	framework.Eventually(t, "the agent triple's AgentTimingsPropagated Event", func() bool {
		s := e.fromEvents(t).summaries
		return len(s) > 0 && strings.Contains(strings.Join(s, "\n"), "the agent triple "+agentTriple+" is propagated")
	})
	c1 := e.settled(t, "the dashboard after the agent triple change")
	ev1 := e.fromEvents(t)
	t.Logf("after the agent triple change: %s; Events: %v", c1, ev1.summaries)
	for _, k := range []string{"fleet-agent", "cattle-cluster-agent", "node-plan", "rancher-rollout"} {
		if c1.r[k] != ev1.restarts[k] {
			t.Errorf("after the agent change, %s: the dashboard shows %g, the Events say %g", k, c1.r[k], ev1.restarts[k])
		}
	}
	if d := c1.r["fleet-agent"] - c0.r["fleet-agent"]; d != 3 {
		t.Errorf("the agent change redeployed %g fleet-agents on the dashboard, want 3", d)
	}
	if c1.w["cluster"] != c1.r["fleet-agent"] || c1.leftAlone != ev1.leftAlone || c1.leftAlone != 1 {
		t.Errorf("cluster writes %g, fleet-agent restarts %g; left alone: dashboard %g, Event %g (want 1)", c1.w["cluster"], c1.r["fleet-agent"], c1.leftAlone, ev1.leftAlone)
	}

	// A new Rancher triple: one rollout of the Rancher Deployment.
	const rancherTriple = "leaseDuration=45s renewDeadline=30s retryPeriod=5s"
	if err := e.patchSettings("rancher-leader-election-retry-period", "5s"); err != nil {
		t.Fatal(err)
	}
	sameLedger(t, "the ledger quoted by Rancher's TimingsApplied", c1.r,
		ledgerOf(t, appliedWith(t, "rancher-leader-election-retry-period", rancherTriple)))
	framework.Eventually(t, "a RancherElectionEnvUpdated Event", func() bool {
		return e.fromEvents(t).restarts["rancher-rollout"] > 0
	})
	c2 := e.settled(t, "the dashboard after Rancher's triple change")
	ev2 := e.fromEvents(t)
	t.Logf("after Rancher's triple change: %s", c2)
	if c2.r["rancher-rollout"] != ev2.restarts["rancher-rollout"] || c2.r["rancher-rollout"] != 1 || c2.w["rancher-deployment"] != 1 {
		t.Errorf("Rancher rollouts: the dashboard shows %g (writes %g), the Events say %g; want 1", c2.r["rancher-rollout"], c2.w["rancher-deployment"], ev2.restarts["rancher-rollout"])
	}
	for _, k := range []string{"deployment-rollout", "fleet-agent", "cattle-cluster-agent", "node-plan"} {
		if c2.r[k] != c1.r[k] {
			t.Errorf("Rancher's change moved %s on the dashboard: %g → %g", k, c1.r[k], c2.r[k])
		}
	}

	// The propagation time the dashboard shows is that of the last writes.
	prop, err := e.prom.byLabel(expand(t, e.dashboardQuery(t, "leasetune_last_propagation_duration_seconds"), time.Minute), "controller", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if prop["agentenv"] <= 0 || prop["agentenv"] > 30 {
		t.Errorf("propagation duration of agentenv on the dashboard: %g s, want more than 0 and under 30 (3 clusters, unpaced)", prop["agentenv"])
	}
	t.Logf("propagation durations on the dashboard: %v", prop)
}
