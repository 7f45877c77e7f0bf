package e2e_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// The settle time the tests in this file give the controller (--settle),
// shorter than the default 10s to keep them quick; edits "in a row" are
// editGap apart, all three well within it.
const (
	settle  = 4 * time.Second
	editGap = 500 * time.Millisecond
	// quiet is how long a step waits, once its effect is visible, for a
	// write beyond the minimum to show.
	quiet = 4 * time.Second
)

var settleFlags = []string{"--settle", settle.String()}

const (
	agentLease = "fleet-agent-leader-election-lease-duration"
	agentRenew = "fleet-agent-leader-election-renew-deadline"
	agentRetry = "fleet-agent-leader-election-retry-period"
	ctrlLease  = "fleet-leader-election-lease-duration"
	ctrlRenew  = "fleet-leader-election-renew-deadline"
	ctrlRetry  = "fleet-leader-election-retry-period"
)

// createRancherConfig creates Rancher's rancher-config with Fleet chart
// values that carry no timings yet (the controller adds them).
func createRancherConfig(t *testing.T, e env) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetenv.RancherConfigName, Namespace: e.rancherNS},
		Data: map[string]string{fleetenv.RancherConfigKey: "apiServerURL: https://rancher.example.com\n"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(e.rancherNS).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rancherConfigHas reports whether rancher-config carries ctrl and agent.
func rancherConfigHas(t *testing.T, e env, ctrl, agent election.Timings) bool {
	t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(e.rancherNS).Get(context.Background(), fleetenv.RancherConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, changed, err := fleetenv.MergeChartValues(cm.Data[fleetenv.RancherConfigKey], ctrl, true, agent, true)
	return err == nil && !changed
}

// inEffect returns the triple in effect for a component, as the
// controller's state ConfigMap and the Settings say, and whether it is in
// effect with nothing pending.
func inEffect(t *testing.T, e env, c settings.Component) (election.Timings, bool) {
	t.Helper()
	l, err := dyn(framework.SettingsGVR, "").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []v3.Setting
	for _, it := range l.Items {
		var s v3.Setting
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &s); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, s)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), settings.DefaultStateName, metav1.GetOptions{})
	if err != nil {
		return election.Timings{}, false
	}
	st, _ := settings.Snapshot(objs, cm.Data)
	s := st[c]
	return s.Effective, s.HasEffective && s.Pending == nil
}

// edits sets name=value pairs one after another, editGap apart, and
// fails when they did not all fall within the settle time (a slow machine
// would then test something else).
func edits(t *testing.T, kv ...string) {
	t.Helper()
	began := time.Now()
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			time.Sleep(editGap)
		}
		setSetting(t, kv[i], kv[i+1])
	}
	if took := time.Since(began); took >= settle {
		t.Fatalf("the %d edits took %s, not within the settle time %s", len(kv)/2, took, settle)
	}
}

func annotate(t *testing.T, ns, name string, ann map[string]interface{}) {
	t.Helper()
	body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	if _, err := dyn(fleetGVR, ns).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
}

// sequence runs steps of operator actions against an observer and fails
// a step on any count that differs from its minimum.
type sequence struct {
	t   *testing.T
	obs *observer
}

// step does do, waits until done, then quiet longer, and compares what
// the observer counted with want ("Deployment gitjob": rollouts, "Cluster
// p1": redeploys, "ConfigMap rancher-config": data changes; absent: 0).
func (s sequence) step(name string, do func(), done func() bool, want map[string]int) {
	t := s.t
	t.Helper()
	m := s.obs.mark()
	do()
	if done != nil {
		framework.Eventually(t, name+": effect visible", done)
	}
	time.Sleep(quiet)
	got, other, log := s.obs.since(m)
	t.Logf("step %s: counted %v (writes that restart nothing: %v)\n  %s", name, got, other, strings.Join(log, "\n  "))
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		switch g, w := got[k], want[k]; {
		case g > w:
			t.Errorf("step %s: %s: %d changes, the minimum is %d (%d beyond it)", name, k, g, w, g-w)
		case g < w:
			t.Errorf("step %s: %s: %d changes, want %d", name, k, g, w)
		}
	}
}

// TestOperatorSequenceRestartsTheMinimum: a scripted sequence of operator
// actions, with every rollout (a Deployment's generation) and every agent
// redeploy (a change of a fleet Cluster's spec.agentEnvVars) counted from
// watches and compared with the least each step needs:
//
//	(a) a global agent change as three edits within the settle time;
//	(b) a controller triple change as three edits: one rollout per Fleet
//	    Deployment, no cluster;
//
// and on Fleet v0.9.9, where leasetune writes the clusters' env,
//
//	(c) an override added on a standalone cluster: one redeploy of it;
//	(d) the global catching up with the override: none of it;
//	(e) the override removed, the global equal to it: none.
//
// Clusters: p1, p2 (no overrides), pinned (all three overrides: its
// triple never follows the global), edge (gets the override in (c)).
func TestOperatorSequenceRestartsTheMinimum(t *testing.T) {
	t.Run(fleetV09, func(t *testing.T) { operatorSequence(t, fleetV09) })
	t.Run(fleetV014, func(t *testing.T) { operatorSequence(t, fleetV014) })
}

func operatorSequence(t *testing.T, fleetVersion string) {
	e := newEnv(t)
	deployments := installFleet(t, e, fleetVersion)
	sort.Strings(deployments)
	createRancherConfig(t, e)
	ns := cp.Namespace(t)
	pinned := map[string]string{agentenv.LeaseDurationAnnotation: "50s", agentenv.RenewDeadlineAnnotation: "40s", agentenv.RetryPeriodAnnotation: "10s"}
	for _, c := range []string{"p1", "p2", "edge"} {
		addCluster(t, ns, c, nil)
	}
	addCluster(t, ns, "pinned", pinned)
	obs := observe(t,
		target{kind: "Deployment", gvr: deploymentGVR, ns: e.fleetNS},
		target{kind: "Cluster", gvr: fleetGVR, ns: ns},
		target{kind: "ConfigMap", gvr: configMapGVR, ns: e.rancherNS, name: fleetenv.RancherConfigName})
	start(t, e, "one", settleFlags...)

	ctrl0, agent0 := kit.Timings("30s", "25s", "10s"), kit.Timings("30s", "25s", "10s")
	suffix := func(tm election.Timings) string {
		var out []string
		for _, ev := range election.CattlePrefix.Env(tm) {
			out = append(out, ev.Name+"="+ev.Value)
		}
		return strings.Join(out, ",")
	}
	has := func(c string, tm election.Timings) bool { return strings.HasSuffix(clusterEnv(t, ns, c), suffix(tm)) }
	// Converged at start: the Deployments carry the controller triple
	// (written on v0.9.9, whose chart sets none), rancher-config both, and
	// on v0.9.9 each cluster its triple.
	framework.Eventually(t, "converged at start", func() bool {
		for _, d := range deployments {
			if controllerTriple(t, e, d) != ctrl0 {
				return false
			}
		}
		if fleetVersion == fleetV09 && !(has("p1", agent0) && has("p2", agent0) && has("edge", agent0) && has("pinned", kit.Timings("50s", "40s", "10s"))) {
			return false
		}
		if fleetVersion == fleetV014 {
			if _, reported := annotations(t, fleetGVR, ns, "pinned")[agentenv.StatusAnnotation]; !reported {
				return false
			}
		}
		return rancherConfigHas(t, e, ctrl0, agent0)
	})
	time.Sleep(quiet) // what start-up writes is not counted

	s := sequence{t: t, obs: obs}
	const rc = "ConfigMap " + fleetenv.RancherConfigName
	rollouts := func(n int) map[string]int {
		w := map[string]int{}
		for _, d := range deployments {
			w["Deployment "+d] = n
		}
		return w
	}
	with := func(w map[string]int, kv ...interface{}) map[string]int {
		for i := 0; i < len(kv); i += 2 {
			w[kv[i].(string)] = kv[i+1].(int)
		}
		return w
	}

	// (a) The global agent triple 30s/25s/10s → 60s/40s/15s, as three
	// edits in a row (each intermediate triple valid).
	agent1 := kit.Timings("60s", "40s", "15s")
	doA := func() { edits(t, agentLease, "60s", agentRenew, "40s", agentRetry, "15s") }
	switch fleetVersion {
	case fleetV09:
		// One env change on each cluster whose triple follows the global
		// (not pinned), no rollout (v0.9 Deployments carry no agent
		// triple), one write of rancher-config.
		s.step("(a) global agent change, three edits", doA,
			func() bool {
				return has("p1", agent1) && has("p2", agent1) && has("edge", agent1) && rancherConfigHas(t, e, ctrl0, agent1)
			},
			with(map[string]int{}, "Cluster p1", 1, "Cluster p2", 1, "Cluster edge", 1, rc, 1))
	case fleetV014:
		// One rollout of fleet-controller (FLEET_AGENT_ELECTION_* on
		// fleet-agentmanagement), no cluster write.
		s.step("(a) global agent change, three edits", doA,
			func() bool { return agentTriple(t, e) == agent1 && rancherConfigHas(t, e, ctrl0, agent1) },
			with(map[string]int{}, "Deployment fleet-controller", 1, rc, 1))
	}

	// (b) The controller triple 30s/25s/10s → 40s/20s/5s as three edits:
	// one rollout per Fleet Deployment, no cluster.
	ctrl1 := kit.Timings("40s", "20s", "5s")
	s.step("(b) controller triple change, three edits",
		func() { edits(t, ctrlRetry, "5s", ctrlRenew, "20s", ctrlLease, "40s") },
		func() bool {
			for _, d := range deployments {
				if controllerTriple(t, e, d) != ctrl1 {
					return false
				}
			}
			return rancherConfigHas(t, e, ctrl1, agent1)
		},
		with(rollouts(1), rc, 1))

	if fleetVersion != fleetV09 {
		return
	}
	// (c) An override on the standalone cluster edge: 60s/40s/5s there.
	override := kit.Timings("60s", "40s", "5s")
	s.step("(c) override added on edge",
		func() { annotate(t, ns, "edge", map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s"}) },
		func() bool { return has("edge", override) },
		map[string]int{"Cluster edge": 1})

	// (d) The global catches up with it: edge keeps its env; the clusters
	// that follow the global (p1, p2) need their one change.
	s.step("(d) global catches up with the override",
		func() { setSetting(t, agentRetry, "5s") },
		func() bool {
			return has("p1", override) && has("p2", override) && rancherConfigHas(t, e, ctrl1, override)
		},
		map[string]int{"Cluster p1": 1, "Cluster p2": 1, rc: 1})

	// (e) The override removed: the global gives edge the same triple, so
	// nothing restarts.
	s.step("(e) override removed",
		func() { annotate(t, ns, "edge", map[string]interface{}{agentenv.RetryPeriodAnnotation: nil}) },
		func() bool {
			_, still := annotations(t, fleetGVR, ns, "edge")[agentenv.RetryPeriodAnnotation]
			return !still
		},
		map[string]int{})
	if !has("edge", override) || !has("p1", override) || !has("pinned", kit.Timings("50s", "40s", "10s")) {
		t.Errorf("end state: edge %s, p1 %s, pinned %s", clusterEnv(t, ns, "edge"), clusterEnv(t, ns, "p1"), clusterEnv(t, ns, "pinned"))
	}
}

// TestFleetUpgradeV012ToV014WritesTheMinimum: the agent channel changes
// with a Fleet upgrade. On Fleet v0.12.0 (channel fixed-v0.12, agents
// hardcoded to 30s/25s/10s) the agent triple is set to 40s/25s/10s and
// reaches nothing; the controller triple stays at 30s/25s/10s, what both
// charts render. Then the Deployments are replaced by v0.14.10's as a
// helm upgrade of a standalone Fleet (no rancher-config values feeding the
// chart) replaces them: an Update by the field manager "helm" of
// fleet-controller and gitjob, and helmops created.
//
// The minimum leasetune must then write, and why: the v0.14 chart renders
// FLEET_AGENT_ELECTION_* = 30s/25s/10s on fleet-agentmanagement, which
// differs from the agent settings in leaseDuration only, so one write of
// fleet-controller (one rollout) changing exactly
// FLEET_AGENT_ELECTION_LEASE_DURATION 30s → 40s; the chart's
// CATTLE_ELECTION_* equal the controller triple in effect, so no other
// entry and no write of gitjob or helmops; no cluster (v0.12 renders the
// agents' triple, and so does v0.14 from fleet-agentmanagement); no
// rancher-config write (no setting changed). The controller triple is
// left at the charts' values on purpose: then a helm three-way patch and
// an Update give the same live objects, so the minimum holds for either.
func TestFleetUpgradeV012ToV014WritesTheMinimum(t *testing.T) {
	e := newEnv(t)
	installFleet(t, e, "v0.12.0")
	createRancherConfig(t, e)
	ns := cp.Namespace(t)
	addCluster(t, ns, "p1", nil)
	obs := observe(t,
		target{kind: "Deployment", gvr: deploymentGVR, ns: e.fleetNS},
		target{kind: "Cluster", gvr: fleetGVR, ns: ns},
		target{kind: "ConfigMap", gvr: configMapGVR, ns: e.rancherNS, name: fleetenv.RancherConfigName})
	start(t, e, "one", settleFlags...)
	channel := func() string {
		cm, err := cp.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), fleetenv.ChannelConfigMapName, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return cm.Data["channel"]
	}
	ctrl, agent := kit.Timings("30s", "25s", "10s"), kit.Timings("40s", "25s", "10s")
	framework.Eventually(t, "v0.12 detected", func() bool { return channel() == "fixed-v0.12" })
	setSetting(t, agentLease, "40s")
	framework.Eventually(t, "agent triple in effect", func() bool {
		tm, ok := inEffect(t, e, settings.FleetAgent)
		return ok && tm == agent && rancherConfigHas(t, e, ctrl, agent)
	})
	time.Sleep(quiet)
	if got, _, log := obs.since(mark{}); len(got) != 1 || got["ConfigMap "+fleetenv.RancherConfigName] == 0 {
		// Only rancher-config (its values for the next chart upgrade): the
		// agent triple reaches no Deployment and no cluster on v0.12.
		t.Errorf("on Fleet v0.12.0: %v\n  %s", got, strings.Join(log, "\n  "))
	}

	// The helm upgrade to v0.14.10.
	m := obs.mark()
	helmGen := map[string]int64{}
	helmObj := map[string]*unstructured.Unstructured{}
	for _, d := range framework.FleetDeployments(t, fleetV014) {
		d = d.DeepCopy()
		d.Namespace = e.fleetNS
		cur, err := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), d.Name, metav1.GetOptions{})
		switch err {
		case nil:
			d.ResourceVersion = cur.ResourceVersion
			d, err = cp.Client.AppsV1().Deployments(e.fleetNS).Update(context.Background(), d, metav1.UpdateOptions{FieldManager: "helm"})
		default:
			d, err = cp.Client.AppsV1().Deployments(e.fleetNS).Create(context.Background(), d, metav1.CreateOptions{FieldManager: "helm"})
		}
		if err != nil {
			t.Fatalf("helm upgrade %s: %v", d.Name, err)
		}
		helmGen[d.Name] = d.Generation
		helmObj[d.Name] = toUnstructured(t, d)
	}
	framework.Eventually(t, "v0.14 detected and the agent triple on fleet-agentmanagement", func() bool {
		return channel() == "agentmanagement" && agentTriple(t, e) == agent
	})
	time.Sleep(quiet)
	_, _, log := obs.since(m)
	t.Logf("after the helm upgrade:\n  %s", strings.Join(log, "\n  "))
	var names []string
	for n := range helmGen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cur, err := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		var wantChanges []change
		if n == "fleet-controller" {
			want = 1
			wantChanges = []change{{"Deployment " + e.fleetNS + "/fleet-controller", "container fleet-agentmanagement env FLEET_AGENT_ELECTION_LEASE_DURATION", "30s", "40s"}}
		}
		if got := int(cur.Generation - helmGen[n]); got != want {
			t.Errorf("%s: %d rollouts by leasetune after the helm upgrade, the minimum is %d", n, got, want)
		}
		if got := deploymentChanges(helmObj[n], toUnstructured(t, cur)); jsonString(got) != jsonString(wantChanges) {
			t.Errorf("%s: leasetune changed %v, the minimum is %v", n, got, wantChanges)
		}
	}
	got, _, _ := obs.since(m)
	for k, v := range got {
		if strings.HasPrefix(k, "Cluster ") || strings.HasPrefix(k, "ConfigMap ") {
			t.Errorf("after the helm upgrade: %s changed %d times, the minimum is 0", k, v)
		}
	}
}

func toUnstructured(t *testing.T, obj interface{}) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}
