package fleetsettings_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// TestDuplicateEntryNeverLeavesAnInvalidTriple: the chart's extraEnv can
// leave a second CATTLE_ELECTION_RETRY_PERIOD at the end of a container's
// env; the container runs the last one. Every occurrence must carry the
// propagated value, in one write (a review found only the first one set:
// 30s/20s/20s, a crash-loop).
func TestDuplicateEntryNeverLeavesAnInvalidTriple(t *testing.T) {
	e := newEnv(t)
	ds := framework.FleetDeployments(t, "v0.14.10")
	for _, d := range ds {
		if d.Name == "gitjob" {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "20s"})
		}
	}
	cp.InstallFleet(t, e.fleetNS, ds)
	want := kit.Timings("30s", "20s", "5s")
	r := start(t, e, fakes.FleetTriples(want, agentT), "")
	framework.Eventually(t, "gitjob runs the wanted triple", func() bool {
		runs, _, _ := election.CattlePrefix.FromEnv(get(t, e.fleetNS, "gitjob").Spec.Template.Spec.Containers[0].Env) // the last occurrence wins
		return runs == want
	})
	r.writes.Settle(t, nil)
	if n := r.writes.WritesTo(fmt.Sprintf("/apis/apps/v1/namespaces/%s/deployments/gitjob", e.fleetNS)); n != 1 {
		t.Errorf("%d writes to gitjob, want 1", n)
	}
	for _, en := range get(t, e.fleetNS, "gitjob").Spec.Template.Spec.Containers[0].Env {
		if en.Name == "CATTLE_ELECTION_RETRY_PERIOD" && en.Value != "5s" {
			t.Errorf("an occurrence keeps %s", en.Value)
		}
	}
}

// TestEnvStrippedByAnUpdateKeepsTheChannel: an Update that drops every
// election entry from fleet-controller is repaired in full, and the
// recorded channel stays (a review found it turned v0.13+ into v0.9 and
// wrote every cluster's agent env).
func TestEnvStrippedByAnUpdateKeepsTheChannel(t *testing.T) {
	for _, v := range []string{"v0.12.0", "v0.14.10"} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t)
			cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, v))
			r := start(t, e, fakes.FleetTriples(ctrlT, agentT), "")
			var agent *election.Timings
			if wantChannel[v] == fleet.ChannelAgentManagement {
				agent = &agentT
			}
			framework.Eventually(t, "converged", func() bool { return hasTriple(get(t, e.fleetNS, "fleet-controller"), ctrlT, agent) })
			d := get(t, e.fleetNS, "fleet-controller")
			for i := range d.Spec.Template.Spec.Containers {
				c := &d.Spec.Template.Spec.Containers[i]
				var kept []corev1.EnvVar
				for _, en := range c.Env {
					if !election.CattlePrefix.Owns(en.Name) && !election.FleetAgentPrefix.Owns(en.Name) {
						kept = append(kept, en)
					}
				}
				c.Env = kept
			}
			if _, err := cp.Client.AppsV1().Deployments(e.fleetNS).Update(context.Background(), d, metav1.UpdateOptions{FieldManager: "helm"}); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, "repaired in full", func() bool { return hasTriple(get(t, e.fleetNS, "fleet-controller"), ctrlT, agent) })
			r.writes.Settle(t, nil)
			if ch, _ := r.channels.Channel(); ch != wantChannel[v] {
				t.Errorf("channel %s after the env was stripped, want %s", ch, wantChannel[v])
			}
		})
	}
}

// TestStalePatchFailsOnTheRealAPIServer: a patch computed from a copy read
// before someone changed a container's env fails on the kube-apiserver
// instead of combining with what it has not seen (a review made gitjob run
// 30s/20s/20s that way, and wiped a list added after a copy without env).
func TestStalePatchFailsOnTheRealAPIServer(t *testing.T) {
	e := newEnv(t)
	ds := framework.FleetDeployments(t, "v0.9.9")
	for _, d := range ds {
		if d.Name == "fleet-controller" {
			d.Spec.Template.Spec.Containers[0].Env = nil
		}
	}
	cp.InstallFleet(t, e.fleetNS, ds)
	ctx := context.Background()
	deps := cp.Client.AppsV1().Deployments(e.fleetNS)
	for name, edit := range map[string][]corev1.EnvVar{
		"gitjob":           {{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "20s"}}, // appended after the read
		"fleet-controller": {{Name: "FOO", Value: "bar"}},                          // a list where the copy had none
	} {
		stale := get(t, e.fleetNS, name)
		live := stale.DeepCopy()
		live.Spec.Template.Spec.Containers[0].Env = append(live.Spec.Template.Spec.Containers[0].Env, edit...)
		if _, err := deps.Update(ctx, live, metav1.UpdateOptions{FieldManager: "helm"}); err != nil {
			t.Fatal(err)
		}
		changes := fleetenv.Desired(stale, fleetenv.Inputs{Controller: kit.Timings("30s", "20s", "5s"), ControllerOK: true})
		body, err := fleetenv.PatchBody(stale, changes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := deps.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{}); err == nil {
			t.Errorf("%s: a patch from a stale copy applied: %v", name, get(t, e.fleetNS, name).Spec.Template.Spec.Containers[0].Env)
		}
	}
}
