package duplicates_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/fleetagent"
)

func ev(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// values returns the values of the named entries of the fleet-agent
// container, in order.
func values(ps *corev1.PodSpec, name string) []string {
	out := []string{}
	for _, c := range ps.Containers {
		if c.Name != fleetagent.Name {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				out = append(out, e.Value)
			}
		}
	}
	return out
}

func same(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

const setElementOrderErr = "doesn't match $setElementOrder list"

// TestDuplicatePoison shows that the check of TestNoDuplicateNames can
// fail: the same helm procedure on a Fleet v0.14.10 agent whose
// spec.agentEnvVars repeats a name the manifest renders (Fleet's
// CATTLE_ELECTION_RETRY_PERIOD=10s, lease 30s) never leaves the state
// rendered. What the real apiserver does, asserted:
func TestDuplicatePoison(t *testing.T) {
	const tag = "v0.14.10"
	g := election.FleetDefaults // the chart's agent triple: 30s / 25s / 10s

	// A duplicate present from the first install, then a value change
	// (3s → 4s): the patch applies, but lands on the first entry of the
	// name, Fleet's: the container then has 4s and 3s, and runs the last,
	// 3s — the change never takes effect. Every later upgrade of the same
	// release patches again and flips Fleet's entry between 10s and 4s: a
	// loop, the agent's upgrade never at rest.
	t.Run("single duplicate, value change: applied to the wrong entry, then a loop", func(t *testing.T) {
		t.Parallel()
		ns := cp.Namespace(t)
		before := render(tag, ns, g, ev(P, "3s"))
		after := render(tag, ns, g, ev(P, "4s"))
		helmInstall(t, ns, before)
		u := helmUpgrade(t, ns, before, after)
		if u.CreateErr != nil || u.PatchErr != nil {
			t.Fatalf("upgrade: %v; %v", u.CreateErr, u.PatchErr)
		}
		if got := values(live(t, ns, after), P); !same(got, []string{"4s", "3s"}) {
			t.Fatalf("live %s = %v, want [4s 3s]", P, got)
		}
		if r := runs(t, live(t, ns, after)); r.RetryPeriod.String() != "3s" {
			t.Fatalf("the agent runs retry %v, want the old 3s", r.RetryPeriod)
		}
		want := [][]string{{"10s", "3s"}, {"4s", "3s"}, {"10s", "3s"}, {"4s", "3s"}}
		for i, w := range want {
			u := helmUpgrade(t, ns, after, after)
			if u.CreateErr != nil || u.PatchErr != nil || u.Patch == nil || string(u.Patch) == "{}" {
				t.Fatalf("re-upgrade %d: patch %s, %v; %v: want a patch that applies", i+1, u.Patch, u.CreateErr, u.PatchErr)
			}
			if got := values(live(t, ns, after), P); !same(got, w) {
				t.Fatalf("re-upgrade %d: live %s = %v, want %v", i+1, P, got, w)
			}
		}
	})

	// A duplicate the change introduces: the patch applies and the
	// cluster's entry is silently dropped — the container keeps one
	// entry, Fleet's 10s, the object unchanged — and every later upgrade
	// sends the same patch again.
	t.Run("single duplicate introduced: silently dropped, patched again every time", func(t *testing.T) {
		t.Parallel()
		ns := cp.Namespace(t)
		before := render(tag, ns, g, nil)
		after := render(tag, ns, g, ev(P, "3s"))
		helmInstall(t, ns, before)
		u := helmUpgrade(t, ns, before, after)
		for i := 0; i < 3; i++ {
			// Every upgrade sends the cluster's entry again (a patch
			// naming 3s), and the apiserver stores nothing new.
			if u.CreateErr != nil || u.PatchErr != nil || !strings.Contains(string(u.Patch), `"value":"3s"`) || u.Changed {
				t.Fatalf("upgrade %d: patch %s (changed %v), %v; %v: want a patch of the 3s entry that applies and changes nothing", i, u.Patch, u.Changed, u.CreateErr, u.PatchErr)
			}
			if got := values(live(t, ns, after), P); !same(got, []string{"10s"}) {
				t.Fatalf("upgrade %d: live %s = %v, want [10s] (the cluster's 3s dropped)", i, P, got)
			}
			u = helmUpgrade(t, ns, after, after)
		}
	})

	// Two duplicated names with different values introduced by a change:
	// the apiserver refuses every patch.
	t.Run("two duplicates introduced: every upgrade fails", func(t *testing.T) {
		t.Parallel()
		ns := cp.Namespace(t)
		before := render(tag, ns, g, nil)
		after := render(tag, ns, g, ev(P, "3s", L, "20s"))
		helmInstall(t, ns, before)
		orig := before
		for i := 0; i < 3; i++ {
			u := helmUpgrade(t, ns, orig, after)
			if u.CreateErr != nil || u.PatchErr == nil || !strings.Contains(u.PatchErr.Error(), setElementOrderErr) {
				t.Fatalf("upgrade %d: %v; %v: want the apiserver's %q", i, u.CreateErr, u.PatchErr, setElementOrderErr)
			}
			orig = after // helm records the failed release too; either way it fails
		}
		if got := values(live(t, ns, after), P); !same(got, []string{"10s"}) {
			t.Fatalf("live %s = %v, want Fleet's [10s] unchanged", P, got)
		}
	})

	// Two duplicated names present from the first install, then a value
	// change: the first patch applies, to the wrong entries (two entries of
	// each name remain, the old values last), and every later upgrade
	// fails.
	t.Run("two duplicates, value change: wrong state, then every upgrade fails", func(t *testing.T) {
		t.Parallel()
		ns := cp.Namespace(t)
		before := render(tag, ns, g, ev(P, "3s", L, "20s"))
		after := render(tag, ns, g, ev(P, "4s", L, "21s"))
		helmInstall(t, ns, before)
		u := helmUpgrade(t, ns, before, after)
		if u.CreateErr != nil || u.PatchErr != nil {
			t.Fatalf("first upgrade: %v; %v", u.CreateErr, u.PatchErr)
		}
		got := live(t, ns, after)
		if !same(values(got, P), []string{"4s", "3s"}) || !same(values(got, L), []string{"21s", "20s"}) {
			t.Fatalf("live %s = %v, %s = %v; want [4s 3s], [21s 20s]", P, values(got, P), L, values(got, L))
		}
		for i := 0; i < 2; i++ {
			u := helmUpgrade(t, ns, after, after)
			if u.PatchErr == nil || !strings.Contains(u.PatchErr.Error(), setElementOrderErr) {
				t.Fatalf("re-upgrade %d: patch %s, %v; %v: want the apiserver's %q", i+1, u.Patch, u.CreateErr, u.PatchErr, setElementOrderErr)
			}
		}
	})

	// Removing the duplicated entries: the first upgrade deletes every
	// entry of the names, Fleet's too (the agent container then lacks
	// them, which a v0.12+ agent refuses); the second upgrade of the same
	// release restores Fleet's, and the third finds nothing to do.
	t.Run("duplicates removed: two upgrades to recover", func(t *testing.T) {
		t.Parallel()
		ns := cp.Namespace(t)
		before := render(tag, ns, g, ev(P, "3s", L, "20s"))
		after := render(tag, ns, g, nil)
		helmInstall(t, ns, before)
		u := helmUpgrade(t, ns, before, after)
		if u.CreateErr != nil || u.PatchErr != nil {
			t.Fatalf("first upgrade: %v; %v", u.CreateErr, u.PatchErr)
		}
		got := live(t, ns, after)
		if len(values(got, P)) != 0 || len(values(got, L)) != 0 || !same(values(got, D), []string{"25s"}) {
			t.Fatalf("after the first upgrade: %s=%v %s=%v %s=%v; want none, none, [25s]", P, values(got, P), L, values(got, L), D, values(got, D))
		}
		u = helmUpgrade(t, ns, after, after)
		if u.CreateErr != nil || u.PatchErr != nil {
			t.Fatalf("second upgrade: %v; %v", u.CreateErr, u.PatchErr)
		}
		got = live(t, ns, after)
		if !same(values(got, P), []string{"10s"}) || !same(values(got, L), []string{"30s"}) || len(fleetagent.Duplicates(got)) > 0 {
			t.Fatalf("after the second upgrade: %s=%v %s=%v dups %v", P, values(got, P), L, values(got, L), fleetagent.Duplicates(got))
		}
		if u := helmUpgrade(t, ns, after, after); u.PatchErr != nil || u.Changed {
			t.Fatalf("third upgrade changes the object with %s (%v)", u.Patch, u.PatchErr)
		}
	})
}
