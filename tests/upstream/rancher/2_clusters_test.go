//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// proxyEnv is the user's own entry on every cluster, which must stay first.
var proxyEnv = map[string]interface{}{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}

// userAnnotation is an annotation of the user's on every source object
// (another domain than cattle.io, so Rancher copies it onward).
const userAnnotation = "example.com/team"

// managed is one cluster Rancher manages: its objects and which is the
// source of its agent env.
type managed struct {
	kind          string
	prov, mgmt    ref // provisioning (fleet-default or fleet-local) and management Cluster
	fleet         ref
	source        ref
	sourceIsMgmt  bool
	provSpecExtra map[string]interface{}
}

type ref struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (r ref) String() string {
	return r.gvr.Resource + "." + r.gvr.Group + " " + r.namespace + "/" + r.name
}

func (r ref) get(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	res := in.Dyn.Resource(r.gvr)
	var u *unstructured.Unstructured
	var err error
	if r.namespace == "" {
		u, err = res.Get(context.Background(), r.name, metav1.GetOptions{})
	} else {
		u, err = res.Namespace(r.namespace).Get(context.Background(), r.name, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatalf("get %s: %v", r, err)
	}
	return u
}

func envNames(u *unstructured.Unstructured) []string {
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	var out []string
	for _, it := range l {
		m, _ := it.(map[string]interface{})
		out = append(out, fmt.Sprintf("%v=%v", m["name"], m["value"]))
	}
	return out
}

// createClusters makes, through Rancher as its UI and API do, one cluster
// of each kind Rancher manages besides local: an imported cluster (a
// provisioning Cluster without rkeConfig in fleet-default), a provisioned
// RKE2 cluster (with rkeConfig), and a cluster imported through
// /v3/clusters (a legacy c-xxxxx name), each with the user's HTTPS_PROXY and
// annotation; then marks each management Cluster Ready, as a connected
// agent would (docs/upstream.md), so that Rancher makes its
// fleet Cluster. Which object is the source, from rancher/rancher
// v2.12.12 pkg/controllers/provisioningv2/cluster/controller.go:
// createNewCluster (a provisioning Cluster whose name is not legacy is the
// source) and, since v2.11, updateImportedCluster (an imported cluster's
// management Cluster is the source once it exists); a legacy cluster's
// management Cluster is the source (generateProvisioningClusterFromLegacyCluster).
func createClusters(t *testing.T) []*managed {
	t.Helper()
	ctx := context.Background()
	sfx := fmt.Sprint(time.Now().Unix() % 100000)
	var out []*managed
	for _, c := range []struct {
		kind  string
		extra map[string]interface{}
	}{
		{"imported", nil},
		{"rke2", map[string]interface{}{"kubernetesVersion": "v1.32.5+rke2r1", "rkeConfig": map[string]interface{}{}}},
	} {
		name := c.kind + "-" + sfx
		spec := map[string]interface{}{"agentEnvVars": []interface{}{proxyEnv}}
		for k, v := range c.extra {
			spec[k] = v
		}
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": name, "namespace": "fleet-default", "annotations": map[string]interface{}{userAnnotation: "blue"}},
			"spec":     spec,
		}}
		if _, err := in.Dyn.Resource(framework.ProvisioningClusters).Namespace("fleet-default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create provisioning Cluster %s: %v", name, err)
		}
		out = append(out, &managed{kind: c.kind, prov: ref{framework.ProvisioningClusters, "fleet-default", name}, provSpecExtra: c.extra})
	}
	// A legacy import through Norman, as Rancher's older UI made it.
	legacyName := "legacy-" + sfx
	code, body, err := in.Admin.Do(ctx, http.MethodPost, "/v3/clusters", map[string]interface{}{
		"type": "cluster", "name": legacyName,
		"agentEnvVars": []interface{}{proxyEnv},
		"annotations":  map[string]string{userAnnotation: "blue"},
	})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("POST /v3/clusters: %d %v %s", code, err, body)
	}
	var created struct{ ID string }
	_ = json.Unmarshal(body, &created)
	if !strings.HasPrefix(created.ID, "c-") || strings.HasPrefix(created.ID, "c-m-") {
		t.Fatalf("a /v3 import got id %q, want a legacy c-xxxxx", created.ID)
	}
	out = append(out, &managed{kind: "legacy", mgmt: ref{framework.ManagementClusters, "", created.ID}, source: ref{framework.ManagementClusters, "", created.ID}, sourceIsMgmt: true})

	for _, m := range out {
		m := m
		if m.kind != "legacy" {
			framework.Within(t, 2*time.Minute, "Rancher makes the management Cluster of "+m.prov.name, func() bool {
				u, err := in.Dyn.Resource(framework.ProvisioningClusters).Namespace("fleet-default").Get(ctx, m.prov.name, metav1.GetOptions{})
				if err != nil {
					return false
				}
				n, _, _ := unstructured.NestedString(u.Object, "status", "clusterName")
				m.mgmt = ref{framework.ManagementClusters, "", n}
				if n == "" {
					return false
				}
				_, err = in.Dyn.Resource(framework.ManagementClusters).Get(ctx, n, metav1.GetOptions{})
				return err == nil
			})
		} else {
			framework.Within(t, 2*time.Minute, "Rancher makes the provisioning Cluster of "+m.mgmt.name, func() bool {
				l, err := in.Dyn.Resource(framework.ProvisioningClusters).Namespace("fleet-default").List(ctx, metav1.ListOptions{})
				if err != nil {
					return false
				}
				for _, u := range l.Items {
					if n, _, _ := unstructured.NestedString(u.Object, "status", "clusterName"); n == m.mgmt.name {
						m.prov = ref{framework.ProvisioningClusters, "fleet-default", u.GetName()}
						return true
					}
				}
				return false
			})
		}
		switch m.kind {
		case "imported":
			m.source, m.sourceIsMgmt = m.mgmt, true
		case "rke2":
			m.source = m.prov
		}
		markReady(t, m.mgmt.name)
		m.fleet = ref{framework.FleetClusters, "fleet-default", m.prov.name}
	}
	for _, m := range out {
		m := m
		framework.Within(t, 3*time.Minute, "Rancher makes the fleet Cluster "+m.fleet.String(), func() bool {
			_, err := in.Dyn.Resource(framework.FleetClusters).Namespace(m.fleet.namespace).Get(ctx, m.fleet.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				markReady(t, m.mgmt.name) // Rancher may have reset the condition
			}
			return err == nil
		}, func() string { return fmt.Sprintf("%s conditions: %v", m.mgmt, m.mgmt.get(t).Object["status"]) })
	}
	local := &managed{kind: "local", prov: ref{framework.ProvisioningClusters, "fleet-local", "local"},
		mgmt: ref{framework.ManagementClusters, "", "local"}, fleet: ref{framework.FleetClusters, "fleet-local", "local"}}
	local.source, local.sourceIsMgmt = local.mgmt, true
	return append([]*managed{local}, out...)
}

// markReady sets the management Cluster's Ready condition (and from
// v2.15.0 its Connected condition) True in its status, as Rancher's cluster agent connection would. Rancher
// v2.12.12 makes the fleet Cluster once Ready is True; v2.15.0 also waits
// for Connected (rancher/rancher v2.15.0 pkg/controllers/provisioningv2/
// cluster/controller.go: the kubeconfig Secret, status.clientSecretName,
// which the fleetcluster handler needs, comes only once the management
// Cluster is Connected). v2.15.0's management Cluster CRD has a status
// subresource; v2.12.12's has none (Rancher makes its CRDs from its Go
// types, status included in the object).
func markReady(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	res := in.Dyn.Resource(framework.ManagementClusters)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{"Ready": true}
	if in.RancherAtLeast("2.15.0") {
		set["Connected"] = true
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var kept []interface{}
	already := 0
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		typ, _ := m["type"].(string)
		if !set[typ] {
			kept = append(kept, c)
		} else if m["status"] == "True" {
			already++
		}
	}
	if already == len(set) {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339)
	for typ := range set {
		kept = append(kept, map[string]interface{}{"type": typ, "status": "True", "lastUpdateTime": now})
	}
	_ = unstructured.SetNestedSlice(u.Object, kept, "status", "conditions")
	_, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) { // no status subresource
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsConflict(err) {
		t.Fatalf("mark %s Ready and Connected: %v", name, err)
	}
}

// clusterWrites counts the writes of cluster objects (the three kinds)
// among rs, by user.
func clusterWrites(rs []framework.Request) map[string]int {
	return framework.Count(rs, func(r framework.Request) bool {
		return r.Write() && r.Resource == "clusters" && r.Subresource == ""
	}, func(r framework.Request) string { return r.User + " " + r.Verb + " " + r.Object() })
}

// warnings returns the Warning Events about the object named name of the
// cluster kinds.
func warnings(t *testing.T, ns, name string) []string {
	t.Helper()
	if ns == "" {
		ns = "default"
	}
	l, err := in.CP.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "type": corev1.EventTypeWarning}.AsSelector().String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// Test06ManagedClusters is case 3: the clusters Rancher manages (local, an
// imported one, a provisioned RKE2 one, a legacy /v3 import), beside the
// real Rancher.
//
// With the real Fleet v0.13.14 (channel agentmanagement: the agent
// manifest renders CATTLE_ELECTION_* itself) leasetune writes no cluster
// object: after converging, nothing writes a cluster object for 60 s, and a
// global agent change rolls fleet-agentmanagement and the local agent
// only.
//
// Then leasetune is set to the channel of agents that read the env of
// their cluster (cluster-env-v0.9, Fleet v0.9's agents, which Rancher 2.8
// shipped), with Fleet's fleet-controller scaled to 0 (its v0.13
// agentmanagement would render a second CATTLE_ELECTION_* of each name
// for the local agent: docs/design.md, rule 10). leasetune writes each source
// object once, Rancher copies the env to the management and fleet Clusters
// (one change of each fleet Cluster's spec.agentEnvVars: one agent
// redeploy each), the user's HTTPS_PROXY stays first, no Warning is
// recorded on Rancher's copies, and nothing writes a cluster object for
// 60 s; one global change is one more write of each source and one more
// change of each fleet Cluster. Going back to the detected channel removes
// leasetune's entries with one write of each source.
func Test06ManagedClusters(t *testing.T) {
	framework.Need(t, in)
	ctx := context.Background()
	recs := map[string]*framework.EnvRecorder{}
	for _, gvr := range []schema.GroupVersionResource{framework.ProvisioningClusters, framework.ManagementClusters, framework.FleetClusters} {
		r, err := framework.RecordEnv(in.Dyn, gvr)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		recs[gvr.Resource+"."+gvr.Group] = r
	}
	fleetRec := recs["clusters.fleet.cattle.io"]
	// quiet checks that in d nothing but Rancher's own status updates of
	// management Clusters wrote a cluster object: no write by leasetune,
	// none of a provisioning or fleet Cluster, and no change of any spec,
	// label or annotation. Rancher's health check updates every management
	// Cluster every 15 s (rancher/rancher v2.12.12 pkg/controllers/
	// managementuser/healthsyncer/healthsyncer.go: syncInterval, and
	// ClusterConditionReady.Do sets a new lastUpdateTime each time; the
	// CRD has no status subresource, so these are updates of the object).
	quiet := func(t *testing.T, d time.Duration) {
		t.Helper()
		mark, _ := in.Audit.Mark()
		marks := map[string]int{}
		for k, r := range recs {
			marks[k] = r.Mark()
		}
		time.Sleep(d)
		rs, _ := in.Audit.Since(mark)
		rancherStatus := 0
		for w, n := range clusterWrites(rs) {
			if strings.HasPrefix(w, rancherSA+" update clusters.management.cattle.io ") {
				rancherStatus += n
				continue
			}
			t.Errorf("a cluster object written in %s after converging (a write fight): %s ×%d", d, w, n)
		}
		for k, r := range recs {
			if r.Broken() {
				t.Errorf("the watch of %s ended: the window is not seen whole", k)
			}
			if ch := r.Changes(marks[k]); len(ch) > 0 {
				t.Errorf("%s: agentEnvVars changed in %s: %v", k, d, ch)
			}
			if ch := r.OtherChanges(marks[k]); len(ch) > 0 {
				t.Errorf("%s: spec, labels or annotations changed in %s: %v\n%s", k, d, ch, r.Describe(marks[k]))
			}
		}
		t.Logf("%s without a change of any cluster object; Rancher's own status updates of the management Clusters: %d", d, rancherStatus)
	}
	cs := createClusters(t)
	in.Calm(t, 20*time.Second, 3*time.Minute)

	t.Run("agentmanagement-quiet", func(t *testing.T) {
		quiet(t, 60*time.Second)
		for _, c := range cs {
			if got := envNames(c.fleet.get(t)); len(got) == 0 || got[0] != "HTTPS_PROXY=http://proxy.example:3128" {
				if c.kind != "local" {
					t.Errorf("%s: fleet Cluster env %v, want the user's HTTPS_PROXY (leasetune writes nothing on agentmanagement)", c.fleet, got)
				}
			}
		}
	})

	cur := in.SettingsTriple(t, "fleet-agent-leader-election", election.FleetDefaults)
	t.Run("agentmanagement-global-change", func(t *testing.T) {
		next := cur.With(election.RetryPeriod, cur.RetryPeriod-time.Second)
		before := in.Rollouts(t)
		mark, _ := in.Audit.Mark()
		em := fleetRec.Mark()
		in.SetTriple(t, "fleet-agent-leader-election", cur, next)
		cur = next
		framework.Within(t, 3*time.Minute, "the local agent runs the new triple", func() bool {
			got, found := in.ContainerTriple(t, framework.FleetLocalNamespace, "fleet-agent", "fleet-agent", election.CattlePrefix)
			return found && got == next
		})
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		for w := range clusterWrites(rs) {
			if strings.HasPrefix(w, framework.Leasetune+" ") {
				t.Errorf("leasetune wrote a cluster object on agentmanagement: %s", w)
			}
		}
		if ch := fleetRec.Changes(em); len(ch) > 0 {
			t.Errorf("fleet Clusters' env changed:\n%s", fleetRec.Describe(em))
		}
		in.WantRollouts(t, before, map[string]int{
			framework.FleetNamespace + "/fleet-controller": 1,
			framework.FleetLocalNamespace + "/fleet-agent": 1,
		})
	})

	// To the cluster-env channel, with no Fleet controller to render the
	// local agent.
	scale(t, framework.FleetNamespace, "fleet-controller", 0)
	upgradeLeasetune(t, "fleetAgentChannel=cluster-env-v0.9")
	wantEnv := func(c *managed, tm election.Timings) []string {
		env := []string{"HTTPS_PROXY=http://proxy.example:3128"}
		if c.kind == "local" {
			env = nil
		}
		for _, e := range election.CattlePrefix.Env(tm) {
			env = append(env, e.Name+"="+e.Value)
		}
		return env
	}
	converged := func(tm election.Timings) func() bool {
		return func() bool {
			for _, c := range cs {
				if !prefixOf(envNames(c.source.get(t)), wantEnv(c, tm)) || !prefixOf(envNames(c.fleet.get(t)), wantEnv(c, tm)) {
					return false
				}
			}
			return true
		}
	}
	explain := func() string {
		var b strings.Builder
		for _, c := range cs {
			fmt.Fprintf(&b, "%s: source %s %v; fleet %v\n", c.kind, c.source, envNames(c.source.get(t)), envNames(c.fleet.get(t)))
		}
		return b.String()
	}
	t.Run("cluster-env-converges", func(t *testing.T) {
		mark, _ := in.Audit.Mark()
		em := fleetRec.Mark()
		framework.Within(t, 3*time.Minute, "leasetune's entries on every source and fleet Cluster", converged(cur), explain)
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		checkOneWriteEach(t, rs, cs, fleetRec, em)
	})
	t.Run("cluster-env-quiet", func(t *testing.T) { quiet(t, 60*time.Second) })
	t.Run("cluster-env-global-change", func(t *testing.T) {
		next := cur.With(election.RetryPeriod, cur.RetryPeriod+2*time.Second)
		mark, _ := in.Audit.Mark()
		em := fleetRec.Mark()
		in.SetTriple(t, "fleet-agent-leader-election", cur, next)
		cur = next
		framework.Within(t, 3*time.Minute, "the new triple on every source and fleet Cluster", converged(cur), explain)
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		checkOneWriteEach(t, rs, cs, fleetRec, em)
	})
	snapshot = snapshotOf(t, cs)

	t.Run("back-to-agentmanagement", func(t *testing.T) {
		mark, _ := in.Audit.Mark()
		upgradeLeasetune(t, "fleetAgentChannel=auto")
		framework.Within(t, 3*time.Minute, "leasetune's entries removed", func() bool {
			for _, c := range cs {
				for _, e := range envNames(c.source.get(t)) {
					if strings.HasPrefix(e, "CATTLE_ELECTION_") {
						return false
					}
				}
			}
			return true
		}, explain)
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		got, want := map[string]int{}, map[string]int{}
		for w, n := range clusterWrites(rs) {
			if strings.HasPrefix(w, framework.Leasetune+" ") {
				got[w] = n
			}
		}
		for _, c := range cs {
			want[framework.Leasetune+" patch "+c.source.gvr.Resource+"."+c.source.gvr.Group+" "+c.source.namespace+"/"+c.source.name] = 1
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("leasetune's writes removing its entries:\n%swant one of each source:\n%s", framework.Format(got), framework.Format(want))
		}
	})
	scale(t, framework.FleetNamespace, "fleet-controller", 1)
	if err := in.WaitRunning(framework.FleetNamespace, "fleet-controller", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	_ = ctx
}

// checkOneWriteEach checks one write by leasetune of each source object
// and nothing else of the clusters, one change of each fleet Cluster's
// env, and no Warning on Rancher's copies.
func checkOneWriteEach(t *testing.T, rs []framework.Request, cs []*managed, rec *framework.EnvRecorder, mark int) {
	t.Helper()
	want := map[string]int{}
	for _, c := range cs {
		want[framework.Leasetune+" patch "+c.source.gvr.Resource+"."+c.source.gvr.Group+" "+c.source.namespace+"/"+c.source.name] = 1
	}
	got := map[string]int{}
	for w, n := range clusterWrites(rs) {
		if strings.HasPrefix(w, framework.Leasetune+" ") {
			got[w] = n
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("leasetune's cluster writes:\n%swant one of each source object:\n%s", framework.Format(got), framework.Format(want))
	}
	changes := rec.Changes(mark)
	for _, c := range cs {
		if n := changes[c.fleet.namespace+"/"+c.fleet.name]; n != 1 {
			t.Errorf("%s: spec.agentEnvVars changed %d times, want 1 (one agent redeploy)", c.fleet, n)
		}
		for _, copy := range []ref{c.mgmt, c.fleet, c.prov} {
			if copy == c.source {
				continue
			}
			if w := warnings(t, copy.namespace, copy.name); len(w) > 0 {
				t.Errorf("Warnings on Rancher's copy %s: %v", copy, w)
			}
		}
	}
	if t.Failed() {
		t.Logf("fleet Cluster env changes:\n%s", rec.Describe(mark))
	}
}

func prefixOf(got, want []string) bool {
	if len(got) < len(want) {
		return false
	}
	for i := range want {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func scale(t *testing.T, ns, name string, n int) {
	t.Helper()
	p := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := in.CP.Client.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatal(err)
	}
}

// upgradeLeasetune runs helm upgrade of leasetune's release with the
// values it has and set, and waits for the new pod.
func upgradeLeasetune(t *testing.T, set ...string) {
	t.Helper()
	chart, err := framework.LeasetuneChart()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"upgrade", "leasetune", chart, "--namespace", framework.LeasetuneNamespace, "--reuse-values"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if _, err := in.Helm.Run(args...); err != nil {
		t.Fatal(err)
	}
	if err := in.WaitRunning(framework.LeasetuneNamespace, "leasetune", 3*time.Minute); err != nil {
		t.Fatalf("leasetune after helm upgrade: %v\n%s", err, in.Logs(framework.LeasetuneNamespace, "leasetune", 30))
	}
}

// copies is what one cluster's objects say after case 3: the env and the
// annotations of the test's and leasetune's keys on each.
type copies struct {
	Kind                   string
	SourceIsMgmt           bool
	Prov, Mgmt, Fleet      []string
	ProvAnn, MgmtAnn, FAnn map[string]string
	// SourceAnnotations are all of the source's annotations of those keys.
	ProvName, MgmtName string
}

// snapshot is case 3's final state, for case 8.
var snapshot []copies

func keptAnnotations(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for k, v := range u.GetAnnotations() {
		if k == userAnnotation || strings.HasPrefix(k, "leasetune.io/") || strings.HasPrefix(k, "election.cattle.io/") {
			out[k] = v
		}
	}
	return out
}

func snapshotOf(t *testing.T, cs []*managed) []copies {
	t.Helper()
	var out []copies
	for _, c := range cs {
		p, m, f := c.prov.get(t), c.mgmt.get(t), c.fleet.get(t)
		out = append(out, copies{Kind: c.kind, SourceIsMgmt: c.sourceIsMgmt, ProvName: c.prov.name, MgmtName: c.mgmt.name,
			Prov: envNames(p), Mgmt: envNames(m), Fleet: envNames(f),
			ProvAnn: keptAnnotations(p), MgmtAnn: keptAnnotations(m), FAnn: keptAnnotations(f)})
	}
	return out
}
