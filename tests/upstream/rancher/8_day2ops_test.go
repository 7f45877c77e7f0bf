//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/plan"
	restartkind "leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// The Plan Rancher v2.15.0 applies in an imported RKE2/K3s cluster with
// day-2 operations (pkg/controllers/management/systemagent/
// controller.go:61 SystemAgentUpgraderPlanName, in namespaces.System).
const (
	upgraderNamespace = "cattle-system"
	upgraderPlan      = "system-agent-upgrader"
)

// planRecorder records each change of the env of the downstream's
// system-agent-upgrader Plan (spec.upgrade.envs, system-upgrade-
// controller's name of it): system-upgrade-controller runs the Plan again
// on every node it selects whenever the digest of
// spec.upgrade.envs,envFrom changes (Rancher's upgrade.cattle.io/digest
// annotation on it, controller.go:1242). Rancher applies a Windows Plan beside it
// with the same env (system-agent-upgrader-windows); this cluster has no
// Windows node, so the Linux Plan is the one that runs.
type planRecorder struct {
	mu      sync.Mutex
	changes [][]string
	last    []string
	// gaps counts the watches that ended on an error event: changes in
	// such a gap would be counted as one.
	gaps   int
	cancel context.CancelFunc
	done   chan struct{}
}

func recordPlan(t *testing.T, d *framework.Downstream) *planRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &planRecorder{cancel: cancel, done: make(chan struct{})}
	res := d.CP.Dynamic.Resource(framework.UpgradePlans).Namespace(upgraderNamespace)
	sel := fields.OneTermEqualSelector("metadata.name", upgraderPlan).String()
	l, err := res.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range l.Items {
		r.last = upgradeEnv(&u)
	}
	rv := l.GetResourceVersion()
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					r.mu.Lock()
					r.gaps++
					r.mu.Unlock()
					break
				}
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv = u.GetResourceVersion()
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				env := upgradeEnv(u)
				r.mu.Lock()
				if !reflect.DeepEqual(env, r.last) {
					r.changes = append(r.changes, env)
					r.last = env
				}
				r.mu.Unlock()
			}
			w.Stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// count is the number of env changes recorded, and the env now.
func (r *planRecorder) count() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changes), append([]string(nil), r.last...)
}

// gapped fails t when a watch ended on an error since mark.
func (r *planRecorder) gapped(t *testing.T, mark int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gaps != mark {
		t.Errorf("the watch of the Plan ended on an error %d times: changes may have been merged", r.gaps-mark)
	}
}

func (r *planRecorder) gapCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}

func upgradeEnv(u *unstructured.Unstructured) []string {
	env, _, _ := unstructured.NestedSlice(u.Object, "spec", "upgrade", "envs")
	var out []string
	for _, e := range env {
		m, _ := e.(map[string]interface{})
		out = append(out, fmt.Sprintf("%v=%v", m["name"], m["value"]))
	}
	return out
}

func hasElectionEntry(env []string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, "CATTLE_ELECTION_") {
			return true
		}
	}
	return false
}

// importCluster imports the downstream d into Rancher as a user does in
// the dashboard: a provisioning Cluster without rkeConfig in fleet-default
// (Rancher makes its management Cluster c-m-… and its registration token,
// pkg/controllers/provisioningv2/cluster/controller.go createToken), the
// import manifest applied in the downstream (the command the dashboard
// shows: status.manifestUrl of the token, which steve fills in,
// pkg/api/steve/clusterregistrationtoken), and its agent's tunnel
// (framework.ClusterTunnel). It returns the management Cluster's name.
func importCluster(t *testing.T, d *framework.Downstream, name string) string {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": name, "namespace": "fleet-default"},
		"spec":     map[string]interface{}{},
	}}
	if _, err := in.Dyn.Resource(framework.ProvisioningClusters).Namespace("fleet-default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create provisioning Cluster %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = in.Dyn.Resource(framework.ProvisioningClusters).Namespace("fleet-default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	var mgmt string
	framework.Within(t, 2*time.Minute, "Rancher makes the management Cluster of "+name, func() bool {
		u, err := in.Dyn.Resource(framework.ProvisioningClusters).Namespace("fleet-default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		mgmt, _, _ = unstructured.NestedString(u.Object, "status", "clusterName")
		return mgmt != ""
	})
	var manifest string
	framework.Within(t, 2*time.Minute, "the registration token's import manifest URL", func() bool {
		code, body, err := in.Admin.Do(ctx, http.MethodGet, "/v1/management.cattle.io.clusterregistrationtokens/"+mgmt+"/default-token", nil)
		if err != nil || code != http.StatusOK {
			return false
		}
		var crt struct {
			Status struct {
				ManifestURL string `json:"manifestUrl"`
			} `json:"status"`
		}
		_ = json.Unmarshal(body, &crt)
		manifest = crt.Status.ManifestURL
		return manifest != "" && !strings.Contains(manifest, "{token}")
	})
	ca := in.SettingValues(t, []string{"cacerts"})["cacerts"]
	token, server, err := d.ApplyImportManifest(ctx, manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteSteveAggregation(ctx, server, token); err != nil {
		t.Fatal(err)
	}
	params, err := d.AgentParams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := framework.StartClusterTunnel(server, []byte(ca), token, params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tunnel.Stop)
	framework.Within(t, 3*time.Minute, "Rancher marks "+mgmt+" Connected and Ready through the agent's tunnel", func() bool {
		u := ref{framework.ManagementClusters, "", mgmt}.get(t)
		cs := strings.Join(conditionsOf(u), " ")
		return tunnel.Connections() > 0 && strings.Contains(cs, "Connected=True") && strings.Contains(cs, "Ready=True")
	}, func() string {
		u := ref{framework.ManagementClusters, "", mgmt}.get(t)
		return fmt.Sprintf("tunnel up %v, pings %d, conditions %v", tunnel.Up(), tunnel.Pings(), conditionsOf(u))
	})
	return mgmt
}

// Test12ImportedDay2OpsPlans: beside Rancher v2.15.0, an imported RKE2
// cluster with day-2 operations (its default: rancher/rancher v2.15.0
// pkg/settings/setting.go imported-cluster-day2-ops-enabled "true",
// pkg/features/feature.go imported-day-2-ops on) whose management Cluster
// holds CATTLE_ELECTION_* entries an earlier leasetune wrote (on a Fleet
// whose agents read agentEnvVars; Fleet v0.16 renders the agent triple
// itself, so they are to be removed). Rancher renders the cluster's
// agentEnvVars into the system-agent-upgrader Plan it applies in the
// downstream cluster, so the removal runs system-agent's Plan again on
// every node: once, and said beforehand by the ElectionStatus (the
// cluster's group re-plans) and by leasetune plan (one node-plan cluster).
// The downstream is a real kube-apiserver reporting RKE2's version,
// reached by Rancher through a double of the agent's tunnel.
func Test12ImportedDay2OpsPlans(t *testing.T) {
	framework.Need(t, in)
	if in.Opts.Suite.Downstream == "" {
		t.Skipf("Rancher %s renders no imported cluster's agentEnvVars into system-agent Plans (v2.15.0 pkg/controllers/management/systemagent does): suite %s imports no downstream cluster", in.RancherVersion(), in.Opts.Suite.Name)
	}
	ctx := context.Background()
	d, err := framework.StartDownstream(in.Opts.Suite.Kube, in.Opts.Suite.Downstream, filepath.Join(in.Dir, "downstream"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	name := fmt.Sprintf("day2-%d", time.Now().Unix()%100000)
	mgmt := importCluster(t, d, name)
	mref := ref{framework.ManagementClusters, "", mgmt}

	// Rancher's own controllers, through the tunnel: Ready and Connected,
	// the provider label rke2 (kubernetesprovider), the Plan applied.
	framework.Within(t, 5*time.Minute, "Rancher applies the system-agent-upgrader Plan in "+mgmt, func() bool {
		_, ok, err := d.PlanEnv(ctx, upgraderNamespace, upgraderPlan)
		return err == nil && ok
	}, func() string {
		u := mref.get(t)
		return fmt.Sprintf("labels %v, status.driver %v, conditions %v", u.GetLabels(), u.Object["status"].(map[string]interface{})["driver"], conditionsOf(u))
	})
	u := mref.get(t)
	if u.GetLabels()["provider.cattle.io"] != "rke2" {
		t.Errorf("%s: provider label %q, want rke2 (Rancher's detection of the downstream's version)", mgmt, u.GetLabels()["provider.cattle.io"])
	}
	fc := ref{framework.FleetClusters, "fleet-default", name}
	framework.Within(t, 3*time.Minute, "Rancher makes the fleet Cluster "+fc.String(), func() bool {
		_, err := in.Dyn.Resource(framework.FleetClusters).Namespace(fc.namespace).Get(ctx, fc.name, metav1.GetOptions{})
		return err == nil
	})
	rec := recordPlan(t, d)
	in.Calm(t, 20*time.Second, 5*time.Minute)

	// Beforehand, the ElectionStatus: the cluster's group re-plans.
	// The suite makes no other imported RKE2/K3s cluster: this one is the
	// only imported cluster whose writes re-plan nodes.
	framework.Within(t, 2*time.Minute, "the ElectionStatus counts this cluster as re-planning", func() bool {
		n := 0
		for _, g := range es(t).Agents.Groups {
			if g.Replans && !g.Provisioned {
				n += g.Count
			}
		}
		return n == 1
	}, func() string { b, _ := json.Marshal(es(t).Agents); return string(b) })

	// The state an earlier leasetune left, written while it does not run.
	scale(t, framework.LeasetuneNamespace, "leasetune", 0)
	framework.Within(t, 2*time.Minute, "leasetune stopped", func() bool {
		return len(in.Kubelet.Pods(framework.LeasetuneNamespace, "leasetune")) == 0
	})
	started := false
	t.Cleanup(func() {
		if !started {
			scale(t, framework.LeasetuneNamespace, "leasetune", 1)
		}
	})
	old := map[string]string{"CATTLE_ELECTION_LEASE_DURATION": "40s", "CATTLE_ELECTION_RENEW_DEADLINE": "30s", "CATTLE_ELECTION_RETRY_PERIOD": "5s"}
	record, _ := json.Marshal(old)
	env, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	for _, n := range []string{"CATTLE_ELECTION_LEASE_DURATION", "CATTLE_ELECTION_RENEW_DEADLINE", "CATTLE_ELECTION_RETRY_PERIOD"} {
		env = append(env, map[string]interface{}{"name": n, "value": old[n]})
	}
	patch, _ := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"annotations": map[string]interface{}{agentenv.RecordAnnotation: string(record)}},
		"spec":     map[string]interface{}{"agentEnvVars": env},
	})
	if _, err := in.Dyn.Resource(framework.ManagementClusters).Patch(ctx, mgmt, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "earlier-leasetune"}); err != nil {
		t.Fatal(err)
	}
	framework.Within(t, 3*time.Minute, "Rancher renders the old entries into the Plan", func() bool {
		_, env := rec.count()
		return hasElectionEntry(env)
	})
	in.Calm(t, 20*time.Second, 5*time.Minute)

	// Beforehand, leasetune plan: the removal, one node-plan cluster.
	out, err := exec.Command(in.Bin.Leasetune, "plan", "--kubeconfig", in.Kubeconfig, "-o", "json").Output()
	if err != nil {
		t.Fatalf("leasetune plan: %v", err)
	}
	var p struct {
		Changes []plan.Change `json:"changes"`
		Totals  plan.Totals   `json:"totals"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("leasetune plan -o json: %v\n%s", err, out)
	}
	said := false
	var kinds restartkind.Set
	for _, c := range p.Changes {
		if strings.Contains(c.Object, mgmt) && c.Kinds.Has(restartkind.NodePlan) {
			said, kinds = true, c.Kinds
		}
	}
	t.Logf("leasetune plan says the write of %s restarts: %s", mgmt, kinds)
	if !said || p.Totals.NodePlans != 1 {
		t.Errorf("leasetune plan: node-plan clusters %d (want 1), a node-plan change of %s %v:\n%s", p.Totals.NodePlans, mgmt, said, out)
	}

	// leasetune runs again: one write removes the entries, one Plan run.
	runs, _ := rec.count()
	gaps := rec.gapCount()
	mark, _ := in.Audit.Mark()
	scale(t, framework.LeasetuneNamespace, "leasetune", 1)
	started = true
	if err := in.WaitRunning(framework.LeasetuneNamespace, "leasetune", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	framework.Within(t, 3*time.Minute, "the old entries gone from the Plan", func() bool {
		_, env := rec.count()
		return !hasElectionEntry(env)
	})
	in.Calm(t, 30*time.Second, 5*time.Minute)
	now, env2 := rec.count()
	t.Logf("the Plan's env after the removal: %v", env2)
	if now-runs != 1 {
		t.Errorf("%d changes of the Plan's env after leasetune's start, want 1 (one run on every node)", now-runs)
	}
	rec.gapped(t, gaps)
	rs, _ := in.Audit.Since(mark)
	writes := 0
	for w, n := range clusterWrites(rs) {
		t.Logf("cluster writes: %s ×%d", w, n)
		if strings.Contains(w, "leasetune") && strings.HasSuffix(w, mgmt) {
			writes += n
		}
	}
	if writes != 1 {
		t.Errorf("leasetune wrote %s %d times, want 1", mgmt, writes)
	}

	// A change of the global agent triple reaches the agents through
	// Fleet on v0.16 (FLEET_AGENT_ELECTION_*): no Plan run.
	runs, _ = rec.count()
	gaps = rec.gapCount()
	cur := in.SettingsTriple(t, "fleet-agent-leader-election", election.FleetDefaults)
	next := cur.With(election.RetryPeriod, cur.RetryPeriod-time.Second)
	in.SetTriple(t, "fleet-agent-leader-election", cur, next)
	framework.Within(t, 3*time.Minute, "the local agent runs the new triple", func() bool {
		got, found := in.ContainerTriple(t, framework.FleetLocalNamespace, "fleet-agent", "fleet-agent", election.CattlePrefix)
		return found && got == next
	})
	in.Calm(t, 30*time.Second, 5*time.Minute)
	if now, _ := rec.count(); now != runs {
		t.Errorf("%d Plan changes after a global agent triple change, want none", now-runs)
	}
	rec.gapped(t, gaps)
}

// es is leasetune's ElectionStatus (empty while there is none).
func es(t *testing.T) electionstatus.Status {
	st, _ := in.ElectionStatus(t)
	return st
}

func conditionsOf(u *unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range cs {
		m, _ := c.(map[string]interface{})
		out = append(out, fmt.Sprintf("%v=%v", m["type"], m["status"]))
	}
	return out
}
