package admission_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

const (
	agentLease = "fleet-agent-leader-election-lease-duration"
	agentRenew = "fleet-agent-leader-election-renew-deadline"
	agentRetry = "fleet-agent-leader-election-retry-period"
)

// TestAgentTripleJudgedByWhatEveryAgentRuns is the repro on the
// real control plane with Fleet v0.14.10: agent settings 40s/33s/15s, a
// cluster with someone else's CATTLE_ELECTION_LEASE_DURATION=35s. The
// global lease to 60s passes (that agent runs 35s/33s/15s); the renew
// deadline to 40s would make it run 35s/40s/15s: refused at the door with
// the cluster's name. With the webhook removed it is stored but not
// propagated (fleet-agentmanagement keeps 33s, Event AgentTimingsRefused),
// and it goes out once the cluster's entry is gone.
func TestAgentTripleJudgedByWhatEveryAgentRuns(t *testing.T) {
	s := startServer(t, nil)
	cp.InstallFleet(t, s.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	ctx := context.Background()
	agentEnv := func() election.Timings {
		d, err := cp.Client.AppsV1().Deployments(s.fleetNS).Get(ctx, "fleet-controller", metav1.GetOptions{})
		if err != nil {
			return election.Timings{}
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "fleet-agentmanagement" {
				got, _, _ := election.FleetAgentPrefix.FromEnv(c.Env)
				return got
			}
		}
		return election.Timings{}
	}
	for _, kv := range [][2]string{{agentLease, "40s"}, {agentRenew, "33s"}, {agentRetry, "15s"}} {
		if err := patchValue(kv[0], kv[1]); err != nil {
			t.Fatalf("%s %s: %v", kv[0], kv[1], err)
		}
	}
	framework.Eventually(t, "40s/33s/15s on fleet-agentmanagement", func() bool { return agentEnv() == kit.Timings("40s", "33s", "15s") })

	ns := cp.Namespace(t)
	cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(ns, "edge-9", kit.WithEnv(kit.Env("CATTLE_ELECTION_LEASE_DURATION=35s")...)))
	r := dyn().Resource(fleet.ClusterGVR).Namespace(ns)

	if err := patchValue(agentLease, "60s"); err != nil {
		t.Fatalf("lease 60s (the agent of edge-9 runs 35s/33s/15s): %v", err)
	}
	// The index may lag the cluster's creation by a moment; the refusal must come.
	var err error
	framework.Eventually(t, "renew 40s refused", func() bool {
		err = patchValue(agentRenew, "40s")
		return err != nil
	})
	for _, want := range []string{ns + "/edge-9", "CATTLE_ELECTION_LEASE_DURATION=35s", "leaseDuration 35s must exceed renewDeadline 40s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}

	// Another path: the webhook gone.
	if err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "leasetune", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "renew 40s stored without the webhook", func() bool { return patchValue(agentRenew, "40s") == nil })
	cp.EventuallyEvent(t, "", agentRenew, "AgentTimingsRefused", ns+"/edge-9", "agents keep")
	framework.Consistently(t, "fleet-agentmanagement keeps the triple every agent can run", framework.ConsistentlyMin, func() bool {
		return agentEnv() == kit.Timings("60s", "33s", "15s")
	})
	if got := agentEnv(); got != kit.Timings("60s", "33s", "15s") {
		t.Errorf("fleet-agentmanagement got %s: an agent would run an invalid triple", got)
	}

	// The cluster's own entry removed: the triple goes out.
	body, _ := json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": nil}})
	if _, err := r.Patch(ctx, "edge-9", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute) // judged again every 30s
	for agentEnv() != kit.Timings("60s", "40s", "15s") {
		if time.Now().After(deadline) {
			t.Fatalf("the triple never went out once the cluster was fixed: %s", agentEnv())
		}
		time.Sleep(time.Second)
	}
}
