package agentenv

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/kit"
)

// TestJudgeGlobalRepro is the repro: agent settings 40s/33s/15s, a
// cluster with someone else's CATTLE_ELECTION_LEASE_DURATION=35s; the
// global lease to 60s passes (the agent runs 35s/33s/15s), then renew to
// 40s would make it run 35s/40s/15s, which client-go refuses.
func TestJudgeGlobalRepro(t *testing.T) {
	theirs := ClusterEnv{Namespace: "fleet-default", Name: "edge-9", Env: []corev1.EnvVar{{Name: L, Value: "35s"}}}
	ok := ClusterEnv{Namespace: "fleet-default", Name: "edge-1"}
	ch := fleet.ChannelAgentManagement
	if b := JudgeGlobal(kit.Timings("40s", "33s", "15s"), kit.Timings("60s", "33s", "15s"), ch, []ClusterEnv{theirs, ok}); len(b) != 0 {
		t.Errorf("lease 60s: %v", b)
	}
	b := JudgeGlobal(kit.Timings("60s", "33s", "15s"), kit.Timings("60s", "40s", "15s"), ch, []ClusterEnv{theirs, ok})
	if len(b) != 1 || b[0].Cluster.Name != "edge-9" || b[0].Runs != (election.Timings{LeaseDuration: 35 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 15 * time.Second}) {
		t.Fatalf("renew 40s: %+v", b)
	}
	msg := BrokenError(kit.Timings("60s", "40s", "15s"), b).Error()
	for _, want := range []string{"1 cluster(s)", "fleet-default/edge-9", "CATTLE_ELECTION_LEASE_DURATION=35s", "leaseDuration 35s must exceed renewDeadline 40s"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	// Only v0.13+ combines the global triple with others' entries.
	for _, other := range []fleet.AgentChannel{fleet.ChannelClusterEnvV09, fleet.ChannelFixedV012, fleet.ChannelNoElection, fleet.ChannelFixedV090} {
		if b := JudgeGlobal(kit.Timings("60s", "33s", "15s"), kit.Timings("60s", "40s", "15s"), other, []ClusterEnv{theirs}); len(b) != 0 {
			t.Errorf("%s: %v", other, b)
		}
	}
	// A cluster already broken is no reason to refuse: a way out exists.
	broken := ClusterEnv{Name: "b", Env: []corev1.EnvVar{{Name: L, Value: "20s"}}}
	if b := JudgeGlobal(kit.Timings("60s", "33s", "15s"), kit.Timings("60s", "40s", "15s"), ch, []ClusterEnv{broken}); len(b) != 0 {
		t.Errorf("already broken: %v", b)
	}
}

// TestNothingPropagatedLeavesAnAgentInvalid is the property: for random
// global triples, overrides and foreign entries, whatever leasetune
// propagates — a global change JudgeGlobal lets through, and what Decide
// writes on each cluster — leaves no agent whose triple was valid with an
// invalid one.
func TestNothingPropagatedLeavesAnAgentInvalid(t *testing.T) {
	rng := kit.Rand(t, 1)
	secs := func(lo, hi int) string { return (time.Duration(lo+rng.Intn(hi-lo+1)) * time.Second).String() }
	randTriple := func() election.Timings {
		for {
			tt, err := election.Parse(secs(3, 90), secs(2, 60), secs(1, 30))
			if err == nil && tt.Validate() == nil {
				return tt
			}
		}
	}
	names := election.CattlePrefix.EnvNames()
	for i := 0; i < 3000; i++ {
		ch := fleet.Channels[rng.Intn(len(fleet.Channels))]
		cur, next := randTriple(), randTriple()
		var env []map[string]interface{}
		var foreign []corev1.EnvVar
		if rng.Intn(2) == 0 {
			n := names[rng.Intn(3)]
			v := secs(1, 90)
			env = append(env, e(n, v))
			foreign = append(foreign, corev1.EnvVar{Name: n, Value: v})
		}
		var vals [3]string
		var set [3]bool
		for j := range vals {
			if rng.Intn(4) == 0 {
				vals[j], set[j] = secs(1, 90), true
			}
		}
		c := ClusterEnv{Name: "c", Env: foreign}
		global := cur
		if len(JudgeGlobal(cur, next, ch, []ClusterEnv{c})) == 0 {
			global = next // the change goes out
		}
		d := Decide(Input{Facts: factsOf(env, nil, vals, set), Global: global, Channel: ch, ClusterAgentReads: rng.Intn(2) == 0})
		after := env
		if d.Change {
			after = d.Env
		}
		before, elects, err := ch.AgentRuns(cur, toEnvVars(env))
		if !elects || err != nil || before.Validate() != nil {
			continue // already broken before anything leasetune did
		}
		runs, _, err := ch.AgentRuns(global, toEnvVars(after))
		if err == nil {
			err = runs.Validate()
		}
		if err != nil {
			t.Fatalf("channel %s, %s → %s (went out: %v), env %v, overrides %v %v: agent runs %s: %v",
				ch, cur, next, global == next, env, vals, set, runs, err)
		}
	}
}
