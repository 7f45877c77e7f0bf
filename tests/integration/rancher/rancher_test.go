package rancher_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// warningReasons are the Warning Events the controller records.
var warningReasons = []string{"ElectionOverrideIgnored", "InvalidElectionOverride", "ForeignElectionEnv", "ElectionOverrideUnsupported"}

// quietWindow is how long a converged installation must see no write.
const quietWindow = 60 * time.Second

// cell is one Rancher version and Fleet channel, and which steps run
// there (every step costs time; the package must stay within go test's
// default 10 minutes).
type cell struct {
	version string
	channel fleet.AgentChannel
	quiet   bool // step 2, 60 s
	edit    bool // steps 4 and 5
}

var cells = []cell{
	{"v2.8.5", fleet.ChannelClusterEnvV09, true, true},
	{"v2.10.3", fleet.ChannelClusterEnvV09, true, true},
	{"v2.11.3", fleet.ChannelClusterEnvV09, false, false}, // the imported routing differs
	{"v2.8.5", fleet.ChannelAgentManagement, true, true},
	{"v2.10.3", fleet.ChannelAgentManagement, true, true},
	{"v2.11.3", fleet.ChannelAgentManagement, false, false},
}

// TestBesideRancher runs, for each Rancher version and Fleet channel, the
// controller beside the Rancher double with five clusters (local, legacy
// c-xxxxx, imported c-m-xxxxxxxx, provisioned RKE2, standalone Fleet),
// each with the user's env entries and agent customizations on its source
// object. The steps share the clusters and run in order; a failed step
// ends the cell.
//
//  1. converges: every fleet Cluster ends with exactly the entries its
//     agents need, on the right source objects, customizations intact.
//  2. quiet: then no write to any cluster object for 60 s (a watch on the
//     three kinds), neither leasetune's nor the double's.
//  3. global change: one change of the global agent triple makes exactly
//     one write by leasetune on each source object and exactly one change
//     of each fleet Cluster's env (one agent redeploy); none on
//     agentmanagement.
//  4. user edit: a user adds an entry to a provisioning Cluster's env:
//     leasetune's entries stay, leasetune writes nothing, the fleet
//     Cluster gets the user's entry.
//  5. overrides (cluster-env-v0.9): override annotations on provisioning
//     Clusters reach those clusters' fleet Clusters, with no Warning Event
//     on the management or fleet copies Rancher makes of the annotations.
//
// No fleet Cluster ever has a duplicate env name: the watch checks every
// version it sees (harness cleanup).
func TestBesideRancher(t *testing.T) {
	for _, c := range cells {
		c := c
		t.Run(c.version+"/"+string(c.channel), func(t *testing.T) {
			h := newHarness(t, c.version, c.channel, election.FleetDefaults)
			cs := h.createClusters(allKinds...)
			steps := []struct {
				name string
				run  func(*testing.T, *harness, []*cluster)
				on   bool
			}{
				{"1-converges", stepConverges, true},
				{"2-no-writes-for-60s", stepQuiet, c.quiet},
				{"3-global-change", stepGlobalChange, true},
				{"4-user-edits-provisioning-env", stepUserEdit, c.edit},
				{"5-overrides-on-provisioning", stepOverrides, c.edit && c.channel == fleet.ChannelClusterEnvV09},
			}
			for _, s := range steps {
				if !s.on {
					continue
				}
				if !t.Run(s.name, func(t *testing.T) {
					h.t = t
					rj := len(h.writes.Refused())
					defer func() {
						// Refused requests change nothing (they are not
						// writes); shown for the record.
						if r := h.writes.Refused()[rj:]; len(r) > 0 {
							t.Logf("write requests of leasetune the API server refused: %v", r)
						}
					}()
					s.run(t, h, cs)
				}) {
					h.t = t
					t.Fatalf("step %s failed: the later steps of this cell do not run", s.name)
				}
				h.t = t
			}
		})
	}
}

func stepConverges(t *testing.T, h *harness, cs []*cluster) {
	h.converge("initial convergence", cs)
	// Leasetune wrote only source objects (DESIGN rule 6): never an object
	// Rancher generates.
	sources := map[string]bool{}
	for _, c := range cs {
		sources[path(c.source)] = true
	}
	for p, n := range h.writes.AcceptedByPath() {
		if !sources[p] {
			t.Errorf("leasetune wrote %s %d times: Rancher generates it (sources: %v)", p, n, keysOf(sources))
		}
	}
	for _, c := range cs {
		if got, want := specJSON(h.get(c.customOn), c.custom), customJSON(c.custom, c.custom); got != want {
			t.Errorf("%s: agent customizations changed:\n got %s\nwant %s", c.customOn, got, want)
		}
		u := h.get(c.source)
		if h.channel == fleet.ChannelAgentManagement {
			if _, ok := u.GetAnnotations()[agentenv.RecordAnnotation]; ok {
				t.Errorf("%s has %s on agentmanagement, where nothing is written", c.source, agentenv.RecordAnnotation)
			}
		}
	}
	if h.channel == fleet.ChannelAgentManagement {
		if n := h.writes.Accepted(); n != 0 {
			t.Errorf("leasetune made %d writes on agentmanagement, where Fleet renders every agent's CATTLE_ELECTION_*: %v", n, h.writes.AcceptedByPath())
		}
	}
	t.Logf("converged: leasetune writes %v; double writes %d", h.writes.AcceptedByPath(), h.d.TotalWrites())
}

func stepQuiet(t *testing.T, h *harness, cs []*cluster) {
	mark, lw, dw := h.rec.seq(), h.writes.AcceptedByPath(), h.d.TotalWrites()
	rec, lws := h.d.Reconciles(), h.writes.Writes()
	framework.Consistently(t, "no change of a cluster object, no write", quietWindow, func() bool {
		return len(h.rec.since(mark, h.owns)) == 0 && h.writes.Writes() == lws && h.d.TotalWrites() == dw
	})
	evs := h.rec.since(mark, h.owns)
	if len(evs) > 0 {
		t.Errorf("%d changes of cluster objects in %s after converging (a write fight): leasetune's writes %v, the double's %d:%s",
			len(evs), quietWindow, delta(lw, h.writes.AcceptedByPath()), h.d.TotalWrites()-dw, h.rec.describe(evs))
	}
	if d := delta(lw, h.writes.AcceptedByPath()); len(d) > 0 {
		t.Errorf("leasetune wrote in the quiet window: %v", d)
	}
	if n := h.d.TotalWrites() - dw; n != 0 {
		t.Errorf("the double wrote %d times in the quiet window", n)
	}
	if h.d.Reconciles() == rec {
		t.Errorf("the double never reconciled in %s: the window shows nothing", quietWindow)
	}
	if m := h.mismatch(cs); m != "" {
		t.Errorf("state changed:%s", m)
	}
	t.Logf("%s: no change; the double reconciled %d times", quietWindow, h.d.Reconciles()-rec)
}

func stepGlobalChange(t *testing.T, h *harness, cs []*cluster) {
	mark, lw := h.rec.seq(), h.writes.AcceptedByPath()
	next := kit.Timings("40s", "30s", "5s")
	if next == h.global {
		t.Fatal("test: the new triple equals the old")
	}
	h.global = next
	h.tr.Set(settings.FleetAgent, next)
	h.converge("after the global change", cs)
	want := 0
	if h.channel == fleet.ChannelClusterEnvV09 {
		want = 1
	}
	d := delta(lw, h.writes.AcceptedByPath())
	for _, c := range cs {
		if n := d[path(c.source)]; n != want {
			t.Errorf("%s (%s): %d writes by leasetune for one global change, want %d", c.source, c.kind, n, want)
		}
		delete(d, path(c.source))
		if n := h.rec.envChanges(c.fleet, mark); n != want {
			t.Errorf("%s (%s): spec.agentEnvVars changed %d times (agent redeploys) for one global change, want %d:%s",
				c.fleet, c.kind, n, want, h.rec.describe(h.rec.since(mark, func(o objRef) bool { return o == c.fleet })))
		}
	}
	if len(d) > 0 {
		t.Errorf("leasetune wrote other objects for the global change: %v", d)
	}
	t.Logf("global change: leasetune writes %v", delta(lw, h.writes.AcceptedByPath()))
}

func stepUserEdit(t *testing.T, h *harness, cs []*cluster) {
	mark, lw := h.rec.seq(), h.writes.AcceptedByPath()
	var edited []*cluster
	for _, c := range cs {
		if c.prov == nil || c.source != *c.prov {
			continue // only provisioning Clusters that are the source
		}
		// As kubectl edit: the whole list as read, one entry added at the
		// end, with the resourceVersion read.
		u := h.get(c.source)
		env, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
		extra := "EXTRA_CA_BUNDLE=/etc/ssl/extra/" + c.kind + ".pem"
		env = append(env, map[string]interface{}{"name": "EXTRA_CA_BUNDLE", "value": "/etc/ssl/extra/" + c.kind + ".pem"})
		h.patch(c.source, map[string]interface{}{
			"metadata": map[string]interface{}{"resourceVersion": u.GetResourceVersion()},
			"spec":     map[string]interface{}{"agentEnvVars": env},
		})
		c.after = append(c.after, extra)
		edited = append(edited, c)
	}
	if len(edited) == 0 {
		t.Fatal("test: no provisioning Cluster is a source here")
	}
	h.converge("after the user's edit", cs)
	if d := delta(lw, h.writes.AcceptedByPath()); len(d) > 0 {
		t.Errorf("leasetune wrote after a user's edit of env it does not own: %v; events:%s", d, h.rec.describe(h.rec.since(mark, h.owns)))
	}
	for _, c := range edited {
		if n := h.rec.envChanges(c.fleet, mark); n != 1 {
			t.Errorf("%s: env changed %d times for one user edit, want 1:%s", c.fleet, n,
				h.rec.describe(h.rec.since(mark, func(o objRef) bool { return o == c.fleet })))
		}
	}
}

func stepOverrides(t *testing.T, h *harness, cs []*cluster) {
	mark, lw := h.rec.seq(), h.writes.AcceptedByPath()
	overrides := map[string]struct {
		ann  map[string]interface{}
		want election.Timings
	}{
		"provisioned": {map[string]interface{}{agentenv.LeaseDurationAnnotation: "50s", agentenv.RenewDeadlineAnnotation: "40s",
			agentenv.RetryPeriodAnnotation: "8s"}, kit.Timings("50s", "40s", "8s")},
		"imported": {map[string]interface{}{agentenv.RetryPeriodAnnotation: "6s"}, h.global.With(election.RetryPeriod, 6*time.Second)},
	}
	var set []*cluster
	for _, c := range cs {
		o, ok := overrides[c.kind]
		if !ok || c.prov == nil || c.source != *c.prov {
			continue
		}
		h.patch(c.source, map[string]interface{}{"metadata": map[string]interface{}{"annotations": o.ann}})
		w := o.want
		c.override = &w
		set = append(set, c)
	}
	if len(set) == 0 {
		t.Fatal("test: no provisioning Cluster is a source here")
	}
	h.converge("after the overrides", cs)
	d := delta(lw, h.writes.AcceptedByPath())
	for _, c := range set {
		if n := d[path(c.source)]; n != 1 {
			t.Errorf("%s: %d writes by leasetune for its override, want 1", c.source, n)
		}
		delete(d, path(c.source))
		if n := h.rec.envChanges(c.fleet, mark); n != 1 {
			t.Errorf("%s: env changed %d times for one override, want 1", c.fleet, n)
		}
		// Rancher copies the annotations to the management Cluster: the
		// case the Events below are about.
		if got := h.get(*c.mgmt).GetAnnotations()[agentenv.RetryPeriodAnnotation]; got == "" {
			t.Errorf("%s lacks the override annotations Rancher copies: the check below shows nothing", *c.mgmt)
		}
	}
	if len(d) > 0 {
		t.Errorf("leasetune wrote other objects for the overrides: %v", d)
	}
	// (The broadcaster sends Events asynchronously.)
	var warned string
	framework.Consistently(t, "no Warning Event on the objects Rancher copies the annotations to", framework.ConsistentlyMin, func() bool {
		for _, c := range set {
			for _, o := range []objRef{*c.mgmt, c.fleet, *c.prov} {
				for _, r := range warningReasons {
					if ev := cp.Events(t, o.Namespace, o.Name, r); len(ev) > 0 {
						warned = fmt.Sprintf("Warning Event %s on %s: %v", r, o, ev)
						return false
					}
				}
			}
		}
		return true
	})
	if warned != "" {
		t.Error(warned)
	}
}

// TestV211ImportedWritesManagement: beside Rancher v2.11.3, an imported
// cluster's management Cluster is its source (updateImportedCluster):
// leasetune writes the management Cluster, never the provisioning Cluster,
// and the double does not put the write back (nothing changes afterwards,
// over many of its resyncs).
func TestV211ImportedWritesManagement(t *testing.T) {
	h := newHarness(t, "v2.11.3", fleet.ChannelClusterEnvV09, election.FleetDefaults)
	cs := h.createClusters("imported")
	c := cs[0]
	if c.source != *c.mgmt {
		t.Fatalf("test: source %s, want the management Cluster", c.source)
	}
	h.converge("imported cluster on v2.11.3", cs)
	w := h.writes.AcceptedByPath()
	if n := w[path(*c.mgmt)]; n != 1 {
		t.Errorf("%s: %d writes by leasetune, want 1", *c.mgmt, n)
	}
	if n := w[path(*c.prov)]; n != 0 {
		t.Errorf("%s: %d writes by leasetune: on v2.11+ Rancher no longer reads it for imported clusters", *c.prov, n)
	}
	if got := kit.AgentEnv(h.get(*c.prov)); !slices.Equal(got, userEnv) {
		t.Errorf("%s env %v, want the user's %v untouched", *c.prov, got, userEnv)
	}
	mark, dw := h.rec.seq(), h.d.TotalWrites()
	framework.Consistently(t, "no change over 15 of the double's resyncs", 15*doubleResync, func() bool {
		return len(h.rec.since(mark, h.owns)) == 0 && h.d.TotalWrites() == dw
	})
	if evs := h.rec.since(mark, h.owns); len(evs) > 0 {
		t.Errorf("changes after converging (the double putting the management Cluster back?):%s", h.rec.describe(evs))
	}
	if n := h.d.TotalWrites() - dw; n != 0 {
		t.Errorf("the double wrote %d times after converging", n)
	}
	if got, want := kit.AgentEnv(h.get(*c.mgmt)), h.wantSource(c); !slices.Equal(got, want) {
		t.Errorf("%s env %v, want %v", *c.mgmt, got, want)
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
