package fleetenv

import (
	"encoding/json"

	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/kit"
)

var (
	fleetEnv = kit.Env("NAMESPACE=x", "CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RETRY_PERIOD=10s", "CATTLE_ELECTION_RENEW_DEADLINE=25s")
	agentEnv = kit.Env("FLEET_AGENT_ELECTION_LEASE_DURATION=30s", "FLEET_AGENT_ELECTION_RETRY_PERIOD=10s", "FLEET_AGENT_ELECTION_RENEW_DEADLINE=25s")
	five     = election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 5 * time.Second}
)

func TestDesired(t *testing.T) {
	defaults := Inputs{Controller: election.FleetDefaults, ControllerOK: true, Agent: election.FleetDefaults, AgentOK: true,
		Channel: fleet.ChannelAgentManagement}
	v014 := kit.Deployment("", "fleet-controller",
		kit.WithContainer("fleet-controller", fleetEnv...),
		kit.WithContainer("fleet-cleanup", fleetEnv...),
		kit.WithContainer("fleet-agentmanagement", append(append([]corev1.EnvVar{}, fleetEnv...), agentEnv...)...),
		kit.WithContainer("sidecar", kit.Env("CATTLE_ELECTION_RETRY_PERIOD=1s")...))
	v09 := kit.Deployment("", "fleet-controller", kit.WithContainer("fleet-controller", kit.Env("NAMESPACE=x")...))
	v012am := kit.Deployment("", "fleet-controller", kit.WithContainer("fleet-agentmanagement", fleetEnv...))
	with := func(in Inputs, f func(*Inputs)) Inputs { f(&in); return in }

	cases := []struct {
		name string
		d    *appsv1.Deployment
		in   Inputs
		want []ContainerEnv
	}{
		{"nothing changes", v014, defaults, nil},
		{"equal durations written differently are equal", kit.Deployment("", "gitjob", kit.WithContainer("gitjob",
			kit.Env("CATTLE_ELECTION_LEASE_DURATION=0.5m", "CATTLE_ELECTION_RENEW_DEADLINE=25000ms", "CATTLE_ELECTION_RETRY_PERIOD=10s")...)),
			defaults, nil},
		{"controller change reaches every Fleet container, not the sidecar", v014, with(defaults, func(i *Inputs) { i.Controller = five }),
			[]ContainerEnv{
				{"fleet-controller", election.CattlePrefix.Env(five)},
				{"fleet-cleanup", election.CattlePrefix.Env(five)},
				{"fleet-agentmanagement", election.CattlePrefix.Env(five)},
			}},
		{"agent change reaches only fleet-agentmanagement", v014, with(defaults, func(i *Inputs) { i.Agent = five }),
			[]ContainerEnv{{"fleet-agentmanagement", election.FleetAgentPrefix.Env(five)}}},
		{"v0.9: entries added", v09, defaults, []ContainerEnv{{"fleet-controller", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"v0.12: no agent env outside the agentmanagement channel", v012am, with(defaults, func(i *Inputs) {
			i.Channel = fleet.ChannelFixedV012
			i.Agent = five
		}), nil},
		{"v0.13+: agent env added when missing", v012am, with(defaults, func(i *Inputs) { i.Agent = five }),
			[]ContainerEnv{{"fleet-agentmanagement", election.FleetAgentPrefix.Env(five)}}},
		{"unknown controller triple: nothing", v09, with(defaults, func(i *Inputs) { i.ControllerOK = false }), nil},
		{"invalid triple never written", v09, with(defaults, func(i *Inputs) { i.Controller.RetryPeriod = time.Minute }), nil},
		{"a missing name means all three are written", kit.Deployment("", "helmops", kit.WithContainer("helmops",
			kit.Env("CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s")...)),
			defaults, []ContainerEnv{{"helmops", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"valueFrom is rewritten", kit.Deployment("", "gitjob", kit.WithContainer("gitjob",
			append(kit.Env("CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s"),
				corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", ValueFrom: &corev1.EnvVarSource{}})...)),
			defaults, []ContainerEnv{{"gitjob", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"a conflicting duplicate is fixed", kit.Deployment("", "gitjob", kit.WithContainer("gitjob",
			append(append([]corev1.EnvVar{}, fleetEnv...), kit.Env("CATTLE_ELECTION_RETRY_PERIOD=2s")...)...)),
			defaults, []ContainerEnv{{"gitjob", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"not a Fleet Deployment", kit.Deployment("", "rancher", kit.WithContainer("fleet-controller")), defaults, nil},
	}
	for _, c := range cases {
		got := Desired(c.d, c.in)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}

func TestIsTargetShards(t *testing.T) {
	shard := kit.Deployment("", "gitjob-shard-a")
	if fleet.IsTarget(shard) {
		t.Error("a shard-named Deployment without the shard-id label is a target")
	}
	shard.Spec.Template.Labels = map[string]string{fleet.ShardIDLabel: "a"}
	if !fleet.IsTarget(shard) {
		t.Error("a labelled shard is not a target")
	}
}

// applyPatch applies PatchBody's patch for changes to d, as the API server would.
func applyPatch(t *testing.T, d *appsv1.Deployment, changes []ContainerEnv) *appsv1.Deployment {
	t.Helper()
	body, err := PatchBody(d, changes)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(body)
	if err != nil {
		t.Fatalf("not a JSON patch: %v\n%s", err, body)
	}
	orig, _ := json.Marshal(d)
	out, err := p.Apply(orig)
	if err != nil {
		t.Fatalf("patch does not apply: %v\n%s", err, body)
	}
	var got appsv1.Deployment
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func TestPatchBody(t *testing.T) {
	dup := corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "20s"} // left by the chart's extraEnv
	from := corev1.EnvVar{Name: "CATTLE_ELECTION_RENEW_DEADLINE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}
	other := corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "t"}}}
	d := kit.Deployment("", "gitjob",
		kit.WithContainer("sidecar", kit.Env("CATTLE_ELECTION_RETRY_PERIOD=1s")...),
		kit.WithContainer("gitjob", append(kit.Env("NAMESPACE=x", "CATTLE_ELECTION_RETRY_PERIOD=10s"), from, other, dup)...),
		kit.WithContainer("fleet-cleanup"))
	got := applyPatch(t, d, Desired(d, Inputs{Controller: five, ControllerOK: true}))

	names := func(c corev1.Container) (out []string) {
		for _, e := range c.Env {
			out = append(out, e.Name+"="+e.Value)
		}
		return out
	}
	want := []string{"NAMESPACE=x", "CATTLE_ELECTION_RETRY_PERIOD=5s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "TOKEN=",
		"CATTLE_ELECTION_RETRY_PERIOD=5s", "CATTLE_ELECTION_LEASE_DURATION=30s"}
	if g := names(got.Spec.Template.Spec.Containers[1]); !reflect.DeepEqual(g, want) {
		t.Errorf("gitjob env\n got %v\nwant %v", g, want)
	}
	if e := got.Spec.Template.Spec.Containers[1].Env[2]; e.ValueFrom != nil {
		t.Errorf("valueFrom kept on an owned entry: %+v", e)
	}
	if e := got.Spec.Template.Spec.Containers[1].Env[3]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("a foreign valueFrom entry changed: %+v", e)
	}
	if g := names(got.Spec.Template.Spec.Containers[0]); !reflect.DeepEqual(g, []string{"CATTLE_ELECTION_RETRY_PERIOD=1s"}) {
		t.Errorf("sidecar changed: %v", g)
	}
	if tm, _, err := election.CattlePrefix.FromEnv(got.Spec.Template.Spec.Containers[2].Env); err != nil || tm != five {
		t.Errorf("a container without env: %v %v", tm, err)
	}
	// What the container runs (the last duplicate) is the wanted triple, and
	// the result needs no further write.
	if tm, _, _ := election.CattlePrefix.FromEnv(got.Spec.Template.Spec.Containers[1].Env); tm != five {
		t.Errorf("gitjob runs %s", tm)
	}
	if again := Desired(got, Inputs{Controller: five, ControllerOK: true}); again != nil {
		t.Errorf("not converged after the patch: %v", again)
	}

	// A patch computed from a stale copy fails rather than combine with
	// entries it has not seen: an entry removed, a duplicate appended (the
	// container would run 30s/20s/20s), a list where the copy had none.
	body, _ := PatchBody(d, Desired(d, Inputs{Controller: five, ControllerOK: true}))
	p, _ := jsonpatch.DecodePatch(body)
	for name, edit := range map[string]func(*appsv1.Deployment){
		"entry removed": func(x *appsv1.Deployment) {
			x.Spec.Template.Spec.Containers[1].Env = x.Spec.Template.Spec.Containers[1].Env[1:]
		},
		"duplicate appended": func(x *appsv1.Deployment) {
			x.Spec.Template.Spec.Containers[1].Env = append(x.Spec.Template.Spec.Containers[1].Env, dup)
		},
		"list where none was": func(x *appsv1.Deployment) {
			x.Spec.Template.Spec.Containers[2].Env = []corev1.EnvVar{{Name: "FOO", Value: "bar"}}
		},
	} {
		live := d.DeepCopy()
		edit(live)
		cur, _ := json.Marshal(live)
		if _, err := p.Apply(cur); err == nil {
			t.Errorf("%s: a patch from a stale copy applied", name)
		}
	}
}

func TestMergeChartValues(t *testing.T) {
	doc := `# Rancher's values for Fleet
apiServerURL: https://rancher.example.com # keep me
leaderElection:
  leaseDuration: 30s
  retryPeriod: 10s
  renewDeadline: 25000ms
agent:
  reconciler:
    workers:
      drift: "50"
`
	out, changed, err := MergeChartValues(doc, election.FleetDefaults, true, five, true)
	if err != nil || !changed {
		t.Fatalf("changed=%v err=%v", changed, err)
	}
	for _, want := range []string{"# Rancher's values for Fleet", "apiServerURL: https://rancher.example.com # keep me",
		"renewDeadline: 25000ms", "drift: \"50\"", "agent:\n  reconciler:\n    workers:\n      drift: \"50\"\n  leaderElection:\n    leaseDuration: 30s\n    renewDeadline: 25s\n    retryPeriod: 5s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("merged values lack %q:\n%s", want, out)
		}
	}
	// Applying again changes nothing.
	if _, changed, err := MergeChartValues(out, election.FleetDefaults, true, five, true); changed || err != nil {
		t.Errorf("second merge: changed=%v err=%v", changed, err)
	}
	// The chart's defaults are what absent keys mean: nothing to add.
	for _, doc := range []string{"", "apiServerURL: https://rancher.example.com\n", "leaderElection: null\nagent:\n  replicas: 1\n"} {
		if out, changed, err := MergeChartValues(doc, election.FleetDefaults, true, election.FleetDefaults, true); changed || err != nil || out != doc {
			t.Errorf("defaults into %q: %q changed=%v err=%v", doc, out, changed, err)
		}
	}
	// One key of a triple present: the three are written together.
	out, changed, err = MergeChartValues("leaderElection:\n  retryPeriod: 5s\n", election.FleetDefaults, true, election.Timings{}, false)
	if err != nil || !changed || !strings.Contains(out, "leaseDuration: 30s") || !strings.Contains(out, "retryPeriod: 10s") || !strings.Contains(out, "renewDeadline: 25s") {
		t.Errorf("a partial triple back to the defaults: %q %v %v", out, changed, err)
	}
	// An empty document gets the keys.
	out, changed, err = MergeChartValues("", five, true, election.Timings{}, false)
	if err != nil || !changed || !strings.Contains(out, "leaderElection:\n  leaseDuration: 30s\n  renewDeadline: 25s\n  retryPeriod: 5s") || strings.Contains(out, "agent") {
		t.Errorf("empty doc: %q %v %v", out, changed, err)
	}
	// Empty, comment-only, "---" and null documents are empty mappings.
	for _, empty := range []string{"", "# only a comment\n", "---\n", "null\n"} {
		out, changed, err := MergeChartValues(empty, five, true, election.Timings{}, false)
		if err != nil || !changed || !strings.Contains(out, "leaderElection:\n  leaseDuration: 30s") {
			t.Errorf("%q: %q %v %v", empty, out, changed, err)
		}
	}
	// An anchored value that stays as it is keeps its anchor: the output parses.
	out, changed, err = MergeChartValues("leaderElection:\n  leaseDuration: &ld 30s\nother: *ld\n", five, true, election.Timings{}, false)
	if err != nil || !changed || !strings.Contains(out, "other: *ld") || !strings.Contains(out, "&ld 30s") {
		t.Errorf("anchor kept: %q %v %v", out, changed, err)
	}
	// An alias target would change other keys too; a later document would be lost.
	for _, bad := range []string{"- a list", "leaderElection: 5", "{not yaml",
		"leaderElection:\n  leaseDuration: &ld 45s\nother: *ld\n",
		"leaderElection:\n  retryPeriod: *rp\nx: &rp 10s\n",
		"a: 1\n---\nb: 2\n",
		"leaderElection: &le {leaseDuration: 45s}\nother: {timings: *le}\n"} {
		if _, _, err := MergeChartValues(bad, five, true, five, true); err == nil {
			t.Errorf("MergeChartValues(%q) = nil error", bad)
		}
	}
}

// TestChartValuesFleetV016Schema: a value that parses to the right duration
// but fails Fleet v0.16's values schema is reported, and leasetune's merge
// rewrites it (it is not kept as written), after which nothing is reported.
func TestChartValuesFleetV016Schema(t *testing.T) {
	doc := "leaderElection:\n  leaseDuration: +30s\n  renewDeadline: 25s\n  retryPeriod: 10s\nagent:\n  leaderElection:\n    leaseDuration: 30s\n    renewDeadline: .25e2s\n    retryPeriod: 10\n"
	got := ChartValueProblems(doc)
	want := []string{"leaderElection.leaseDuration: \"+30s\"", "agent.leaderElection.renewDeadline: \".25e2s\"", "agent.leaderElection.retryPeriod: 10 "}
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) || !strings.Contains(got[i], "rancher-config fleet ") {
			t.Errorf("problem %d %q lacks %q", i, got[i], w)
		}
	}
	out, changed, err := MergeChartValues(doc, election.FleetDefaults, true, election.FleetDefaults, true)
	if err != nil || !changed {
		t.Fatalf("merge: changed=%v err=%v", changed, err)
	}
	if p := ChartValueProblems(out); len(p) != 0 {
		t.Errorf("after leasetune's merge: %q\n%s", p, out)
	}
	for _, doc := range []string{"", "leaderElection:\n  retryPeriod: 1m30s\n", "agent: {leaderElection: {retryPeriod: 0}}\n", "[not, a, mapping]\n"} {
		if p := ChartValueProblems(doc); len(p) != 0 {
			t.Errorf("%q: %q", doc, p)
		}
	}
}
