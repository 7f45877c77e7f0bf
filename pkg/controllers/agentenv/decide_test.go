package agentenv

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
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
	noOver   [3]string
	noSet    [3]bool
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

func TestDecide(t *testing.T) {
	retry5v, retry5s := over("-", "-", "5s")
	invalidV, invalidS := over("-", "-", "45s")    // renewDeadline 50s must exceed 1.2 × 45s = 54s
	unparsV, unparsS := over("-", "ten", "-")      // not a duration
	globalV, globalS := over("1m0s", "50s", "20s") // overrides equal to global
	cases := []struct {
		name     string
		env      []map[string]interface{}
		rec      map[string]string
		vals     [3]string
		set      [3]bool
		channel  fleet.AgentChannel
		change   bool
		wantEnv  []map[string]interface{}
		wantRec  map[string]string
		problem  Problem
		errParts []string
	}{
		{name: "agentmanagement, no override: nothing to write", env: []map[string]interface{}{user}, channel: fleet.ChannelAgentManagement,
			wantEnv: []map[string]interface{}{user}},
		{name: "agentmanagement, override: appended after user entries", env: []map[string]interface{}{user, fromRef}, vals: retry5v, set: retry5s,
			channel: fleet.ChannelAgentManagement, change: true,
			wantEnv: []map[string]interface{}{user, fromRef, e(L, "1m0s"), e(D, "50s"), e(P, "5s")},
			wantRec: map[string]string{L: "1m0s", D: "50s", P: "5s"}},
		{name: "override equal to the global triple: nothing", env: nil, vals: globalV, set: globalS, channel: fleet.ChannelAgentManagement},
		{name: "changed override rewrites owned entries in place",
			env: []map[string]interface{}{e(L, "1m0s"), user, e(D, "50s"), e(P, "20s")}, rec: rec6050, vals: retry5v, set: retry5s,
			channel: fleet.ChannelClusterEnvV012, change: true,
			wantEnv: []map[string]interface{}{e(L, "1m0s"), user, e(D, "50s"), e(P, "5s")},
			wantRec: map[string]string{L: "1m0s", D: "50s", P: "5s"}},
		{name: "override removed, agent gets the global triple: entries removed",
			env: append([]map[string]interface{}{user}, e(L, "1m0s"), e(D, "50s"), e(P, "5s")), rec: map[string]string{L: "1m0s", D: "50s", P: "5s"},
			channel: fleet.ChannelAgentManagement, change: true, wantEnv: []map[string]interface{}{user}},
		{name: "override removed, v0.12 baseline differs: rewritten to the global values",
			env: append([]map[string]interface{}{user}, e(L, "1m0s"), e(D, "50s"), e(P, "5s")), rec: map[string]string{L: "1m0s", D: "50s", P: "5s"},
			channel: fleet.ChannelClusterEnvV012, change: true, wantEnv: append([]map[string]interface{}{user}, ours6050...), wantRec: rec6050},
		{name: "v0.12 already right: resync writes nothing", env: append([]map[string]interface{}{user}, ours6050...), rec: rec6050,
			channel: fleet.ChannelClusterEnvV012, wantEnv: append([]map[string]interface{}{user}, ours6050...), wantRec: rec6050},
		{name: "v0.9: wrangler baseline differs from global", env: nil, channel: fleet.ChannelClusterEnvV09, change: true,
			wantEnv: ours6050, wantRec: rec6050},
		{name: "v0.10-v0.11: agents run no election", env: []map[string]interface{}{user}, vals: retry5v, set: retry5s,
			channel: fleet.ChannelNoElection, wantEnv: nil},
		{name: "invalid override", env: []map[string]interface{}{user}, vals: invalidV, set: invalidS, channel: fleet.ChannelAgentManagement,
			problem: ProblemInvalid, errParts: []string{"renewDeadline 50s must exceed 1.2 × retryPeriod 45s = 54s"}},
		{name: "unparsable override", vals: unparsV, set: unparsS, channel: fleet.ChannelAgentManagement,
			problem: ProblemInvalid, errParts: []string{`annotation election.cattle.io/renew-deadline: renewDeadline "ten" is not a duration`}},
		{name: "hand-written entry", env: []map[string]interface{}{user, e(P, "3s")}, vals: retry5v, set: retry5s, channel: fleet.ChannelAgentManagement,
			problem: ProblemForeign, errParts: []string{`CATTLE_ELECTION_RETRY_PERIOD="3s"`}},
		{name: "our entry edited by someone", env: []map[string]interface{}{e(L, "1m0s"), e(D, "50s"), e(P, "3s")}, rec: rec6050,
			channel: fleet.ChannelClusterEnvV012, problem: ProblemForeign},
		{name: "entry from a source", env: []map[string]interface{}{{"name": P, "valueFrom": map[string]interface{}{}}},
			channel: fleet.ChannelClusterEnvV012, problem: ProblemForeign},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.env, c.rec, c.vals, c.set, global, c.channel)
			if d.Problem != c.problem {
				t.Fatalf("problem %q (%v), want %q", d.Problem, d.Err, c.problem)
			}
			for _, p := range c.errParts {
				if d.Err == nil || !strings.Contains(d.Err.Error(), p) {
					t.Errorf("error %v lacks %q", d.Err, p)
				}
			}
			if c.problem != "" {
				if d.Change {
					t.Error("a problem must not change anything")
				}
				return
			}
			if d.Change != c.change {
				t.Errorf("change = %v, want %v", d.Change, c.change)
			}
			if d.Change || c.wantEnv != nil {
				if !sameEnv(d.Env, c.wantEnv) {
					t.Errorf("env\n got %v\nwant %v", d.Env, c.wantEnv)
				}
				if !reflect.DeepEqual(normRecord(d.Record), normRecord(c.wantRec)) {
					t.Errorf("record %v, want %v", d.Record, c.wantRec)
				}
			}
		})
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
	standalone := obj("Cluster", "fleet-default", "edge-1", nil, nil)
	managed := obj("Cluster", "fleet-default", "c-abc", map[string]string{MgmtNameLabel: "c-abc"}, nil)
	provRKE := obj("Cluster", "fleet-default", "prod", nil, map[string]interface{}{
		"spec": map[string]interface{}{"rkeConfig": map[string]interface{}{}}, "status": map[string]interface{}{"clusterName": "c-abc"}})
	provImported := obj("Cluster", "fleet-default", "imported", nil, map[string]interface{}{"status": map[string]interface{}{"clusterName": "c-abc"}})
	mgmt := obj("Cluster", "", "c-abc", nil, nil)

	r, err := Route(standalone, nil, nil)
	if err != nil || r.Target != standalone || r.Source != standalone || r.RancherManaged {
		t.Errorf("standalone: %+v %v", r, err)
	}
	r, err = Route(managed, provRKE, mgmt)
	if err != nil || r.Target != provRKE || r.Source != provRKE || !r.Provisioned {
		t.Errorf("provisioned: %+v %v", r, err)
	}
	r, err = Route(managed, provImported, mgmt)
	if err != nil || r.Target != mgmt || r.Source != provImported || r.Provisioned || !r.RancherManaged {
		t.Errorf("imported: %+v %v", r, err)
	}
	r, err = Route(managed, nil, mgmt)
	if err != nil || r.Target != mgmt || r.Source != mgmt {
		t.Errorf("legacy: %+v %v", r, err)
	}
	if _, err = Route(managed, provImported, nil); err == nil {
		t.Error("no management Cluster: want an error")
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
