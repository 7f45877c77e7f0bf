package fleetsettings_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

var (
	ctrlT  = kit.Timings("40s", "30s", "5s")
	agentT = kit.Timings("60s", "50s", "20s")
)

// TestConvergesEveryFixtureVersion is the main specification, per Fleet
// release: the controller triple on every Fleet container, the agent triple
// on fleet-agentmanagement only where Fleet reads it, the channel detected,
// nothing else changed, existing entries in place, and then zero writes on
// a resync and on a restart.
func TestConvergesEveryFixtureVersion(t *testing.T) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t)
			before := cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, v))
			triples := fakes.FleetTriples(ctrlT, agentT)
			r := start(t, e, triples, "")

			var agent *election.Timings
			if wantChannel[v] == fleet.ChannelAgentManagement {
				agent = &agentT
			}
			for name := range before {
				framework.Eventually(t, name+" converged", func() bool { return hasTriple(get(t, e.fleetNS, name), ctrlT, agent) })
			}
			if ch, ok := r.channels.Channel(); !ok || ch != wantChannel[v] {
				t.Errorf("channel %q (%v), want %q", ch, ok, wantChannel[v])
			}
			writes := r.writes.Settle(t, nil)
			if writes != len(before)+1 { // one patch per Deployment, plus the channel record
				t.Errorf("%d writes for %d Deployments, want one each plus the channel record", writes, len(before))
			}

			for name, b := range before {
				after := get(t, e.fleetNS, name)
				if was, now := kit.Stripped(t, b, ownedEnv), kit.Stripped(t, after, ownedEnv); was != now {
					t.Errorf("%s: something besides the owned env changed:\nbefore %s\nafter  %s", name, was, now)
				}
				for _, c := range b.Spec.Template.Spec.Containers {
					// Existing entries keep their position; new ones come after.
					if old, now := envNames(b, c.Name), envNames(after, c.Name); !strings.HasPrefix(now, old) {
						t.Errorf("%s/%s: env order %s, was %s", name, c.Name, now, old)
					}
					if c.Name == fleet.AgentManagementContainer && agent == nil && strings.Contains(envNames(after, c.Name), "FLEET_AGENT_ELECTION") {
						t.Errorf("%s: FLEET_AGENT_ELECTION_* written for Fleet %s, which does not read it", name, v)
					}
				}
			}

			// A resync of every key writes nothing.
			rvs := resourceVersions(t, e.fleetNS)
			r.EnqueueAll()
			r.writes.NoWrites(t, "resync", framework.ConsistentlyMin, nil)
			if n := r.writes.Writes(); n != writes {
				t.Errorf("resync made %d writes", n-writes)
			}
			r.cancel()

			// A restart writes nothing, and still knows the channel.
			// (The window covers the start: its caches sync in it.)
			r2 := start(t, e, triples, "")
			r2.writes.NoWrites(t, "restart", framework.ConsistentlyMin+2*time.Second, nil)
			if n := r2.writes.Writes(); n != 0 {
				t.Errorf("restart made %d writes", n)
			}
			if got := resourceVersions(t, e.fleetNS); got != rvs {
				t.Errorf("resourceVersions changed: %s → %s", rvs, got)
			}
			if ch, _ := r2.channels.Channel(); ch != wantChannel[v] {
				t.Errorf("after restart channel %q, want %q", ch, wantChannel[v])
			}
		})
	}
}

func resourceVersions(t *testing.T, ns string) string {
	t.Helper()
	l, err := cp.Client.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range l.Items {
		out = append(out, d.Name+"="+d.ResourceVersion)
	}
	return strings.Join(out, ",")
}

// TestOneChangeOneWritePerDeployment: a change of the effective triple
// makes exactly one write, so one rollout, per Deployment.
func TestOneChangeOneWritePerDeployment(t *testing.T) {
	e := newEnv(t)
	before := cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.16.1"))
	triples := fakes.FleetTriples(election.FleetDefaults, election.FleetDefaults)
	r := start(t, e, triples, "")
	base := r.writes.Settle(t, nil)
	if base != 1 { // only the channel record: the fixture already runs 30s/25s/10s
		t.Errorf("%d writes with the chart's own values, want only the channel record", base)
	}
	gens := map[string]int64{}
	for name := range before {
		gens[name] = get(t, e.fleetNS, name).Generation
	}
	triples.Set(settings.FleetController, ctrlT)
	triples.Set(settings.FleetAgent, agentT) // a second change right after: may coalesce, never more than 2 writes each
	for name := range before {
		framework.Eventually(t, name, func() bool { return hasTriple(get(t, e.fleetNS, name), ctrlT, &agentT) })
	}
	r.writes.Settle(t, nil)
	for name := range before {
		path := fmt.Sprintf("/apis/apps/v1/namespaces/%s/deployments/%s", e.fleetNS, name)
		n := r.writes.WritesTo(path)
		max := 1
		if name == fleet.ControllerDeployment {
			max = 2 // both triples live in fleet-controller
		}
		if n < 1 || n > max {
			t.Errorf("%s: %d writes, want 1..%d", name, n, max)
		}
		if g := get(t, e.fleetNS, name).Generation; g-gens[name] != int64(n) {
			t.Errorf("%s: generation %d → %d for %d writes", name, gens[name], g, n)
		}
	}
	// One more change of the controller triple alone: exactly one write each.
	for name := range before {
		gens[name] = get(t, e.fleetNS, name).Generation
	}
	next := kit.Timings("45s", "30s", "8s")
	triples.Set(settings.FleetController, next)
	for name := range before {
		framework.Eventually(t, name, func() bool { return hasTriple(get(t, e.fleetNS, name), next, &agentT) })
	}
	r.writes.Settle(t, nil)
	for name := range before {
		if g := get(t, e.fleetNS, name).Generation; g != gens[name]+1 {
			t.Errorf("%s: generation %d → %d, want one rollout", name, gens[name], g)
		}
	}
}

// TestMissingDeploymentsConvergeWhenTheyAppear: Fleet installed after the
// project (or helmops added by an upgrade) is converged when it appears.
func TestMissingDeploymentsConvergeWhenTheyAppear(t *testing.T) {
	e := newEnv(t)
	r := start(t, e, fakes.FleetTriples(ctrlT, agentT), "")
	r.writes.NoWrites(t, "no Fleet installed", framework.ConsistentlyMin, nil)
	if n := r.writes.Writes(); n != 0 {
		t.Errorf("%d writes with no Fleet installed", n)
	}
	if _, ok := r.channels.Channel(); ok {
		t.Error("a channel is known with no Fleet installed")
	}
	cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	for _, name := range []string{"fleet-controller", "gitjob", "helmops"} {
		framework.Eventually(t, name, func() bool { return hasTriple(get(t, e.fleetNS, name), ctrlT, &agentT) })
	}
}

// TestShards: sharded Deployments (labelled fleet.cattle.io/shard-id) get
// the env too; a look-alike without the label does not.
func TestShards(t *testing.T) {
	e := newEnv(t)
	ds := framework.FleetDeployments(t, "v0.16.1")
	var extra []*appsv1.Deployment
	for _, d := range ds {
		s := d.DeepCopy()
		s.Name = d.Name + "-shard-a"
		s.Spec.Template.Labels[fleet.ShardIDLabel] = "a"
		extra = append(extra, s)
	}
	lookalike := ds[1].DeepCopy() // gitjob
	lookalike.Name = "gitjob-shard-unlabelled"
	delete(lookalike.Spec.Template.Labels, fleet.ShardIDLabel)
	extra = append(extra, lookalike)
	installed := cp.InstallFleet(t, e.fleetNS, append(ds, extra...))
	start(t, e, fakes.FleetTriples(ctrlT, agentT), "")
	for name := range installed {
		if name == lookalike.Name {
			continue
		}
		framework.Eventually(t, name, func() bool { return hasTriple(get(t, e.fleetNS, name), ctrlT, &agentT) })
	}
	framework.Consistently(t, "an unlabelled shard look-alike is not written", framework.ConsistentlyMin, func() bool {
		return get(t, e.fleetNS, lookalike.Name).Generation == installed[lookalike.Name].Generation
	})
}

// TestDriftRepair: a helm upgrade that resets the env is repaired.
func TestDriftRepair(t *testing.T) {
	e := newEnv(t)
	cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	tr := fakes.FleetTriples(ctrlT, agentT)
	start(t, e, tr, "")
	framework.Eventually(t, "converged", func() bool { return hasTriple(get(t, e.fleetNS, "gitjob"), ctrlT, nil) })
	// A triple change, propagated: its duration is measured...
	changed := kit.Timings("40s", "30s", "6s")
	tr.Set(settings.FleetController, changed)
	framework.Eventually(t, "change propagated", func() bool { return hasTriple(get(t, e.fleetNS, "gitjob"), changed, nil) })
	time.Sleep(time.Second)
	measured := testutil.ToFloat64(metrics.PropagationSeconds.WithLabelValues("fleetsettings"))
	ctrlT := changed

	// Helm writes its chart values back (an Update by the helm field manager).
	d := get(t, e.fleetNS, "gitjob")
	for i, en := range d.Spec.Template.Spec.Containers[0].Env {
		if en.Name == "CATTLE_ELECTION_RETRY_PERIOD" {
			d.Spec.Template.Spec.Containers[0].Env[i].Value = "10s"
		}
	}
	if _, err := cp.Client.AppsV1().Deployments(e.fleetNS).Update(context.Background(), d, metav1.UpdateOptions{FieldManager: "helm"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "repaired", func() bool { return hasTriple(get(t, e.fleetNS, "gitjob"), ctrlT, nil) })
	// ...and the drift repair later is not part of it (a review found it counted).
	if got := testutil.ToFloat64(metrics.PropagationSeconds.WithLabelValues("fleetsettings")); got != measured {
		t.Errorf("propagation of the change %v s, then %v s after a drift repair", measured, got)
	}
}

// TestValueFromAndForeignEntries: an owned name set from a source is
// rewritten to a literal; other valueFrom entries and a sidecar stay.
func TestValueFromAndForeignEntries(t *testing.T) {
	e := newEnv(t)
	ds := framework.FleetDeployments(t, "v0.12.0")
	g := ds[1] // gitjob
	for i, en := range g.Spec.Template.Spec.Containers[0].Env {
		if en.Name == "CATTLE_ELECTION_RETRY_PERIOD" {
			g.Spec.Template.Spec.Containers[0].Env[i] = corev1.EnvVar{Name: en.Name, ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "retry"}}}
		}
	}
	g.Spec.Template.Spec.Containers = append(g.Spec.Template.Spec.Containers, corev1.Container{
		Name: "sidecar", Image: "busybox", Env: []corev1.EnvVar{{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "1s"}}})
	cp.InstallFleet(t, e.fleetNS, ds)
	start(t, e, fakes.FleetTriples(ctrlT, agentT), "")
	framework.Eventually(t, "converged", func() bool { return hasTriple(get(t, e.fleetNS, "gitjob"), ctrlT, nil) })
	after := get(t, e.fleetNS, "gitjob")
	for _, c := range after.Spec.Template.Spec.Containers {
		for _, en := range c.Env {
			switch {
			case c.Name == "sidecar" && en.Value != "1s":
				t.Errorf("sidecar env changed: %+v", en)
			case c.Name == "gitjob" && en.Name == "NAMESPACE" && (en.ValueFrom == nil || en.ValueFrom.FieldRef == nil):
				t.Errorf("NAMESPACE valueFrom lost: %+v", en)
			}
		}
	}
}

// TestRancherConfig keeps the Fleet chart values in rancher-config equal to
// the effective triples and touches nothing else.
func TestRancherConfig(t *testing.T) {
	e := newEnv(t)
	values := "# set by the operator\napiServerURL: https://rancher.example.com\nleaderElection:\n  leaseDuration: 30s\n  retryPeriod: 10s\n  renewDeadline: 25s\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetenv.RancherConfigName, Namespace: e.rancherNS},
		Data: map[string]string{"fleet": values, "rancher-webhook": "priorityClassName: x\n"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(e.rancherNS).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	triples := fakes.FleetTriples(ctrlT, agentT)
	r := start(t, e, triples, "")
	var got *corev1.ConfigMap
	defer func() {
		if t.Failed() && got != nil {
			t.Logf("fleet values now:\n%s", got.Data["fleet"])
		}
	}()
	framework.Eventually(t, "values merged", func() bool {
		got, _ = cp.Client.CoreV1().ConfigMaps(e.rancherNS).Get(context.Background(), cm.Name, metav1.GetOptions{})
		v := got.Data["fleet"]
		return strings.Contains(v, "leaderElection:\n  leaseDuration: 40s\n  retryPeriod: 5s\n  renewDeadline: 30s") &&
			strings.Contains(v, "agent:\n  leaderElection:\n    leaseDuration: 1m0s\n    renewDeadline: 50s\n    retryPeriod: 20s")
	})
	if v := got.Data["fleet"]; !strings.HasPrefix(v, "# set by the operator\napiServerURL: https://rancher.example.com\n") {
		t.Errorf("other values changed:\n%s", v)
	}
	if got.Data["rancher-webhook"] != "priorityClassName: x\n" {
		t.Errorf("another chart's values changed: %q", got.Data["rancher-webhook"])
	}
	n := r.writes.Settle(t, nil)
	r.EnqueueAll()
	r.writes.NoWrites(t, "resync", framework.ConsistentlyMin, nil)
	if m := r.writes.Writes(); m != n {
		t.Errorf("resync made %d writes", m-n)
	}
}

// TestChannelDetectedOnceAndKeptAfterOwnWrites: once the project has
// written FLEET_AGENT_ELECTION_* itself (taking them over from Helm), the
// recorded detection still holds across a restart; an override wins.
func TestChannelDetectedOnceAndKeptAfterOwnWrites(t *testing.T) {
	e := newEnv(t)
	cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	triples := fakes.FleetTriples(ctrlT, agentT)
	r := start(t, e, triples, "")
	framework.Eventually(t, "converged", func() bool { return hasTriple(get(t, e.fleetNS, "fleet-controller"), ctrlT, &agentT) })
	rec, err := cp.Client.CoreV1().ConfigMaps(e.stateNS).Get(context.Background(), fleetenv.ChannelConfigMapName, metav1.GetOptions{})
	if err != nil || rec.Data["channel"] != string(fleet.ChannelAgentManagement) || !strings.Contains(rec.Data["evidence"], "Fleet chart") {
		t.Fatalf("channel record %v, %v", rec.Data, err)
	}
	r.cancel()

	r2 := start(t, e, triples, "")
	time.Sleep(time.Second)
	if ch, _ := r2.channels.Channel(); ch != fleet.ChannelAgentManagement {
		t.Errorf("after restart %q", ch)
	}
	r2.cancel()

	r3 := start(t, e, triples, fleet.ChannelNoElection)
	if ch, _ := r3.channels.Channel(); ch != fleet.ChannelNoElection {
		t.Errorf("override ignored: %q", ch)
	}
}

// TestAgentTimingsNotApplicableAreSaid: on Fleet v0.12 the agents' timings
// are hardcoded by Fleet, so the agent triple reaches no agent: nothing is
// written for it (FLEET_AGENT_ELECTION_* only where Fleet reads it), and
// each agent Setting gets one Warning Event saying so, not repeated by a
// resync.
func TestAgentTimingsNotApplicableAreSaid(t *testing.T) {
	e := newEnv(t)
	cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.12.0"))
	agent := kit.Timings("41s", "33s", "11s") // a triple no other test uses
	r := start(t, e, fakes.FleetTriples(ctrlT, agent), "")
	framework.Eventually(t, "converged", func() bool { return hasTriple(get(t, e.fleetNS, "fleet-controller"), ctrlT, nil) })
	msgs := func(name string) []string {
		var out []string
		for _, m := range cp.Events(t, "", name, "AgentTimingsNotApplicable") {
			if strings.Contains(m, agent.String()) {
				out = append(out, m)
			}
		}
		return out
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		framework.Eventually(t, "event on "+d.Name, func() bool { return len(msgs(d.Name)) == 1 })
		if m := msgs(d.Name)[0]; !strings.Contains(m, "hardcoded to 30s/25s/10s") {
			t.Errorf("event %q", m)
		}
	}
	r.EnqueueAll()
	var repeated string
	framework.Consistently(t, "each agent Setting told once, a resync included", framework.ConsistentlyMin, func() bool {
		for _, d := range settings.Of(settings.FleetAgent) {
			l, _ := cp.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + d.Name + ",reason=AgentTimingsNotApplicable"})
			for _, ev := range l.Items {
				if strings.Contains(ev.Message, agent.String()) && ev.Count > 1 {
					repeated = fmt.Sprintf("%s: said %d times", d.Name, ev.Count)
					return false
				}
			}
		}
		return true
	})
	if repeated != "" {
		t.Error(repeated)
	}
	for _, c := range get(t, e.fleetNS, "fleet-controller").Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			if election.FleetAgentPrefix.Owns(env.Name) {
				t.Errorf("%s: %s written on v0.12, which does not read it", c.Name, env.Name)
			}
		}
	}
}
