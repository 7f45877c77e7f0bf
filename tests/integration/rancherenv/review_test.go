package rancherenv_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	rancherenvcontroller "leasetune.io/leasetune/pkg/controllers/rancherenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/plan"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

var (
	five  = election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 5 * time.Second}
	want5 = []string{"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	want7 = []string{"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=7s"}
)

// effective waits until the provider has t in effect for Rancher.
func (e *env) effective(t *testing.T, want election.Timings) {
	t.Helper()
	framework.Eventually(t, "Rancher triple "+want.String()+" in effect", func() bool {
		got, ok := e.provider.Effective(settings.Rancher)
		return ok && got == want
	})
}

// pendingAt waits until a Rancher triple is pending and returns when it
// takes effect.
func (e *env) pendingAt(t *testing.T) time.Time {
	t.Helper()
	framework.Eventually(t, "a Rancher triple pending", func() bool { return e.provider.Status(settings.Rancher).Pending != nil })
	return e.provider.Status(settings.Rancher).PendingAt
}

// TestSettlePendingWritesNothing: a write of the triple in effect waits
// for a rollout; meanwhile the operator sets another value, pending in the
// settle time; the rollout ends before the settle time does. Nothing may be
// written until the settle time ends (docs/rancher.md: "It never happens while the
// triple is pending in the settle time"), and then only the new triple: one
// write, one rollout, not a rollout for a triple already replaced and
// another for the new one.
func TestSettlePendingWritesNothing(t *testing.T) {
	e := newEnvWith(t, envOptions{settle: 4 * time.Second})
	e.deployCtl.hold(true)
	framework.Eventually(t, "mid-rollout", func() bool { return !e.settled(t) })
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	e.effective(t, five)
	framework.Eventually(t, "deferred Event", func() bool { return len(cp.Events(t, e.ns, "rancher", rancherenvcontroller.ReasonDeferred)) > 0 })

	e.set(t, retryName, "7s")
	at := e.pendingAt(t)
	e.deployCtl.hold(false)
	for time.Now().Before(at.Add(-500 * time.Millisecond)) {
		if got := electionEnv(e.get(t)); len(got) != 0 {
			t.Fatalf("written while 7s is pending in the settle time (until %s): %v", at.Format(time.RFC3339Nano), got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	framework.Eventually(t, "7s written after the settle time", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want7) })
	w.NoWrites(t, "after 7s", framework.ConsistentlyMin, nil)
	if n, r := w.Accepted(), e.deployCtl.count(); n != 1 || r != 1 {
		t.Errorf("%d writes, %d rollouts; want 1 and 1", n, r)
	}
}

// TestSettleRevertedWritesEffective: as above, but the operator sets the
// value in effect again while the other is pending: nothing is pending any
// more and no triple changes (the provider calls no listener), yet the
// deferred write of the triple in effect must still be made.
func TestSettleRevertedWritesEffective(t *testing.T) {
	e := newEnvWith(t, envOptions{settle: 3 * time.Second})
	e.deployCtl.hold(true)
	framework.Eventually(t, "mid-rollout", func() bool { return !e.settled(t) })
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	e.effective(t, five)
	e.set(t, retryName, "7s")
	e.pendingAt(t)
	e.deployCtl.hold(false)
	framework.Eventually(t, "settled", func() bool { return e.settled(t) })
	time.Sleep(300 * time.Millisecond)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "nothing pending", func() bool { return e.provider.Status(settings.Rancher).Pending == nil })
	framework.Eventually(t, "5s written", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after 5s", framework.ConsistentlyMin, nil)
	if n, r := w.Accepted(), e.deployCtl.count(); n != 1 || r != 1 {
		t.Errorf("%d writes, %d rollouts; want 1 and 1", n, r)
	}
}

// TestConcurrentEnvEdit: another writer adds an env entry between
// leasetune's read and its write: the test op fails the patch, leasetune
// computes it again from the fresh copy, and the other entry stays.
func TestConcurrentEnvEdit(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, func() {
		if err := e.patchErr("kubectl-edit", types.StrategicMergePatchType,
			`{"spec":{"template":{"spec":{"containers":[{"name":"rancher","env":[{"name":"AUDIT_LEVEL","value":"1"}]}]}}}}`); err != nil {
			t.Error(err)
		}
	})
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	d := e.get(t)
	env := d.Spec.Template.Spec.Containers[0].Env
	// (A strategic merge patch puts a new entry first.)
	if len(env) != 8 || env[0].Name != "AUDIT_LEVEL" || env[5].Name != "CATTLE_ELECTION_LEASE_DURATION" || len(duplicates(d)) != 0 {
		t.Errorf("env %v", env)
	}
	w.NoWrites(t, "after the retry", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 || len(w.Refused()) < 1 {
		t.Errorf("%d writes made, %d failed: want 1 made after at least 1 refused", w.Accepted(), len(w.Refused()))
	}
}

// TestHelmUpgradeRacesWrite: the real helm CLI upgrades Rancher with an
// extraEnv entry of one of the names between leasetune's read and its
// write: leasetune's patch fails, and from the fresh copy the name is
// Helm's: no write, no duplicate, reported.
func TestHelmUpgradeRacesWrite(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, func() {
		if err := helmErr(e.kc, e.ns, "upgrade", "rancher", chartDir(t), "--set-json", `extraEnv=[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"4s"}]`); err != nil {
			t.Error(err)
		}
	})
	e.set(t, retryName, "5s")
	cp.EventuallyEvent(t, e.ns, "rancher", rancherenvcontroller.ReasonLeftAlone, "CATTLE_ELECTION_RETRY_PERIOD=4s, set by field manager helm")
	w.NoWrites(t, "Helm took the name", framework.ConsistentlyMin, nil)
	d := e.get(t)
	if got := electionEnv(d); !reflect.DeepEqual(got, []string{"CATTLE_ELECTION_RETRY_PERIOD=4s"}) || len(duplicates(d)) != 0 || w.Accepted() != 0 {
		t.Errorf("env %v, duplicates %v, %d writes: want Helm's entry alone and no write", got, duplicates(d), w.Accepted())
	}
	if r := e.plan(t); len(r.Changes) != 0 || len(r.LeftAlone) != 1 || !strings.Contains(r.LeftAlone[0], "set by field manager helm") {
		t.Errorf("plan: changes %v, left alone %v", r.Changes, r.LeftAlone)
	}
}

// TestSpecChangeRacesWrite: a helm upgrade of the image lands between
// leasetune's read (settled) and its write, and starts a rollout; it does
// not touch env, so the env test passes. leasetune must not write on top of
// that rollout: its write waits until the rollout is done.
func TestSpecChangeRacesWrite(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, func() {
		e.deployCtl.hold(true)
		if err := helmErr(e.kc, e.ns, "upgrade", "rancher", chartDir(t), "--set", "rancherImageTag=v2.11.4"); err != nil {
			t.Error(err)
		}
	})
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the upgrade", func() bool {
		return e.get(t).Spec.Template.Spec.Containers[0].Image == "rancher/rancher:v2.11.4"
	})
	if !framework.Consistently(t, "not written on top of the rollout helm started", framework.ConsistentlyMin, func() bool { return len(electionEnv(e.get(t))) == 0 }) {
		t.Fatalf("written on top of the rollout helm started: %v", electionEnv(e.get(t)))
	}
	e.deployCtl.hold(false)
	framework.Eventually(t, "written after the rollout", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after the write", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 {
		t.Errorf("%d writes, want 1", w.Accepted())
	}
}

// TestRecreatedRacesWrite: the Deployment is deleted and installed again
// (helm uninstall, install) between leasetune's read and its write; the
// new one renders the same env, so the env test passes, but it has not
// rolled out. leasetune must not write it before it is settled.
func TestRecreatedRacesWrite(t *testing.T) {
	e := newEnv(t)
	old := e.get(t).UID
	w := e.start(t, func() {
		e.deployCtl.hold(true)
		for _, args := range [][]string{{"uninstall", "rancher", "--wait"}, {"install", "rancher", chartDir(t)}} {
			if err := helmErr(e.kc, e.ns, args...); err != nil {
				t.Error(err)
			}
		}
	})
	e.set(t, retryName, "5s")
	framework.Eventually(t, "recreated", func() bool {
		d, err := cp.Client.AppsV1().Deployments(e.ns).Get(context.Background(), "rancher", metav1.GetOptions{})
		return err == nil && d.UID != old
	})
	if !framework.Consistently(t, "not written before the new Deployment rolled out", framework.ConsistentlyMin, func() bool { return len(electionEnv(e.get(t))) == 0 }) {
		t.Fatalf("written on a Deployment created since the read, before it rolled out: %v", electionEnv(e.get(t)))
	}
	e.deployCtl.hold(false)
	framework.Eventually(t, "written once settled", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after the write", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 {
		t.Errorf("%d writes, want 1", w.Accepted())
	}
}

// TestDeleteAndRecreate: a Deployment deleted and installed again (not
// racing a write) is converged once it has rolled out, with one write.
func TestDeleteAndRecreate(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	helm(t, e.kc, e.ns, "uninstall", "rancher", "--wait")
	helm(t, e.kc, e.ns, "install", "rancher", chartDir(t))
	framework.Eventually(t, "written again", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after the second write", framework.ConsistentlyMin, nil)
	if w.Accepted() != 2 || len(duplicates(e.get(t))) != 0 {
		t.Errorf("%d writes (want 2: one per Deployment), duplicates %v", w.Accepted(), duplicates(e.get(t)))
	}
}

// TestSecondReplica: two controllers at once (a second leasetune replica
// that has not yet lost a race for its lease, or a stale leader) make one
// write between them; other Deployments named alike (another namespace's
// Rancher, a Deployment with a container "rancher") are never written.
func TestSecondReplica(t *testing.T) {
	e := newEnv(t)
	other := newEnv(t)
	sidecar := kit.Deployment(e.ns, "rancher-webhook", kit.WithSelector(map[string]string{"app": "rancher-webhook"}),
		kit.WithContainer("rancher"), kit.WithImage("rancher", "rancher/rancher:v2.11.3"))
	if _, err := cp.Client.AppsV1().Deployments(e.ns).Create(context.Background(), sidecar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w1, w2 := e.start(t, nil), e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	// The replica whose write lost may still send it again, refused by the
	// patch's test ops, until its informer brings the winner's write: wait
	// for both to go quiet, then claim that nothing more comes.
	framework.Eventually(t, "the rollout", func() bool { return e.deployCtl.count() >= 1 })
	both := func() int { return w1.Writes() + w2.Writes() }
	n0 := framework.WaitQuiet(t, "no write by either replica for "+framework.QuietWindow.String(), framework.QuietWindow, framework.QuietDeadline,
		func() (int, bool) { return both(), true },
		func(since time.Time) string { return "writes:" + w1.WritesSince(since) + w2.WritesSince(since) })
	framework.Consistently(t, "no more writes by either replica", framework.ConsistentlyMin, func() bool { return both() == n0 })
	if n, r := w1.Accepted()+w2.Accepted(), e.deployCtl.count(); n != 1 || r != 1 || len(duplicates(e.get(t))) != 0 {
		t.Errorf("%d writes, %d rollouts, duplicates %v: want 1, 1, none", n, r, duplicates(e.get(t)))
	}
	if got := electionEnv(other.get(t)); len(got) != 0 {
		t.Errorf("the Rancher Deployment of another namespace was written: %v", got)
	}
	wh, _ := cp.Client.AppsV1().Deployments(e.ns).Get(context.Background(), "rancher-webhook", metav1.GetOptions{})
	if len(wh.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Errorf("rancher-webhook was written: %v", wh.Spec.Template.Spec.Containers[0].Env)
	}
}

// TestHandRemovedEntry: one of leasetune's three entries removed by hand
// must not leave a partial triple (Rancher would then run the default of
// the missing one with leasetune's other two, a triple nobody chose, and
// one that can be invalid): once the Deployment has rolled out, leasetune
// adds the missing entry, once, without a duplicate. plan shows that
// write before it is made.
func TestHandRemovedEntry(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.Settle(t, nil)
	w.cancel()
	e.patchAs(t, "kubectl-edit", types.JSONPatchType,
		`[{"op":"test","path":"/spec/template/spec/containers/0/env/6/name","value":"CATTLE_ELECTION_RETRY_PERIOD"},{"op":"remove","path":"/spec/template/spec/containers/0/env/6"}]`)
	framework.Eventually(t, "rolled out", func() bool { return e.settled(t) })
	r := e.plan(t)
	if len(r.Changes) != 1 || r.Changes[0].Field != "container rancher env CATTLE_ELECTION_RETRY_PERIOD" || r.Changes[0].New != "5s" {
		t.Errorf("plan: changes %+v, left alone %v", r.Changes, r.LeftAlone)
	}
	// Rancher runs 45s/30s/2s now (the default of the missing retry period).
	if tot := r.Totals(); tot.RancherLockBefore != 4050 || tot.RancherLockAfter != 1620 {
		t.Errorf("plan totals %+v", tot)
	}
	// Back to the defaults instead: the two left are removed, not three.
	if r := e.plan(t, plan.Assignment{Name: retryName, Value: ""}); len(r.Changes) != 2 || r.Changes[1].Field != "container rancher env CATTLE_ELECTION_RENEW_DEADLINE" {
		t.Errorf("plan back to the defaults: changes %+v, left alone %v", r.Changes, r.LeftAlone)
	}
	w = e.start(t, nil)
	framework.Eventually(t, "the triple completed", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after the repair", framework.ConsistentlyMin, nil)
	if n, r := w.Accepted(), e.deployCtl.count(); n != 1 || r != 3 || len(duplicates(e.get(t))) != 0 {
		t.Errorf("%d writes after the removal, %d rollouts in all, duplicates %v: want 1, 3 (opt-in, the edit, the repair), none", n, r, duplicates(e.get(t)))
	}
}

// TestRecordRemoved: leasetune's record annotation removed by hand: the
// entries are left alone (nothing proves them leasetune's), and the Event
// and plan say that the record is missing rather than blaming another
// writer.
func TestRecordRemoved(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	e.patchAs(t, "kubectl-annotate", types.JSONPatchType, `[{"op":"remove","path":"/metadata/annotations/leasetune.io~1rancher-election-env"}]`)
	e.set(t, retryName, "7s")
	cp.EventuallyEvent(t, e.ns, "rancher", rancherenvcontroller.ReasonLeftAlone, rancherenv.RecordAnnotation)
	w.NoWrites(t, "the record removed", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 || !reflect.DeepEqual(electionEnv(e.get(t)), want5) {
		t.Errorf("%d writes, env %v", w.Accepted(), electionEnv(e.get(t)))
	}
	if r := e.plan(t); len(r.Changes) != 0 || len(r.LeftAlone) != 1 || !strings.Contains(r.LeftAlone[0], rancherenv.RecordAnnotation) {
		t.Errorf("plan: changes %v, left alone %v", r.Changes, r.LeftAlone)
	}
}

// TestScaledToZero: a Rancher scaled to 0 runs no replica, so nothing can
// be harmed and the write is made (the pods started on scale-up run it);
// the lock then costs nothing, before or after, in plan.
func TestScaledToZero(t *testing.T) {
	e := newEnv(t, "--set", "replicas=0")
	r := e.plan(t, plan.Assignment{Name: retryName, Value: "5s"})
	if tot := r.Totals(); len(r.Changes) != 3 || tot.RancherLockBefore != 0 || tot.RancherLockAfter != 0 {
		t.Errorf("plan with 0 replicas: changes %v, lock %v → %v requests/h, want 0 → 0", r.Changes, tot.RancherLockBefore, tot.RancherLockAfter)
	}
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after the write", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 {
		t.Errorf("%d writes", w.Accepted())
	}
}

// TestPaused: a paused Deployment is not written (the write would roll
// Rancher at an unknown later time, when someone resumes it); plan says it
// waits; on resume the write is made once.
func TestPaused(t *testing.T) {
	e := newEnv(t)
	e.patchAs(t, "kubectl-rollout", types.MergePatchType, `{"spec":{"paused":true}}`)
	framework.Eventually(t, "observed", func() bool { d := e.get(t); return d.Status.ObservedGeneration == d.Generation })
	w := e.start(t, nil)
	e.set(t, retryName, "5s")
	framework.Eventually(t, "deferred Event", func() bool {
		m := cp.Events(t, e.ns, "rancher", rancherenvcontroller.ReasonDeferred)
		return len(m) == 1 && strings.Contains(m[0], "paused")
	})
	if r := e.plan(t); len(r.Changes) != 0 || len(r.LeftAlone) != 1 || !strings.Contains(r.LeftAlone[0], "paused") {
		t.Errorf("plan: changes %v, left alone %v", r.Changes, r.LeftAlone)
	}
	if !w.NoWrites(t, "paused", framework.ConsistentlyMin, nil) || w.Writes() != 0 {
		t.Fatalf("%d writes while paused", w.Writes())
	}
	e.patchAs(t, "kubectl-rollout", types.MergePatchType, `{"spec":{"paused":false}}`)
	framework.Eventually(t, "written on resume", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	w.NoWrites(t, "after the write", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 {
		t.Errorf("%d writes", w.Accepted())
	}
}

// TestRestartMidRollout: leasetune's write starts a rollout and leasetune
// restarts before it ends: nothing more is written, during or after it.
func TestRestartMidRollout(t *testing.T) {
	e := newEnv(t)
	w := e.start(t, func() { e.deployCtl.hold(true) })
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	framework.Eventually(t, "mid-rollout", func() bool { return !e.settled(t) })
	w.cancel()
	w2 := e.start(t, nil)
	w2.NoWrites(t, "restarted mid-rollout", framework.ConsistentlyMin, nil)
	if r := e.plan(t); len(r.Changes) != 0 || len(r.LeftAlone) != 0 {
		t.Errorf("plan mid-rollout at rest: changes %v, left alone %v", r.Changes, r.LeftAlone)
	}
	e.deployCtl.hold(false)
	framework.Eventually(t, "rolled out", func() bool { return e.settled(t) })
	w2.NoWrites(t, "after the rollout", framework.ConsistentlyMin, nil)
	if n, r := w.Accepted()+w2.Accepted(), e.deployCtl.count(); n != 1 || r != 1 {
		t.Errorf("%d writes, %d rollouts: want 1 and 1", n, r)
	}
}

// TestBadValues: values the webhook would refuse, written around it (no
// webhook here), and env overrides on leasetune's pod
// (CATTLE_RANCHER_LEADER_ELECTION_*): a refused triple writes nothing; a
// valid env override is written like a setting.
func TestBadValues(t *testing.T) {
	// Each part in its own subtest: the providers of the parts would fight
	// over the cluster-scoped Setting objects (each writes its env value
	// there), which one leasetune never does.
	t.Run("refused values", func(t *testing.T) {
		e := newEnv(t)
		w := e.start(t, nil)
		for _, v := range []struct{ name, value string }{
			{retryName, "5"}, {retryName, "abc"}, {retryName, "0s"}, {retryName, "-5s"}, {retryName, "500ms"},
			{retryName, " 5s"}, {retryName, "5s\u200b"}, {retryName, "20s"}, {leaseName, "30s"}, {leaseName, "1h1s"}, {renewName, "45s"},
		} {
			e.set(t, v.name, v.value)
			framework.Eventually(t, v.name+"="+v.value+" refused", func() bool { return e.provider.Status(settings.Rancher).Refused != nil })
			e.set(t, v.name, "")
			framework.Eventually(t, "back to the defaults", func() bool { return e.provider.Status(settings.Rancher).Refused == nil })
		}
		w.NoWrites(t, "refused values", framework.ConsistentlyMin, nil)
		if n := w.Writes(); n != 0 || len(electionEnv(e.get(t))) != 0 {
			t.Errorf("%d writes for refused values, env %v", n, electionEnv(e.get(t)))
		}
	})
	t.Run("invalid env override", func(t *testing.T) {
		bad := newEnvWith(t, envOptions{env: map[string]string{"CATTLE_RANCHER_LEADER_ELECTION_RETRY_PERIOD": "20s"}})
		wb := bad.start(t, nil)
		bad.set(t, retryName, "5s") // the env wins over the object
		wb.NoWrites(t, "an invalid env override", framework.ConsistentlyMin, nil)
		if wb.Writes() != 0 || len(electionEnv(bad.get(t))) != 0 {
			t.Errorf("an invalid env override was written: %v", electionEnv(bad.get(t)))
		}
	})
	t.Run("valid env override", func(t *testing.T) {
		good := newEnvWith(t, envOptions{env: map[string]string{"CATTLE_RANCHER_LEADER_ELECTION_RETRY_PERIOD": "5s"}})
		wg := good.start(t, nil)
		framework.Eventually(t, "env override written", func() bool { return reflect.DeepEqual(electionEnv(good.get(t)), want5) })
		wg.NoWrites(t, "after the write", framework.ConsistentlyMin, nil)
		if wg.Accepted() != 1 {
			t.Errorf("%d writes for an env override", wg.Accepted())
		}
	})
}

// TestNoAnnotationsYet: a Deployment without annotations (the record is
// then written by adding the whole map) that gets one from another writer
// between leasetune's read and its write: the patch fails instead of
// dropping it, and the retry writes the record beside it. (On a
// Deployment an annotation change also bumps metadata.generation,
// k8s.io/kubernetes v1.32.13 pkg/registry/apps/deployment/strategy.go
// PrepareForUpdate, so the generation test catches it as well.)
func TestNoAnnotationsYet(t *testing.T) {
	e := newEnv(t)
	e.patchAs(t, "kubectl-edit", types.JSONPatchType, `[{"op":"remove","path":"/metadata/annotations"}]`)
	if a := e.get(t).Annotations; a != nil {
		t.Fatalf("annotations %v", a)
	}
	w := e.start(t, func() {
		if err := e.patchErr("kubectl-annotate", types.MergePatchType, `{"metadata":{"annotations":{"example.com/owner":"team-a"}}}`); err != nil {
			t.Error(err)
		}
	})
	e.set(t, retryName, "5s")
	framework.Eventually(t, "the three entries", func() bool { return reflect.DeepEqual(electionEnv(e.get(t)), want5) })
	d := e.get(t)
	if d.Annotations["example.com/owner"] != "team-a" || len(rancherenv.Record(d)) != 3 {
		t.Errorf("annotations %v: want the other writer's and leasetune's record", d.Annotations)
	}
	w.NoWrites(t, "after the retry", framework.ConsistentlyMin, nil)
	if w.Accepted() != 1 || len(w.Refused()) < 1 {
		t.Errorf("%d writes made, %d failed: want 1 made after at least 1 refused", w.Accepted(), len(w.Refused()))
	}
}
