package rancherenv_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	rancherenvcontroller "leasetune.io/leasetune/pkg/controllers/rancherenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/plan"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

const (
	leaseName = "rancher-leader-election-lease-duration"
	renewName = "rancher-leader-election-renew-deadline"
	retryName = "rancher-leader-election-retry-period"
)

// TestOptIn: with the settings unset nothing is written (installing
// leasetune restarts nothing); setting them writes exactly the three
// entries, once, with one rollout; nothing at rest or on a restart; back
// to the defaults, the entries go, with one more rollout.
func TestOptIn(t *testing.T) {
	e := newEnv(t)
	installed := e.get(t)
	r := e.start(t, nil)
	if !r.NoWrites(t, "the settings at Rancher's defaults", framework.ConsistentlyMin, nil) || r.Writes() != 0 {
		t.Fatalf("%d writes with the settings at Rancher's defaults, want none", r.Writes())
	}
	if got := e.deployCtl.count(); got != 0 {
		t.Fatalf("%d rollouts at install", got)
	}

	e.set(t, retryName, "5s")
	want := []string{"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want) })
	after := e.get(t)
	if others(t, after) != others(t, installed) {
		t.Errorf("leasetune changed more than its entries:\nbefore %s\nafter  %s", others(t, installed), others(t, after))
	}
	// Appended after Rancher's own env, which stays in place.
	env := after.Spec.Template.Spec.Containers[0].Env
	if len(env) != 7 || env[0].Name != "CATTLE_NAMESPACE" || env[4].Name != "CATTLE_ELECTION_LEASE_DURATION" {
		t.Errorf("env order: %v", env)
	}
	r.NoWrites(t, "after the change's write", framework.ConsistentlyMin, nil)
	if n := r.Writes(); n != 1 {
		t.Errorf("%d writes for one change, want 1", n)
	}
	framework.Eventually(t, "one rollout", func() bool { return e.deployCtl.count() == 1 })
	if msgs := cp.Events(t, e.ns, "rancher", rancherenvcontroller.ReasonUpdated); len(msgs) != 1 || !strings.Contains(msgs[0], "rolls every Rancher replica (3)") {
		t.Errorf("Events %s: %q", rancherenvcontroller.ReasonUpdated, msgs)
	}

	// A restart writes nothing.
	r.cancel()
	r = e.start(t, nil)
	if !r.NoWrites(t, "a restart", framework.ConsistentlyMin, nil) || r.Writes() != 0 {
		t.Errorf("%d writes after a restart, want none", r.Writes())
	}

	// Back to the defaults: leasetune's entries and record go.
	e.set(t, retryName, "")
	framework.Eventually(t, "entries removed", func() bool { return len(electionEnv(e.get(t))) == 0 })
	if got := e.get(t); others(t, got) != others(t, installed) {
		t.Errorf("after removal the Deployment differs from the installed one:\n%s\n%s", others(t, got), others(t, installed))
	}
	if _, ok := e.get(t).Annotations[rancherenv.RecordAnnotation]; ok {
		t.Error("the record annotation stayed")
	}
	framework.Eventually(t, "two rollouts in all", func() bool { return e.deployCtl.count() == 2 })
	r.NoWrites(t, "at rest", framework.ConsistentlyMin, nil)
}

// TestOldRancherReadsNoEnv: Rancher 2.8.0-2.8.2 (wrangler v1) reads no
// CATTLE_ELECTION_*: nothing is written, and the Event says why.
func TestOldRancherReadsNoEnv(t *testing.T) {
	e := newEnv(t, "--set", "rancherImageTag=v2.8.2")
	r := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "left-alone Event", func() bool {
		msgs := cp.Events(t, e.ns, "rancher", rancherenvcontroller.ReasonLeftAlone)
		return len(msgs) == 1 && strings.Contains(msgs[0], "Rancher v2.8.2 builds with wrangler v1")
	})
	if !r.NoWrites(t, "Rancher v2.8.2", framework.ConsistentlyMin, nil) || r.Writes() != 0 || len(electionEnv(e.get(t))) != 0 {
		t.Errorf("%d writes, entries %v: want none", r.Writes(), electionEnv(e.get(t)))
	}
}

// TestHelmSetsNames: names the Helm release sets (extraEnv) are someone
// else's: no write, no duplicate, and the Event names the field manager.
func TestHelmSetsNames(t *testing.T) {
	e := newEnv(t, "--set-json", `extraEnv=[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"4s"}]`)
	installed := e.get(t)
	r := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "left-alone Event", func() bool {
		msgs := cp.Events(t, e.ns, "rancher", rancherenvcontroller.ReasonLeftAlone)
		return len(msgs) == 1 && strings.Contains(msgs[0], "CATTLE_ELECTION_RETRY_PERIOD=4s, set by field manager helm")
	})
	if !r.NoWrites(t, "names Helm sets", framework.ConsistentlyMin, nil) || r.Writes() != 0 {
		t.Errorf("%d writes, want none", r.Writes())
	}
	if got := e.get(t); others(t, got) != others(t, installed) || !reflect.DeepEqual(electionEnv(got), []string{"CATTLE_ELECTION_RETRY_PERIOD=4s"}) {
		t.Errorf("the Deployment changed: %v", electionEnv(got))
	}
}

// TestMidRollout: while the Deployment is mid-rollout the write waits (an
// Event says so); once the rollout is done it is made.
func TestMidRollout(t *testing.T) {
	e := newEnv(t)
	e.deployCtl.hold(true)
	framework.Eventually(t, "mid-rollout status", func() bool { ok, _ := rancherenv.Settled(e.get(t)); return !ok })
	r := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "deferred Event", func() bool {
		return len(cp.Events(t, e.ns, "rancher", rancherenvcontroller.ReasonDeferred)) == 1
	})
	if !r.NoWrites(t, "mid-rollout", framework.ConsistentlyMin, nil) || r.Writes() != 0 || len(electionEnv(e.get(t))) != 0 {
		t.Fatalf("%d writes while mid-rollout, want none", r.Writes())
	}
	e.deployCtl.hold(false)
	framework.Eventually(t, "written after the rollout", func() bool { return len(electionEnv(e.get(t))) == 3 })
	framework.Eventually(t, "one rollout", func() bool { return e.deployCtl.count() == 1 })
	r.NoWrites(t, "after the rollout's write", framework.ConsistentlyMin, nil)
	if n := r.Writes(); n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
}

// TestHelmUpgrade is what a helm upgrade of Rancher does to leasetune's
// entries, with the real helm CLI: an upgrade that does not set the names
// keeps them (helm 3's three-way merge leaves what neither manifest has)
// and leasetune writes nothing; an upgrade whose extraEnv sets one of the
// names merges into the existing entry by name (no duplicate), and
// leasetune then leaves the Deployment alone and says so.
func TestHelmUpgrade(t *testing.T) {
	e := newEnv(t)
	r := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return len(electionEnv(e.get(t))) == 3 })
	r.Settle(t, nil)

	helm(t, e.kc, e.ns, "upgrade", "rancher", chartDir(t), "--set", "replicas=3")
	want := []string{"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	if got := electionEnv(e.get(t)); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a plain helm upgrade: %v, want %v", got, want)
	}
	r.NoWrites(t, "a plain helm upgrade", framework.ConsistentlyMin, nil)

	helm(t, e.kc, e.ns, "upgrade", "rancher", chartDir(t), "--set-json", `extraEnv=[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"7s"}]`)
	got := electionEnv(e.get(t))
	if !reflect.DeepEqual(got, []string{"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=7s"}) {
		t.Fatalf("after helm upgrade with extraEnv: %v", got)
	}
	cp.EventuallyEvent(t, e.ns, "rancher", rancherenvcontroller.ReasonLeftAlone, "CATTLE_ELECTION_RETRY_PERIOD=7s, set by field manager helm, not leasetune")
	r.NoWrites(t, "helm took a name", framework.ConsistentlyMin, nil)
}

// TestPlan: `plan` lists the Rancher Deployment's writes with the rollout
// they cause, and the lock kube-system/cattle-controllers' cost now and
// after (pkg/election's model, 3 replicas: a leader and 2 followers); for
// Rancher 2.8.2 it says why nothing is written.
func TestPlan(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	opts := plan.Options{Namespace: e.stateNS, FleetNamespace: cp.Namespace(t), RancherNamespace: e.ns, RancherDeployment: "rancher",
		Set: []plan.Assignment{{Name: retryName, Value: "5s"}}}
	r, err := plan.Compute(ctx, cp.Client, dyn, opts)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, c := range r.Changes {
		if c.Object != "Deployment "+e.ns+"/rancher" || c.Restarts != "a rollout of every Rancher replica (3)" {
			t.Errorf("change %+v", c)
		}
		fields = append(fields, c.Field+"="+c.New)
	}
	want := []string{"container rancher env CATTLE_ELECTION_LEASE_DURATION=45s", "container rancher env CATTLE_ELECTION_RENEW_DEADLINE=30s", "container rancher env CATTLE_ELECTION_RETRY_PERIOD=5s"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("changes %v, want %v", fields, want)
	}
	tot := r.Totals()
	before := election.CostOf(election.WranglerDefaults, 2, election.Supported).TotalRequestsPerHour()
	after := election.CostOf(election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 5 * time.Second}, 2, election.Supported).TotalRequestsPerHour()
	if !tot.RancherRollout || tot.Rollouts != 1 || tot.RancherLockBefore != before || tot.RancherLockAfter != after || before != 4050 || after != 1620 {
		t.Errorf("totals %+v, want a Rancher rollout and %v → %v requests/h", tot, before, after)
	}
	var out bytes.Buffer
	r.Print(&out)
	if !strings.Contains(out.String(), "Rancher's lock kube-system/cattle-controllers (3 replica(s)): 1620 requests per hour (now 4050); the change rolls every Rancher replica.") {
		t.Errorf("plan output:\n%s", out.String())
	}

	old := newEnv(t, "--set", "rancherImageTag=v2.8.2")
	opts.RancherNamespace = old.ns
	r, err = plan.Compute(ctx, cp.Client, dyn, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changes) != 0 || len(r.LeftAlone) != 1 || !strings.Contains(r.LeftAlone[0], "wrangler v1") {
		t.Errorf("2.8.2: changes %v, left alone %v", r.Changes, r.LeftAlone)
	}
}

// gated is the settings Provider as the controller sees it, with
// HasSynced under the test's control.
type gated struct {
	*settings.Provider
	synced atomic.Bool
}

func (g *gated) HasSynced() bool { return g.synced.Load() }

// TestWaitsForTheProvidersFirstSync: until the settings provider has read
// the Settings once (after a restart, a triple pending in the settle time
// is known only then), nothing is written; then the write is made.
func TestWaitsForTheProvidersFirstSync(t *testing.T) {
	e := newEnv(t)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "5s in effect", func() bool {
		tr, ok := e.provider.Effective(settings.Rancher)
		return ok && tr.RetryPeriod == 5*time.Second
	})
	g := &gated{Provider: e.provider}
	e.triples = g
	r := e.start(t, nil)
	if !r.NoWrites(t, "before the provider's first sync", framework.ConsistentlyMin, nil) || r.Writes() != 0 || len(electionEnv(e.get(t))) != 0 {
		t.Fatalf("%d writes before the provider's first sync, want none", r.Writes())
	}
	g.synced.Store(true)
	framework.Eventually(t, "written once the provider has synced", func() bool { return len(electionEnv(e.get(t))) == 3 })
	r.NoWrites(t, "after the write", framework.ConsistentlyMin, nil)
	if n := r.Writes(); n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
}
