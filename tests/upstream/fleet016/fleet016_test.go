//go:build upstream

package fleet016_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// TestRealFleet is tests/upstream/fleet's case on Fleet v0.16.1: the
// defaults write nothing, the global agent triple reaches every agent
// through fleet-agentmanagement in one write, the fleet-controller triple
// the three Deployments, and the locks cost what the model says.
func TestRealFleet(t *testing.T) {
	framework.Need(t, in)
	framework.FleetCase(t, in, framework.FleetNamespace)
}

var (
	fleetClusters     = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusters"}
	bundleDeployments = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundledeployments"}
)

// ssaDuplicate is kube-apiserver's answer to a server-side apply whose
// configuration repeats a key of env (tests/integration/duplicates
// TestHelmV4Duplicates measured it with the helm v4 CLI).
const ssaDuplicate = `duplicate entries for key [name=\"CATTLE_ELECTION_RETRY_PERIOD\"]`

// TestAgentDuplicateName measures, on the real Fleet v0.16.1 agent (helm
// v4.2.2, which installs its own Bundle server-side:
// internal/helmdeployer/install.go:229-234, and upgrades it with
// --server-side=auto, :303-307), what a second entry of a name Fleet
// renders does: someone (not leasetune) adds CATTLE_ELECTION_RETRY_PERIOD
// to the local cluster's spec.agentEnvVars; fleet-agentmanagement renders
// the agent Deployment with Fleet's entry and that one (manifest.go
// :199-201, :315-317); the agent's upgrade of itself is refused by the
// apiserver and the Deployment stays as it was — the agent takes no
// change at all, a global agent triple included, until the entry goes;
// leasetune reports the cluster and writes nothing to it.
func TestAgentDuplicateName(t *testing.T) {
	framework.Need(t, in)
	ctx := context.Background()
	ns, name := "fleet-local", "local"
	res := in.Dyn.Resource(fleetClusters).Namespace(ns)
	before := in.Deployment(t, framework.FleetNamespace, "fleet-agent")
	cur, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env, _, _ := unstructuredSlice(cur.Object, "spec", "agentEnvVars")
	withDup := append(append([]interface{}(nil), env...), map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "3s"})
	patch := func(e []interface{}) {
		t.Helper()
		b, _ := json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": e}})
		if _, err := res.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
	}
	patch(withDup)
	var msg string
	framework.Within(t, 4*time.Minute, "the agent's BundleDeployment reports the apiserver's refusal", func() bool {
		msg = bundleDeploymentMessages(t, "fleet-agent")
		return strings.Contains(msg, "duplicate entries for key")
	}, func() string { return msg + "\n" + in.Logs(framework.FleetNamespace, "fleet-agent", 30) })
	t.Logf("the agent's BundleDeployment: %s", firstLine(msg, ssaDuplicate))
	after := in.Deployment(t, framework.FleetNamespace, "fleet-agent")
	if after.Generation != before.Generation {
		t.Errorf("the fleet-agent Deployment changed (generation %d → %d)", before.Generation, after.Generation)
	}
	if d := in.DuplicateEnvNames(t); len(d) > 0 {
		t.Errorf("duplicate env names live: %v", d)
	}
	// leasetune reports the cluster and does not write its env.
	framework.Within(t, time.Minute, "leasetune's status on the fleet Cluster", func() bool {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		return err == nil && u.GetAnnotations()[agentenv.StatusAnnotation] != ""
	})
	// A global agent triple change now reaches fleet-agentmanagement, not
	// the agent.
	defaults := in.SettingsTriple(t, "fleet-agent-leader-election", election.FleetDefaults)
	next := election.Timings{LeaseDuration: 40 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 8 * time.Second}
	in.SetTriple(t, "fleet-agent-leader-election", defaults, next)
	framework.Within(t, 2*time.Minute, "FLEET_AGENT_ELECTION_* on fleet-agentmanagement", func() bool {
		got, found := in.ContainerTriple(t, framework.FleetNamespace, "fleet-controller", "fleet-agentmanagement", election.FleetAgentPrefix)
		return found && got == next
	})
	// 90 s: fleet-agentmanagement's rollout, its re-render of the agent
	// Bundle and the agent's refused upgrade all fit in it.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if g := in.Deployment(t, framework.FleetNamespace, "fleet-agent").Generation; g != before.Generation {
			t.Fatalf("the fleet-agent Deployment changed while the duplicate is there (generation %d → %d)", before.Generation, g)
		}
		time.Sleep(2 * time.Second)
	}
	// Without the entry the agent takes the triple: one upgrade.
	patch(env)
	framework.Within(t, 4*time.Minute, "the agent runs the new triple once the entry is gone", func() bool {
		got, found := in.ContainerTriple(t, framework.FleetNamespace, "fleet-agent", "fleet-agent", election.CattlePrefix)
		return found && got == next
	}, func() string {
		return bundleDeploymentMessages(t, "fleet-agent") + in.Logs(framework.FleetNamespace, "fleet-agent", 30)
	})
	if d := in.DuplicateEnvNames(t); len(d) > 0 {
		t.Errorf("duplicate env names live: %v", d)
	}
	in.SetTriple(t, "fleet-agent-leader-election", next, defaults)
}

// bundleDeploymentMessages returns the status of the BundleDeployments
// whose name starts with prefix, as JSON.
func bundleDeploymentMessages(t testing.TB, prefix string) string {
	l, err := in.Dyn.Resource(bundleDeployments).Namespace("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, u := range l.Items {
		if strings.HasPrefix(u.GetName(), prefix) {
			b, _ := json.Marshal(u.Object["status"])
			out = append(out, u.GetNamespace()+"/"+u.GetName()+": "+string(b))
		}
	}
	return strings.Join(out, "\n")
}

func firstLine(s, near string) string {
	if i := strings.Index(s, near); i >= 0 {
		lo := i - 200
		if lo < 0 {
			lo = 0
		}
		return s[lo:i] + near
	}
	if len(s) > 400 {
		return s[:400]
	}
	return s
}

func unstructuredSlice(obj map[string]interface{}, fields ...string) ([]interface{}, bool, error) {
	var cur interface{} = obj
	for _, f := range fields {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]interface{})
	return s, ok, nil
}
