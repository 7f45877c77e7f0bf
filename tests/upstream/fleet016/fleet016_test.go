//go:build upstream

package fleet016_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/agentenv"
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

// TestAgentDuplicateName measures, on the real Fleet v0.16.1, what a second
// entry of a name Fleet renders does to the local cluster's agent: someone
// (not leasetune) adds CATTLE_ELECTION_RETRY_PERIOD=3s to the local
// cluster's spec.agentEnvVars. What Fleet's code says happens, asserted:
//   - fleet-agentmanagement imports the cluster again (its agent config
//     changed: internal/cmd/controller/agentmanagement/controllers/
//     cluster/import.go agentDeployed :240-266, importCluster): it deletes
//     the agent's resources (:513-515, deleteAgentResources) and applies a
//     new agent Deployment rendered with Fleet's entry and the cluster's
//     (:487, AgentEnvVars; agent/manifest.go :199-201 then :315-317) —
//     a new Deployment (a new UID) with both entries, the agent running the
//     last, 3s;
//   - the agent's own Bundle then deploys without error: Fleet gives it
//     TakeOwnership (manageagent/manageagent.go:413-417), which turns
//     helm v4's server-side apply off (internal/helmdeployer/install.go
//     :229-231; upgrades keep the release's method, :303-307), so helm's
//     client-side patch keeps the live object, duplicate included, and the
//     apiserver's refusal of a repeated key (tests/integration/duplicates
//     TestHelmV4Duplicates) never applies to Fleet's agent;
//   - leasetune reports the cluster (its status annotation) and writes no
//     env to it;
//   - removing the entry imports again: a new Deployment with one entry.
func TestAgentDuplicateName(t *testing.T) {
	framework.Need(t, in)
	ctx := context.Background()
	ns, name := "fleet-local", "local"
	res := in.Dyn.Resource(fleetClusters).Namespace(ns)
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
	agent := func() (uid string, retry []string, ready bool) {
		d, err := in.CP.Client.AppsV1().Deployments(framework.FleetNamespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
		if err != nil {
			return "", nil, false
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if c.Name == "fleet-agent" && e.Name == "CATTLE_ELECTION_RETRY_PERIOD" {
					retry = append(retry, e.Value)
				}
			}
		}
		return string(d.UID), retry, d.Status.ReadyReplicas > 0
	}
	bdReady := func() bool {
		return strings.Contains(bundleDeploymentMessages(t, "fleet-agent"), `"status":"True","type":"Ready"`)
	}
	uid0, retry0, _ := agent()
	if strings.Join(retry0, ",") != "10s" {
		t.Fatalf("test: the agent's CATTLE_ELECTION_RETRY_PERIOD %v, want Fleet's [10s]", retry0)
	}
	mark, _ := in.Audit.Mark()

	patch(withDup)
	var uid1 string
	framework.Within(t, 4*time.Minute, "a new agent Deployment with both entries, running, its Bundle deployed", func() bool {
		uid, retry, ready := agent()
		uid1 = uid
		return uid != uid0 && strings.Join(retry, ",") == "10s,3s" && ready && bdReady()
	}, func() string {
		u, r, ok := agent()
		return fmt.Sprintf("%s %v %v\n%s", u, r, ok, bundleDeploymentMessages(t, "fleet-agent"))
	})
	framework.Within(t, time.Minute, "leasetune's status on the fleet Cluster", func() bool {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		return err == nil && strings.Contains(u.GetAnnotations()[agentenv.StatusAnnotation], "CATTLE_ELECTION_RETRY_PERIOD")
	})
	// The duplicate stays: another minute, the same Deployment, both
	// entries (nothing drops it, nothing fails).
	time.Sleep(time.Minute)
	if uid, retry, _ := agent(); uid != uid1 || strings.Join(retry, ",") != "10s,3s" || !bdReady() {
		t.Errorf("a minute later: uid %s (was %s), entries %v, Bundle: %s", uid, uid1, retry, bundleDeploymentMessages(t, "fleet-agent"))
	}

	patch(env)
	framework.Within(t, 4*time.Minute, "a new agent Deployment with Fleet's entry alone", func() bool {
		uid, retry, ready := agent()
		return uid != uid1 && strings.Join(retry, ",") == "10s" && ready
	}, func() string {
		u, r, ok := agent()
		return fmt.Sprintf("%s %v %v\n%s", u, r, ok, bundleDeploymentMessages(t, "fleet-agent"))
	})
	// leasetune wrote no env to the cluster: its writes there are its
	// status annotation only (patches of the annotation).
	rs, err := in.Audit.Since(mark)
	if err != nil {
		t.Fatal(err)
	}
	for w, n := range framework.WritesBy(rs, framework.Leasetune) {
		if strings.Contains(w, "deployments.apps") {
			t.Errorf("leasetune wrote %s ×%d", w, n)
		}
	}
	if d := in.DuplicateEnvNames(t); len(d) > 0 {
		t.Errorf("duplicate env names live at the end: %v", d)
	}
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
