package agentenv

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/restart"
)

func e(name, value string) map[string]interface{} {
	return map[string]interface{}{"name": name, "value": value}
}

const (
	L = "CATTLE_ELECTION_LEASE_DURATION"
	D = "CATTLE_ELECTION_RENEW_DEADLINE"
	P = "CATTLE_ELECTION_RETRY_PERIOD"
)

var (
	user     = e("HTTPS_PROXY", "http://proxy:3128")
	fromRef  = map[string]interface{}{"name": "TOKEN", "valueFrom": map[string]interface{}{"secretKeyRef": map[string]interface{}{"name": "s", "key": "k"}}}
	global   = election.Timings{LeaseDuration: 60e9, RenewDeadline: 50e9, RetryPeriod: 20e9}
	rec6050  = map[string]string{L: "1m0s", D: "50s", P: "20s"}
	ours6050 = []map[string]interface{}{e(L, "1m0s"), e(D, "50s"), e(P, "20s")}
)

func over(l, d, p string) ([3]string, [3]bool) {
	var v [3]string
	var s [3]bool
	for i, x := range []string{l, d, p} {
		if x != "-" {
			v[i], s[i] = x, true
		}
	}
	return v, s
}

// factsOf is what FactsOf reads of a cluster object with the agent env
// env, the record rec (nil: none) and the override annotations vals/set.
func factsOf(env []map[string]interface{}, rec map[string]string, vals [3]string, set [3]bool) SourceFacts {
	ann := map[string]string{}
	if rec != nil {
		b, _ := json.Marshal(rec)
		ann[RecordAnnotation] = string(b)
	}
	for i, a := range OverrideAnnotations {
		if set[i] {
			ann[a] = vals[i]
		}
	}
	var items []interface{}
	if env != nil {
		items = make([]interface{}, 0, len(env))
		for _, x := range env {
			items = append(items, x)
		}
	}
	return FactsOf(cluster(items, ann))
}

// cluster is a fleet Cluster with spec.agentEnvVars items (nil: none) and
// the annotations ann.
func cluster(items []interface{}, ann map[string]string) *unstructured.Unstructured {
	u := obj("Cluster", "fleet-default", "c1", nil, map[string]interface{}{"spec": map[string]interface{}{}})
	if items != nil {
		u.Object["spec"].(map[string]interface{})["agentEnvVars"] = items
	}
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	return u
}

func TestDecide(t *testing.T) {
	retry5v, retry5s := over("-", "-", "5s")
	invalidV, invalidS := over("-", "-", "45s")    // renewDeadline 50s must exceed 1.2 × 45s = 54s
	unparsV, unparsS := over("-", "ten", "-")      // not a duration
	globalV, globalS := over("1m0s", "50s", "20s") // overrides equal to global
	wranglerV, wranglerS := over("45s", "30s", "2s")
	rec605 := map[string]string{L: "1m0s", D: "50s", P: "5s"}
	ours605 := []map[string]interface{}{e(L, "1m0s"), e(D, "50s"), e(P, "5s")}
	with := func(a []map[string]interface{}, b ...map[string]interface{}) []map[string]interface{} {
		return append(append([]map[string]interface{}{}, a...), b...)
	}
	cases := []struct {
		name     string
		env      []map[string]interface{}
		rec      map[string]string
		vals     [3]string
		set      [3]bool
		channel  fleet.AgentChannel
		rancher  bool
		change   bool
		wantEnv  []map[string]interface{}
		wantRec  map[string]string
		problem  Problem
		errParts []string
		runs     string // what fleet-agent runs afterwards ("" = no election)
		// object, when set, is the source object instead of env, rec,
		// vals and set.
		object *unstructured.Unstructured
	}{
		// Fleet v0.13+ renders the names itself: nothing is ever written.
		{name: "v0.13+, no override: nothing to write", env: []map[string]interface{}{user}, channel: fleet.ChannelAgentManagement,
			wantEnv: []map[string]interface{}{user}, runs: "1m0s/50s/20s"},
		{name: "v0.13+, override: not applied, reported, nothing written", env: []map[string]interface{}{user, fromRef}, vals: retry5v, set: retry5s,
			channel: fleet.ChannelAgentManagement, rancher: true, wantEnv: []map[string]interface{}{user, fromRef}, problem: ProblemUnsupported,
			errParts: []string{"renders CATTLE_ELECTION_* itself", "v0.9.1-v0.9.x"}, runs: "1m0s/50s/20s"},
		{name: "v0.13+: entries written earlier are removed (repair), other entries kept in place",
			env: with([]map[string]interface{}{user}, e(L, "1m0s"), fromRef, e(D, "50s"), e(P, "5s")), rec: rec605, vals: retry5v, set: retry5s,
			channel: fleet.ChannelAgentManagement, change: true, wantEnv: []map[string]interface{}{user, fromRef}, problem: ProblemUnsupported,
			runs: "1m0s/50s/20s"},
		{name: "v0.12: repair without override", env: with(ours6050, user), rec: rec6050,
			channel: fleet.ChannelFixedV012, change: true, wantEnv: []map[string]interface{}{user}, runs: "30s/25s/10s"},
		{name: "v0.12: an override cannot be applied", vals: retry5v, set: retry5s, channel: fleet.ChannelFixedV012, rancher: true,
			problem: ProblemUnsupported, runs: "30s/25s/10s"},
		{name: "v0.13+, someone else's entry duplicates a rendered name: left alone, said so", env: []map[string]interface{}{user, e(P, "3s")},
			channel: fleet.ChannelAgentManagement, problem: ProblemForeign,
			errParts: []string{`CATTLE_ELECTION_RETRY_PERIOD="3s"`, "duplicates a name Fleet's agent manifest renders"}},
		// Fleet v0.9.1+: the agent reads the cluster's entries.
		{name: "v0.9: wrangler baseline differs from global", env: nil, channel: fleet.ChannelClusterEnvV09, change: true,
			wantEnv: ours6050, wantRec: rec6050, runs: "1m0s/50s/20s"},
		{name: "v0.9: already right: resync writes nothing", env: with([]map[string]interface{}{user}, ours6050...), rec: rec6050,
			channel: fleet.ChannelClusterEnvV09, wantEnv: with([]map[string]interface{}{user}, ours6050...), wantRec: rec6050, runs: "1m0s/50s/20s"},
		{name: "v0.9: override appended after user entries", env: []map[string]interface{}{user, fromRef}, vals: retry5v, set: retry5s,
			channel: fleet.ChannelClusterEnvV09, change: true, wantEnv: with([]map[string]interface{}{user, fromRef}, ours605...), wantRec: rec605,
			runs: "1m0s/50s/5s"},
		{name: "v0.9: changed override rewrites owned entries in place",
			env: []map[string]interface{}{e(L, "1m0s"), user, e(D, "50s"), e(P, "20s")}, rec: rec6050, vals: retry5v, set: retry5s,
			channel: fleet.ChannelClusterEnvV09, change: true,
			wantEnv: []map[string]interface{}{e(L, "1m0s"), user, e(D, "50s"), e(P, "5s")}, wantRec: rec605, runs: "1m0s/50s/5s"},
		{name: "v0.9: override removed, rewritten to the global values", env: with([]map[string]interface{}{user}, ours605...), rec: rec605,
			channel: fleet.ChannelClusterEnvV09, change: true, wantEnv: with([]map[string]interface{}{user}, ours6050...), wantRec: rec6050,
			runs: "1m0s/50s/20s"},
		{name: "v0.9: global equal to the override keeps the entries (no restart)", env: with([]map[string]interface{}{user}, ours6050...), rec: rec6050,
			vals: globalV, set: globalS, channel: fleet.ChannelClusterEnvV09, wantEnv: with([]map[string]interface{}{user}, ours6050...), wantRec: rec6050,
			runs: "1m0s/50s/20s"},
		{name: "v0.9: an override of wrangler's own triple writes nothing", vals: wranglerV, set: wranglerS, channel: fleet.ChannelClusterEnvV09,
			runs: "45s/30s/2s"},
		{name: "v0.9: entries holding wrangler's triple stay while the override is set",
			env: []map[string]interface{}{e(L, "45s"), e(D, "30s"), e(P, "2s")}, rec: map[string]string{L: "45s", D: "30s", P: "2s"},
			vals: wranglerV, set: wranglerS, channel: fleet.ChannelClusterEnvV09,
			wantEnv: []map[string]interface{}{e(L, "45s"), e(D, "30s"), e(P, "2s")}, wantRec: map[string]string{L: "45s", D: "30s", P: "2s"}, runs: "45s/30s/2s"},
		{name: "v0.9.0 reads no env: nothing written, leftovers removed", env: with([]map[string]interface{}{user}, ours6050...), rec: rec6050,
			channel: fleet.ChannelFixedV090, change: true, wantEnv: []map[string]interface{}{user}, runs: "45s/30s/2s"},
		// Fleet v0.10-v0.11: no election in the agent; cattle-cluster-agent reads the list.
		{name: "v0.10-v0.11, standalone: an override has no reader", env: []map[string]interface{}{user}, vals: retry5v, set: retry5s,
			channel: fleet.ChannelNoElection, wantEnv: []map[string]interface{}{user}, problem: ProblemUnsupported, errParts: []string{"no leader election"}},
		{name: "v0.10-v0.11, standalone: leftovers of an override are removed", env: with([]map[string]interface{}{user}, ours605...), rec: rec605,
			vals: retry5v, set: retry5s, channel: fleet.ChannelNoElection, change: true, wantEnv: []map[string]interface{}{user}, problem: ProblemUnsupported},
		{name: "v0.10-v0.11, Rancher-managed: the override reaches cattle-cluster-agent", vals: retry5v, set: retry5s,
			channel: fleet.ChannelNoElection, rancher: true, change: true, wantEnv: ours605, wantRec: rec605},
		{name: "v0.10-v0.11, Rancher-managed: the global triple alone is not written", channel: fleet.ChannelNoElection, rancher: true},
		{name: "v0.10-v0.11, Rancher-managed: override removed, entries removed", env: ours605, rec: rec605,
			channel: fleet.ChannelNoElection, rancher: true, change: true},
		// Problems.
		{name: "invalid override", env: []map[string]interface{}{user}, vals: invalidV, set: invalidS, channel: fleet.ChannelClusterEnvV09,
			problem: ProblemInvalid, errParts: []string{"renewDeadline 50s must exceed 1.2 × retryPeriod 45s = 54s"}},
		{name: "unparsable override", vals: unparsV, set: unparsS, channel: fleet.ChannelClusterEnvV09,
			problem: ProblemInvalid, errParts: []string{`annotation election.cattle.io/renew-deadline: renewDeadline "ten" is not a duration`}},
		{name: "hand-written entry", env: []map[string]interface{}{user, e(P, "3s")}, vals: retry5v, set: retry5s, channel: fleet.ChannelClusterEnvV09,
			problem: ProblemForeign, errParts: []string{`CATTLE_ELECTION_RETRY_PERIOD="3s"`}},
		{name: "our entry edited by someone", env: []map[string]interface{}{e(L, "1m0s"), e(D, "50s"), e(P, "3s")}, rec: rec6050,
			channel: fleet.ChannelClusterEnvV09, problem: ProblemForeign},
		{name: "entry from a source", env: []map[string]interface{}{{"name": P, "valueFrom": map[string]interface{}{}}},
			channel: fleet.ChannelClusterEnvV09, problem: ProblemForeign},
		{name: "an entry of ours twice", env: []map[string]interface{}{e(P, "20s"), e(P, "20s")}, rec: map[string]string{P: "20s"},
			channel: fleet.ChannelClusterEnvV09, problem: ProblemForeign, errParts: []string{`CATTLE_ELECTION_RETRY_PERIOD="20s"`}},
		{name: "spec.agentEnvVars not a list of objects", object: cluster([]interface{}{"not an object"}, nil),
			channel: fleet.ChannelClusterEnvV09, problem: ProblemForeign, errParts: []string{"spec.agentEnvVars[0] is not an object"}},
		{name: "a record that does not parse is none: our entries are someone else's",
			object:  cluster([]interface{}{e(L, "1m0s"), e(D, "50s"), e(P, "20s")}, map[string]string{RecordAnnotation: "{"}),
			channel: fleet.ChannelClusterEnvV09, problem: ProblemForeign, errParts: []string{"which leasetune did not write"}},
		{name: "unparsable override beside an unparsable record",
			object:  cluster(nil, map[string]string{LeaseDurationAnnotation: "1s", RenewDeadlineAnnotation: "x", RecordAnnotation: "{"}),
			channel: fleet.ChannelClusterEnvV09, problem: ProblemInvalid, errParts: []string{`annotation election.cattle.io/renew-deadline: renewDeadline "x" is not a duration`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			facts := factsOf(c.env, c.rec, c.vals, c.set)
			if c.object != nil {
				facts = FactsOf(c.object)
			}
			d := Decide(Input{Facts: facts, Global: global, Channel: c.channel, ClusterAgentReads: c.rancher})
			if d.Problem != c.problem {
				t.Fatalf("problem %q (%v), want %q", d.Problem, d.Err, c.problem)
			}
			for _, p := range c.errParts {
				if d.Err == nil || !strings.Contains(d.Err.Error(), p) {
					t.Errorf("error %v lacks %q", d.Err, p)
				}
			}
			if c.problem == ProblemInvalid || c.problem == ProblemForeign {
				if d.Change {
					t.Error("a cluster left alone must not change")
				}
				return
			}
			if d.Change != c.change {
				t.Errorf("change = %v, want %v", d.Change, c.change)
			}
			if !sameEnv(d.Env, c.wantEnv) {
				t.Errorf("env\n got %v\nwant %v", d.Env, c.wantEnv)
			}
			if !reflect.DeepEqual(normRecord(d.Record), normRecord(c.wantRec)) {
				t.Errorf("record %v, want %v", d.Record, c.wantRec)
			}
			runs := ""
			if d.Elects {
				f := election.FormatDuration
				runs = f(d.Runs.LeaseDuration) + "/" + f(d.Runs.RenewDeadline) + "/" + f(d.Runs.RetryPeriod)
			}
			if c.runs != runs {
				t.Errorf("fleet-agent runs %q, want %q", runs, c.runs)
			}
			// Never a duplicate name in the agent container (docs/design.md, rule 10).
			if dups := c.channel.DuplicateNames(global, toEnvVars(d.Env)); len(dups) > 0 {
				t.Errorf("the agent Deployment would get a second entry of %v", dups)
			}
		})
	}
}

// TestDecideFromWhatFactsOfRead: a copy of the facts with its exported
// fields edited (a caller previewing an override) still decides as the
// object does (found by a reviewer: a first version decided from the
// edited fields); the zero SourceFacts decide as an object with no env,
// record or overrides.
func TestDecideFromWhatFactsOfRead(t *testing.T) {
	u := cluster([]interface{}{user, e(L, "1m0s"), e(D, "50s"), e(P, "20s")}, map[string]string{RecordAnnotation: `{"CATTLE_ELECTION_LEASE_DURATION":"1m0s","CATTLE_ELECTION_RENEW_DEADLINE":"50s","CATTLE_ELECTION_RETRY_PERIOD":"20s"}`})
	in := Input{Facts: FactsOf(u), Global: global, Channel: fleet.ChannelClusterEnvV09}
	want := Decide(in)
	edited := FactsOf(u)
	edited.Overrides[2], edited.Set[2], edited.Malformed, edited.Record = "3s", true, true, map[string]string{}
	in.Facts = edited
	if got := Decide(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("an edited copy of the facts:\n got %+v\nwant %+v", got, want)
	}
	in.Facts = SourceFacts{}
	got := Decide(in)
	in.Facts = FactsOf(cluster(nil, nil))
	if want := Decide(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("zero facts:\n got %+v\nwant %+v", got, want)
	}
}

func obj(gvrKind, ns, name string, labels map[string]string, fields map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetKind(gvrKind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func TestRoute(t *testing.T) {
	rv, _ := rancher.Parse("v2.10.3")
	standalone := obj("Cluster", "fleet-default", "edge-1", nil, nil)
	managed := obj("Cluster", "fleet-default", "prod", map[string]string{rancher.ClusterNameLabel: "c-m-abcd1234"}, nil)
	provRKE := obj("Cluster", "fleet-default", "prod", nil, map[string]interface{}{
		"spec": map[string]interface{}{"rkeConfig": map[string]interface{}{}}, "status": map[string]interface{}{"clusterName": "c-m-abcd1234"}})
	provImported := obj("Cluster", "fleet-default", "prod", nil, map[string]interface{}{"status": map[string]interface{}{"clusterName": "c-m-abcd1234"}})
	mgmt := obj("Cluster", "", "c-m-abcd1234", nil, nil)
	legacyFleet := obj("Cluster", "fleet-default", "c-abcde", map[string]string{rancher.ClusterNameLabel: "c-abcde"}, nil)
	legacyMgmt := obj("Cluster", "", "c-abcde", nil, nil)
	legacyProv := obj("Cluster", "fleet-default", "c-abcde", nil, map[string]interface{}{"status": map[string]interface{}{"clusterName": "c-abcde"}})
	local := obj("Cluster", "fleet-local", "local", map[string]string{rancher.ClusterNameLabel: "local"}, nil)
	localMgmt := obj("Cluster", "", "local", nil, nil)

	r, err := Route(standalone, nil, nil, rv)
	if err != nil || r.Target != standalone || r.RancherManaged {
		t.Errorf("standalone: %+v %v", r, err)
	}
	r, err = Route(managed, provRKE, mgmt, rv)
	if err != nil || r.Target != provRKE || !r.Provisioned || !r.RancherManaged || r.Legacy {
		t.Errorf("provisioned: %+v %v", r, err)
	}
	r, err = Route(managed, provImported, mgmt, rv)
	if err != nil || r.Target != provImported || r.Provisioned || !r.RancherManaged || r.Legacy {
		t.Errorf("imported through the current UI: the provisioning Cluster is the source: %+v %v", r, err)
	}
	if _, err = Route(managed, nil, mgmt, rv); err == nil {
		t.Error("non-legacy without its provisioning Cluster: want an error (not routable yet)")
	}
	r, err = Route(legacyFleet, legacyProv, legacyMgmt, rv)
	if err != nil || r.Target != legacyMgmt || !r.Legacy {
		t.Errorf("legacy: %+v %v", r, err)
	}
	r, err = Route(local, nil, localMgmt, rv)
	if err != nil || r.Target != localMgmt || !r.Legacy {
		t.Errorf("local: %+v %v", r, err)
	}
	if _, err = Route(legacyFleet, legacyProv, nil, rv); err == nil {
		t.Error("legacy without its management Cluster: want an error")
	}

	// Beside Rancher v2.11+, an imported cluster's management Cluster is its
	// own source; a provisioned one keeps the provisioning Cluster.
	rv211, _ := rancher.Parse("v2.11.3")
	r, err = Route(managed, provImported, mgmt, rv211)
	if err != nil || r.Target != mgmt || r.Legacy || !r.RancherManaged {
		t.Errorf("imported beside v2.11: %+v %v", r, err)
	}
	r, err = Route(managed, provRKE, mgmt, rv211)
	if err != nil || r.Target != provRKE {
		t.Errorf("provisioned beside v2.11: %+v %v", r, err)
	}
	if r, _ := Route(managed, provImported, mgmt, rancher.Version{}); r.Target != provImported {
		t.Errorf("unknown Rancher version: the provisioning Cluster (writing it cannot fight Rancher): %+v", r)
	}
	rv282, _ := rancher.Parse("v2.8.2")
	if r, _ := Route(managed, provImported, mgmt, rv282); r.ClusterAgentReads {
		t.Error("Rancher 2.8.2's cattle-cluster-agent reads no election env")
	}

	// Rancher's copies of overrides are not reported; a user's on an object
	// Rancher never copies them to are.
	ann := map[string]string{RetryPeriodAnnotation: "5s"}
	provImported.SetAnnotations(ann)
	mgmt.SetAnnotations(ann) // Rancher's copy (createNewCluster copies all annotations)
	if r, _ := Route(managed, provImported, mgmt, rv); len(r.Ignored) != 0 {
		t.Errorf("Rancher's copy on the management Cluster reported as ignored: %v", r.Ignored)
	}
	managed.SetAnnotations(ann) // Rancher never copies election.cattle.io/* to a fleet Cluster
	if r, _ := Route(managed, provImported, mgmt, rv); len(r.Ignored) != 1 || r.Ignored[0] != managed {
		t.Errorf("a user's override on the fleet Cluster: %v", r.Ignored)
	}
	legacyProv.SetAnnotations(ann)
	if r, _ := Route(legacyFleet, legacyProv, legacyMgmt, rv); len(r.Ignored) != 1 || r.Ignored[0] != legacyProv {
		t.Errorf("a user's override on a legacy cluster's provisioning Cluster: %v", r.Ignored)
	}
	for name, want := range map[string]bool{"local": true, "c-abcde": true, "c-m-abcd1234": false, "c-abcdef": false, "c-ABCDE": false, "imported": false} {
		if rancher.IsLegacyName(name) != want {
			t.Errorf("IsLegacyName(%q) = %v", name, !want)
		}
	}
}

func TestStrip(t *testing.T) {
	mk := func(rec string, env ...map[string]interface{}) *unstructured.Unstructured {
		u := obj("Cluster", "ns", "c", nil, map[string]interface{}{"spec": map[string]interface{}{}})
		var l []interface{}
		for _, e := range env {
			l = append(l, e)
		}
		_ = unstructured.SetNestedSlice(u.Object, l, "spec", "agentEnvVars")
		if rec != "" {
			u.SetAnnotations(map[string]string{RecordAnnotation: rec})
		}
		return u
	}
	rec := `{"CATTLE_ELECTION_LEASE_DURATION":"1m0s","CATTLE_ELECTION_RENEW_DEADLINE":"50s","CATTLE_ELECTION_RETRY_PERIOD":"20s"}`
	out, removed, err := Strip(mk(rec, user, e(L, "1m0s"), e(D, "50s"), e(P, "20s")))
	if err != nil || !removed || len(out) != 1 {
		t.Errorf("owned entries: %v %v %v", out, removed, err)
	}
	// Someone edited the renew deadline: removing the other two would leave
	// 30s/40s/10s on a v0.12 agent, which crash-loops. Leave it all.
	if _, _, err := Strip(mk(rec, user, e(L, "1m0s"), e(D, "40s"), e(P, "20s"))); err == nil || !strings.Contains(err.Error(), "partial triple") {
		t.Errorf("partial: %v", err)
	}
	if _, removed, err := Strip(mk("", user)); err != nil || removed {
		t.Errorf("nothing owned: %v %v", removed, err)
	}
	// Only someone else's entry, nothing of ours: nothing to remove, no error.
	if out, removed, err := Strip(mk("", user, e(P, "3s"))); err != nil || removed || len(out) != 2 {
		t.Errorf("only a foreign entry: %v %v %v", out, removed, err)
	}
}

// TestIsSourceAgreesWithRoute: for every kind of cluster, the object Route
// writes is a source and the objects Rancher generates are not.
func TestIsSourceAgreesWithRoute(t *testing.T) {
	rv210, _ := rancher.Parse("v2.10.3")
	rv211, _ := rancher.Parse("v2.11.3")
	mk := func(name string, labels map[string]string, fields map[string]interface{}) *unstructured.Unstructured {
		return obj("Cluster", "fleet-default", name, labels, fields)
	}
	provOf := func(name, mgmt string, rke bool) *unstructured.Unstructured {
		f := map[string]interface{}{"spec": map[string]interface{}{}, "status": map[string]interface{}{"clusterName": mgmt}}
		if rke {
			f["spec"] = map[string]interface{}{"rkeConfig": map[string]interface{}{}}
		}
		return mk(name, nil, f)
	}
	cases := []struct {
		name     string
		fc, p, m *unstructured.Unstructured
	}{
		{"standalone", mk("edge", nil, nil), nil, nil},
		{"provisioned", mk("prod", map[string]string{rancher.ClusterNameLabel: "c-m-abcd1234"}, nil), provOf("prod", "c-m-abcd1234", true), obj("Cluster", "", "c-m-abcd1234", nil, nil)},
		{"imported", mk("imp", map[string]string{rancher.ClusterNameLabel: "c-m-imp12345"}, nil), provOf("imp", "c-m-imp12345", false), obj("Cluster", "", "c-m-imp12345", nil, nil)},
		{"legacy", mk("c-abcde", map[string]string{rancher.ClusterNameLabel: "c-abcde"}, nil), provOf("c-abcde", "c-abcde", false), obj("Cluster", "", "c-abcde", nil, nil)},
	}
	for _, rv := range []rancher.Version{rv210, rv211, {}} {
		for _, c := range cases {
			rt, err := Route(c.fc, c.p, c.m, rv)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			for gvr, o := range map[schema.GroupVersionResource]*unstructured.Unstructured{fleet.ClusterGVR: c.fc, rancher.ProvisioningClusterGVR: c.p, rancher.ManagementClusterGVR: c.m} {
				if o == nil {
					continue
				}
				want := o == rt.Target
				if got := IsSource(gvr, o, c.p, rv); got != want {
					t.Errorf("%s beside %v: IsSource(%s) = %v, Route writes %s", c.name, rv, gvr.Group, got, rt.TargetRef)
				}
			}
		}
	}
}

// TestRouteReplans: a write of an imported RKE2/K3s cluster's management
// Cluster re-plans every node beside Rancher v2.15+ when day-2 operations
// are on (rancher.ImportedDay2Ops); provisioned clusters always; other
// imported clusters, or before v2.15, never. (The slim copy keeps what it
// takes: pkg/agentenv/slim's TestSlimKeepsWhatReplansReads.)
func TestRouteReplans(t *testing.T) {
	managed := obj("Cluster", "fleet-default", "prod", map[string]string{rancher.ClusterNameLabel: "c-m-abcd1234"}, nil)
	provImported := obj("Cluster", "fleet-default", "prod", nil, map[string]interface{}{"status": map[string]interface{}{"clusterName": "c-m-abcd1234"}})
	provRKE := obj("Cluster", "fleet-default", "prod", nil, map[string]interface{}{
		"spec": map[string]interface{}{"rkeConfig": map[string]interface{}{}}, "status": map[string]interface{}{"clusterName": "c-m-abcd1234"}})
	mgmt := func(labels, annotations map[string]string, driver string) *unstructured.Unstructured {
		m := obj("Cluster", "", "c-m-abcd1234", labels, map[string]interface{}{"status": map[string]interface{}{"driver": driver, "conditions": []interface{}{}}})
		m.SetAnnotations(annotations)
		m.SetResourceVersion("3")
		return m
	}
	mgmtNamed := func(name, driver string) *unstructured.Unstructured {
		return obj("Cluster", "", name, nil, map[string]interface{}{"status": map[string]interface{}{"driver": driver}})
	}
	legacy := obj("Cluster", "fleet-default", "old", map[string]string{rancher.ClusterNameLabel: "c-abcde"}, nil)
	v := func(s string) rancher.Version { r, _ := rancher.Parse(s); return r }
	for _, c := range []struct {
		name string
		rv   rancher.Version
		prov *unstructured.Unstructured
		mgmt *unstructured.Unstructured
		want bool
	}{
		{"imported rke2 beside v2.15.0", v("v2.15.0"), provImported, mgmt(nil, nil, "rke2"), true},
		{"imported k3s (provider label) beside v2.15.0", v("v2.15.0"), provImported, mgmt(map[string]string{rancher.ProviderLabel: "k3s"}, nil, "imported"), true},
		{"imported rke2, operations-enabled false", v("v2.15.0"), provImported, mgmt(nil, map[string]string{rancher.OperationsEnabledAnnotation: "false"}, "rke2"), false},
		{"imported rke2, administrated", v("v2.15.0"), provImported, mgmt(nil, map[string]string{rancher.AdministratedAnnotation: "true"}, "rke2"), false},
		{"imported EKS beside v2.15.0", v("v2.15.0"), provImported, mgmt(nil, nil, "EKS"), false},
		{"imported rke2 beside v2.14.4", v("v2.14.4"), provImported, mgmt(nil, nil, "rke2"), false},
		{"imported rke2, unknown Rancher: the provisioning Cluster is written, no Plan reads it", rancher.Version{}, provImported, mgmt(nil, nil, "rke2"), false},
		// A legacy-named imported K3s cluster is routed to its management
		// Cluster even before its provisioning Cluster is cached; Rancher's
		// handler reads the management Cluster alone.
		{"legacy-named imported k3s, no provisioning Cluster, beside v2.15.0", v("v2.15.0"), nil, mgmtNamed("c-abcde", "k3s"), true},
		{"provisioned beside v2.14.4", v("v2.14.4"), provRKE, mgmt(nil, nil, "rke2"), true},
		{"provisioned beside v2.15.0", v("v2.15.0"), provRKE, mgmt(nil, nil, "rke2"), true},
	} {
		fc := managed
		if c.prov == nil {
			fc = legacy
		}
		r, err := Route(fc, c.prov, c.mgmt, c.rv)
		if err != nil {
			t.Fatal(err)
		}
		if r.Replans != c.want {
			t.Errorf("%s: Replans %v, want %v (target %s)", c.name, r.Replans, c.want, r.TargetRef)
		}
		if got := Restarts(r); got.Has(restart.NodePlan) != c.want || strings.Contains(got.String(), "every node") != c.want {
			t.Errorf("%s: Restarts %q", c.name, got)
		}
	}
}
