package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/election"
)

func mustParse(l, r, p string) election.Timings {
	t, err := election.Parse(l, r, p)
	if err != nil {
		panic(err)
	}
	return t
}

// TestOperatorJourney: start, change a Setting, see the Fleet Deployments
// and a cluster's agent env change; SIGTERM exits 0 and releases the
// Lease; a restart writes nothing.
func TestOperatorJourney(t *testing.T) {
	e := newEnv(t)
	deployments := installFleet(t, e)
	clusterNS := cp.Namespace(t)
	addCluster(t, clusterNS, "edge-1", map[string]string{"election.cattle.io/retry-period": "5s"})

	p := start(t, e, "replica-a")
	eventually(t, "leader", func() bool { return holder(t, e) == "replica-a" })

	setSetting(t, "fleet-leader-election-retry-period", "4s")
	want := mustParse("30s", "25s", "4s")
	for _, d := range deployments {
		eventually(t, d+" env", func() bool { return controllerTriple(t, e, d) == want })
	}
	eventually(t, "cluster override applied", func() bool {
		return strings.HasSuffix(clusterEnv(t, clusterNS, "edge-1"),
			"CATTLE_ELECTION_LEASE_DURATION=30s,CATTLE_ELECTION_RENEW_DEADLINE=25s,CATTLE_ELECTION_RETRY_PERIOD=5s")
	})
	setSetting(t, "fleet-agent-leader-election-lease-duration", "40s")
	eventually(t, "global agent change reaches the override cluster", func() bool {
		return strings.Contains(clusterEnv(t, clusterNS, "edge-1"), "CATTLE_ELECTION_LEASE_DURATION=40s")
	})
	eventually(t, "metrics", func() bool {
		m := p.get("/metrics", p.metrics)
		return strings.Contains(m, `leasetune_fleet_agent_channel{channel="agentmanagement"} 1`) &&
			strings.Contains(m, `leasetune_writes_total{target="deployment"}`)
	})

	if code := p.term(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if h := holder(t, e); h != "" {
		t.Errorf("Lease still held by %q after a graceful stop", h)
	}

	before := versions(t, e)
	p2 := start(t, e, "replica-b")
	eventually(t, "new leader", func() bool { return holder(t, e) == "replica-b" })
	time.Sleep(3 * time.Second)
	if after := versions(t, e); after != before {
		t.Errorf("a restart wrote something:\nbefore %s\nafter  %s", before, after)
	}
	if code := p2.term(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// TestSIGTERMDuringStartup: a stop requested while the controllers start
// still ends in time with exit 0 (lasso's start-up health check ignores a
// cancelled context; the manager must not wait for it).
func TestSIGTERMDuringStartup(t *testing.T) {
	e := newEnv(t)
	installFleet(t, e)
	for i := 0; i < 3; i++ {
		p := start(t, e, "early")
		if code := p.term(t); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	}
}

// TestTwoReplicas: one leader, no double writes, and failover.
func TestTwoReplicas(t *testing.T) {
	e := newEnv(t)
	deployments := installFleet(t, e)
	a := start(t, e, "replica-a")
	b := start(t, e, "replica-b")
	var leader, follower *proc
	eventually(t, "a leader", func() bool {
		switch holder(t, e) {
		case "replica-a":
			leader, follower = a, b
		case "replica-b":
			leader, follower = b, a
		}
		return leader != nil
	})
	time.Sleep(2 * time.Second) // let the leader settle (channel record, settings)

	gens := map[string]int64{}
	for _, d := range deployments {
		got, _ := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), d, metav1.GetOptions{})
		gens[d] = got.Generation
	}
	setSetting(t, "fleet-leader-election-retry-period", "4s")
	want := mustParse("30s", "25s", "4s")
	for _, d := range deployments {
		eventually(t, d, func() bool { return controllerTriple(t, e, d) == want })
	}
	time.Sleep(2 * time.Second)
	for _, d := range deployments {
		got, _ := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), d, metav1.GetOptions{})
		if got.Generation != gens[d]+1 {
			t.Errorf("%s: generation %d → %d: want exactly one write", d, gens[d], got.Generation)
		}
	}

	// The leader stops; the follower takes over and keeps converging.
	if code := leader.term(t); code != 0 {
		t.Errorf("leader exit code %d", code)
	}
	eventually(t, "failover", func() bool { return holder(t, e) == follower.identity })
	setSetting(t, "fleet-leader-election-retry-period", "6s")
	next := mustParse("30s", "25s", "6s")
	for _, d := range deployments {
		eventually(t, d+" after failover", func() bool { return controllerTriple(t, e, d) == next })
	}
}
