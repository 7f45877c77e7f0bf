package duplicates_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/fleetagent"
)

// change is one thing leasetune does to a cluster: from the state before
// to the state after.
type change struct {
	name          string
	before, after state
	// repair: the cluster starts with the entries leasetune wrote under
	// its earlier behaviour (CATTLE_ELECTION_* with a record), which
	// duplicate names the release renders; only for such releases.
	repair bool
}

var changes = []change{
	{name: "global agent change", before: state{global: g0}, after: state{global: g1}},
	{name: "global agent back to wrangler's defaults", before: state{global: g0}, after: state{global: election.WranglerDefaults}},
	{name: "override added", before: state{global: g0}, after: state{global: g0}.withRetry("5s")},
	{name: "override changed", before: state{global: g0}.withRetry("5s"), after: state{global: g0}.withRetry("4s")},
	{name: "override removed", before: state{global: g0}.withRetry("5s"), after: state{global: g0}},
	{name: "global agent change under an override", before: state{global: g0}.withRetry("5s"), after: state{global: g1}.withRetry("5s")},
	{name: "repair of earlier entries", before: state{global: g0}, after: state{global: g0}, repair: true},
	{name: "repair of earlier entries, override set", before: state{global: g0}, after: state{global: g0}.withRetry("5s"), repair: true},
}

// earlier is what leasetune wrote under its earlier behaviour on a v0.12 or
// v0.13+ cluster: the global triple 60s/50s/20s as CATTLE_ELECTION_*, with
// its record, between two entries of the cluster's own.
func earlier() ([]map[string]interface{}, map[string]string) {
	return []map[string]interface{}{user, e(L, "1m0s"), fromRef, e(D, "50s"), e(P, "20s")},
		map[string]string{L: "1m0s", D: "50s", P: "20s"}
}

// decided is what Decide made of one change.
type decided struct {
	envBefore, envAfter []map[string]interface{}
	after               agentenv.Decision
}

// decide runs Decide the way the controller does: the state before is
// reached from the cluster's own entries (or, for a repair, is the earlier
// entries), then the change is one more Decide on its output.
func decide(t *testing.T, c change, ch fleet.AgentChannel, rancher bool) decided {
	t.Helper()
	var envB []map[string]interface{}
	var recB map[string]string
	if c.repair {
		envB, recB = earlier()
	} else {
		d0 := agentenv.Decide(c.before.input([]map[string]interface{}{user, fromRef}, nil, ch, rancher))
		checkDecision(t, "before", d0)
		envB, recB = d0.Env, d0.Record
		if again := agentenv.Decide(c.before.input(envB, recB, ch, rancher)); again.Change {
			t.Fatalf("Decide is not at rest before the change: %v → %v", envB, again.Env)
		}
	}
	d1 := agentenv.Decide(c.after.input(envB, recB, ch, rancher))
	checkDecision(t, "after", d1)
	if again := agentenv.Decide(c.after.input(d1.Env, d1.Record, ch, rancher)); again.Change {
		t.Fatalf("Decide is not at rest after the change (not one change): %v → %v", d1.Env, again.Env)
	}
	return decided{envBefore: envB, envAfter: d1.Env, after: d1}
}

func checkDecision(t *testing.T, when string, d agentenv.Decision) {
	t.Helper()
	switch d.Problem {
	case "", agentenv.ProblemUnsupported:
	default:
		t.Fatalf("%s: Decide left the cluster alone: %s: %v", when, d.Problem, d.Err)
	}
}

// noDuplicates fails t when a container of obj has an env name twice.
func noDuplicates(t *testing.T, what string, dups map[string][]string, env []map[string]interface{}) {
	t.Helper()
	if len(dups) > 0 {
		t.Errorf("%s: duplicate env names %v; spec.agentEnvVars = %v", what, dups, env)
	}
}

func kinds() []struct {
	name    string
	rancher bool
} {
	return []struct {
		name    string
		rancher bool
	}{{"standalone", false}, {"rancher-managed", true}}
}

// TestNoDuplicateNames: for every Fleet release, both kinds of cluster and
// every change leasetune makes, the agent workload Fleet renders from
// leasetune's spec.agentEnvVars has no env name twice in any container,
// before (except a repair's before, the broken state) and after; helm's
// upgrade of the agent from the rendering before to the rendering after,
// on the real apiserver, succeeds and leaves each container's env exactly
// as rendered after, and a second upgrade of the same release finds
// nothing to patch. A repair takes two upgrades (TestRepair says why).
func TestNoDuplicateNames(t *testing.T) {
	for _, tag := range releases {
		ch := channelOf(t, tag)
		if ch.RendersElectionEnv() != fleetagent.RendersElectionEnv(tag) {
			t.Errorf("%s: pkg/fleet says RendersElectionEnv=%v for %s, the double %v",
				tag, ch.RendersElectionEnv(), ch, fleetagent.RendersElectionEnv(tag))
		}
		for _, k := range kinds() {
			for _, c := range changes {
				if c.repair && !fleetagent.RendersElectionEnv(tag) {
					continue // the earlier entries duplicate nothing there
				}
				tag, k, c := tag, k, c
				t.Run(fmt.Sprintf("%s/%s/%s", tag, k.name, c.name), func(t *testing.T) {
					t.Parallel()
					checkChange(t, tag, ch, k.rancher, c)
				})
			}
		}
	}
}

func checkChange(t *testing.T, tag string, ch fleet.AgentChannel, rancher bool, c change) {
	dec := decide(t, c, ch, rancher)
	ns := cp.Namespace(t)
	before := render(tag, ns, c.before.global, toEnvVars(t, dec.envBefore))
	after := render(tag, ns, c.after.global, toEnvVars(t, dec.envAfter))
	bdups := fleetagent.Duplicates(fleetagent.PodSpec(before))
	if c.repair {
		// The broken state: the double must see it, or this test proves nothing.
		want := map[string][]string{fleetagent.Name: {L, D, P}}
		if got := sortedDups(bdups); !reflect.DeepEqual(got, want) {
			t.Fatalf("repair: the rendering before has duplicates %v, want %v", got, want)
		}
	} else {
		noDuplicates(t, "before", bdups, dec.envBefore)
	}
	noDuplicates(t, "after", fleetagent.Duplicates(fleetagent.PodSpec(after)), dec.envAfter)
	// pkg/fleet's own model agrees.
	if d := ch.DuplicateNames(c.after.global, toEnvVars(t, dec.envAfter)); len(d) > 0 {
		t.Errorf("pkg/fleet DuplicateNames after = %v", d)
	}
	// What Decide says the agent runs is what the rendering makes it run.
	if dec.after.Elects && !fleetagent.IsStatefulSet(tag) {
		if got := runs(t, fleetagent.PodSpec(after)); got != dec.after.Runs {
			t.Errorf("Decide says the agent runs %v, the rendering gives %v", dec.after.Runs, got)
		}
	}
	if t.Failed() {
		return
	}

	// Helm's upgrade, for real.
	helmInstall(t, ns, before)
	u := helmUpgrade(t, ns, before, after)
	if u.CreateErr != nil || u.PatchErr != nil {
		t.Fatalf("helm upgrade: create patch: %v; apply: %v\npatch: %s\nagentEnvVars before %v after %v",
			u.CreateErr, u.PatchErr, u.Patch, dec.envBefore, dec.envAfter)
	}
	got := live(t, ns, after)
	if d := fleetagent.Duplicates(got); len(d) > 0 {
		t.Fatalf("live after the upgrade: duplicate env names %v\npatch: %s", d, u.Patch)
	}
	want := envOf(fleetagent.PodSpec(after))
	if c.repair {
		// First upgrade: every entry of a name that was duplicated is
		// deleted (TestRepair); the second upgrade of the same release
		// puts Fleet's own entries back.
		if w := without(want, fleetagent.Name, L, D, P); !reflect.DeepEqual(envOf(got), w) {
			t.Fatalf("repair, first upgrade: live env\n%v\nwant\n%v\npatch: %s", envOf(got), w, u.Patch)
		}
		u = helmUpgrade(t, ns, after, after)
		if u.CreateErr != nil || u.PatchErr != nil {
			t.Fatalf("repair, second upgrade: %v; %v\npatch: %s", u.CreateErr, u.PatchErr, u.Patch)
		}
		got = live(t, ns, after)
	}
	if !reflect.DeepEqual(envOf(got), want) {
		t.Fatalf("live env after the upgrade\n%v\nwant (the rendering after)\n%v\npatch: %s", envOf(got), want, u.Patch)
	}
	// At rest: the next upgrade of the same release changes nothing.
	if u := helmUpgrade(t, ns, after, after); u.CreateErr != nil || u.PatchErr != nil || u.Changed {
		t.Fatalf("not at rest: the next upgrade of the same release changes the object with %s (%v; %v)", u.Patch, u.CreateErr, u.PatchErr)
	}
}

// without returns env with the named entries of container c removed.
func without(env map[string][]string, c string, names ...string) map[string][]string {
	out := map[string][]string{}
	for k, v := range env {
		out[k] = v
	}
	var kept []string
	for _, s := range env[c] {
		drop := false
		for _, n := range names {
			if strings.HasPrefix(s, n+"=") {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, s)
		}
	}
	out[c] = kept
	return out
}

func sortedDups(d map[string][]string) map[string][]string {
	out := map[string][]string{}
	order := map[string]int{L: 0, D: 1, P: 2}
	for k, v := range d {
		s := append([]string(nil), v...)
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if order[s[j]] < order[s[i]] {
					s[i], s[j] = s[j], s[i]
				}
			}
		}
		out[k] = s
	}
	return out
}

// TestRepair: on every release that renders CATTLE_ELECTION_* (v0.12+),
// Decide removes the entries leasetune wrote under its earlier behaviour in
// one change, keeping the cluster's own entries in place and in order, and
// forgets its record. Helm's upgrade of the agent then succeeds, but the
// three-way patch deletes by name: its first application removes *every*
// entry of the three names, Fleet's own included, and only the next
// upgrade of the same release puts Fleet's back. v0.12+ agents refuse to
// start without them (rancher/fleet v0.14.10 internal/cmd/agent/root.go:148-152,
// internal/cmd/options.go:93-102), so between the two upgrades new agent
// pods fail; the measured DESIGN says "recovers within 0-2 patches".
func TestRepair(t *testing.T) {
	for _, tag := range releases {
		if !fleetagent.RendersElectionEnv(tag) {
			continue
		}
		ch := channelOf(t, tag)
		for _, k := range kinds() {
			tag, k := tag, k
			t.Run(tag+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				env, rec := earlier()
				d := agentenv.Decide(state{global: g0}.input(env, rec, ch, k.rancher))
				if !d.Change || d.Record != nil || d.Problem != "" {
					t.Fatalf("Decide: change=%v record=%v problem=%s err=%v", d.Change, d.Record, d.Problem, d.Err)
				}
				if want := []map[string]interface{}{user, fromRef}; !reflect.DeepEqual(d.Env, want) {
					t.Fatalf("Decide env = %v, want %v (the cluster's own entries, in place)", d.Env, want)
				}
				ns := cp.Namespace(t)
				before := render(tag, ns, g0, toEnvVars(t, env))
				after := render(tag, ns, g0, toEnvVars(t, d.Env))
				helmInstall(t, ns, before)
				u := helmUpgrade(t, ns, before, after)
				if u.CreateErr != nil || u.PatchErr != nil {
					t.Fatalf("first upgrade: %v; %v", u.CreateErr, u.PatchErr)
				}
				got := live(t, ns, after)
				if dups := fleetagent.Duplicates(got); len(dups) > 0 {
					t.Fatalf("first upgrade left duplicates %v", dups)
				}
				for _, c := range got.Containers {
					for _, ev := range c.Env {
						if election.CattlePrefix.Owns(ev.Name) {
							t.Fatalf("first upgrade kept %s=%s: helm's patch no longer deletes every entry of a duplicated name (patch %s)", ev.Name, ev.Value, u.Patch)
						}
					}
				}
				t.Logf("first upgrade: the agent container has no CATTLE_ELECTION_*; patch %s", u.Patch)
				u = helmUpgrade(t, ns, after, after)
				if u.CreateErr != nil || u.PatchErr != nil {
					t.Fatalf("second upgrade: %v; %v", u.CreateErr, u.PatchErr)
				}
				got = live(t, ns, after)
				if !reflect.DeepEqual(envOf(got), envOf(fleetagent.PodSpec(after))) {
					t.Fatalf("second upgrade: live env %v, want %v", envOf(got), envOf(fleetagent.PodSpec(after)))
				}
			})
		}
	}
}
