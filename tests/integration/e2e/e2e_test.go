package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// TestOperatorJourney: start, change a Setting, see the Fleet Deployments
// change, and a cluster's agent env where Fleet's agent manifest renders no
// election names (v0.9.9); on v0.14 the global agent triple goes to
// fleet-agentmanagement, no cluster is written, an override is reported and
// entries an earlier leasetune wrote are removed. SIGTERM exits 0 and
// releases the Lease; a restart writes nothing.
func TestOperatorJourney(t *testing.T) {
	t.Run(fleetV014, func(t *testing.T) { operatorJourney(t, fleetV014) })
	t.Run(fleetV09, func(t *testing.T) { operatorJourney(t, fleetV09) })
}

func operatorJourney(t *testing.T, fleetVersion string) {
	e := newEnv(t)
	deployments := installFleet(t, e, fleetVersion)
	clusterNS := cp.Namespace(t)
	const proxy = "HTTPS_PROXY=http://proxy:3128"
	addCluster(t, clusterNS, "edge-1", map[string]string{"election.cattle.io/retry-period": "5s"})
	// A cluster an earlier leasetune wrote, without overrides.
	earlier, record := earlierEntries("50s", "40s", "15s")
	addCluster(t, clusterNS, "edge-0", record, earlier...)

	p := start(t, e, "replica-a")
	framework.Eventually(t, "leader", func() bool { return holder(t, e) == "replica-a" })

	setSetting(t, "fleet-leader-election-retry-period", "4s")
	want := kit.Timings("30s", "25s", "4s")
	for _, d := range deployments {
		framework.Eventually(t, d+" env", func() bool { return controllerTriple(t, e, d) == want })
	}
	switch fleetVersion {
	case fleetV014:
		// The override is reported on the cluster, and nothing is written
		// to its env; the earlier entries (duplicates of the names Fleet
		// renders) and their record are removed, every other entry kept.
		framework.Eventually(t, "override reported", func() bool {
			return strings.Contains(annotations(t, fleetGVR, clusterNS, "edge-1")[agentenv.StatusAnnotation], "cannot be applied on agentmanagement") &&
				len(cp.Events(t, clusterNS, "edge-1", "ElectionOverrideUnsupported")) > 0
		})
		framework.Eventually(t, "earlier entries removed", func() bool {
			_, rec := annotations(t, fleetGVR, clusterNS, "edge-0")[agentenv.RecordAnnotation]
			return clusterEnv(t, clusterNS, "edge-0") == proxy && !rec
		})
		if got := clusterEnv(t, clusterNS, "edge-1"); got != proxy {
			t.Errorf("edge-1 written on Fleet v0.14: %s", got)
		}
		if _, rec := annotations(t, fleetGVR, clusterNS, "edge-1")[agentenv.RecordAnnotation]; rec {
			t.Error("edge-1 has a record of entries on Fleet v0.14")
		}
	case fleetV09:
		framework.Eventually(t, "cluster override applied", func() bool {
			return clusterEnv(t, clusterNS, "edge-1") == proxy+
				",CATTLE_ELECTION_LEASE_DURATION=30s,CATTLE_ELECTION_RENEW_DEADLINE=25s,CATTLE_ELECTION_RETRY_PERIOD=5s"
		})
		framework.Eventually(t, "earlier entries take the global triple in place", func() bool {
			return clusterEnv(t, clusterNS, "edge-0") == proxy+
				",CATTLE_ELECTION_LEASE_DURATION=30s,CATTLE_ELECTION_RENEW_DEADLINE=25s,CATTLE_ELECTION_RETRY_PERIOD=10s"
		})
		if st, ok := annotations(t, fleetGVR, clusterNS, "edge-1")[agentenv.StatusAnnotation]; ok {
			t.Errorf("edge-1 reported on Fleet v0.9: %s", st)
		}
	}

	setSetting(t, "fleet-agent-leader-election-lease-duration", "40s")
	switch fleetVersion {
	case fleetV014:
		framework.Eventually(t, "global agent change reaches fleet-agentmanagement", func() bool {
			return agentTriple(t, e) == kit.Timings("40s", "25s", "10s")
		})
		// A cluster write would follow the triple change.
		framework.Consistently(t, "no cluster written on Fleet v0.14 after the global agent change", framework.ConsistentlyMin, func() bool {
			return clusterEnv(t, clusterNS, "edge-1") == proxy && clusterEnv(t, clusterNS, "edge-0") == proxy
		})
		for _, c := range []string{"edge-1", "edge-0"} {
			if got := clusterEnv(t, clusterNS, c); got != proxy {
				t.Errorf("%s written on Fleet v0.14 after the global agent change: %s", c, got)
			}
		}
		framework.Eventually(t, "metrics", func() bool {
			m := p.get("/metrics", p.metrics)
			return strings.Contains(m, `leasetune_fleet_agent_channel{channel="agentmanagement"} 1`) &&
				strings.Contains(m, `leasetune_writes_total{target="deployment"}`) &&
				strings.Contains(m, `leasetune_clusters_left_alone{reason="unsupported"} 1`)
		})
	case fleetV09:
		framework.Eventually(t, "global agent change reaches the clusters", func() bool {
			return strings.HasSuffix(clusterEnv(t, clusterNS, "edge-1"), "CATTLE_ELECTION_LEASE_DURATION=40s,CATTLE_ELECTION_RENEW_DEADLINE=25s,CATTLE_ELECTION_RETRY_PERIOD=5s") &&
				strings.HasSuffix(clusterEnv(t, clusterNS, "edge-0"), "CATTLE_ELECTION_LEASE_DURATION=40s,CATTLE_ELECTION_RENEW_DEADLINE=25s,CATTLE_ELECTION_RETRY_PERIOD=10s")
		})
		framework.Eventually(t, "metrics", func() bool {
			m := p.get("/metrics", p.metrics)
			return strings.Contains(m, `leasetune_fleet_agent_channel{channel="cluster-env-v0.9"} 1`) &&
				strings.Contains(m, `leasetune_writes_total{target="deployment"}`) &&
				strings.Contains(m, `leasetune_writes_total{target="cluster"}`) &&
				strings.Contains(m, `leasetune_clusters_left_alone{reason="unsupported"} 0`)
		})
	}

	if code := p.term(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if h := holder(t, e); h != "" {
		t.Errorf("Lease still held by %q after a graceful stop", h)
	}

	before := versions(t, e)
	p2 := start(t, e, "replica-b")
	framework.Eventually(t, "new leader", func() bool { return holder(t, e) == "replica-b" })
	framework.Consistently(t, "a restart writes nothing", framework.ConsistentlyMin, func() bool { return versions(t, e) == before })
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
	installFleet(t, e, fleetV014)
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
	deployments := installFleet(t, e, fleetV014)
	a := start(t, e, "replica-a")
	b := start(t, e, "replica-b")
	var leader, follower *proc
	framework.Eventually(t, "a leader", func() bool {
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
	want := kit.Timings("30s", "25s", "4s")
	for _, d := range deployments {
		framework.Eventually(t, d, func() bool { return controllerTriple(t, e, d) == want })
	}
	framework.Consistently(t, "exactly one write of each Deployment", framework.ConsistentlyMin, func() bool {
		for _, d := range deployments {
			got, _ := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), d, metav1.GetOptions{})
			if got.Generation != gens[d]+1 {
				return false
			}
		}
		return true
	})
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
	framework.Eventually(t, "failover", func() bool { return holder(t, e) == follower.identity })
	setSetting(t, "fleet-leader-election-retry-period", "6s")
	next := kit.Timings("30s", "25s", "6s")
	for _, d := range deployments {
		framework.Eventually(t, d+" after failover", func() bool { return controllerTriple(t, e, d) == next })
	}
}
