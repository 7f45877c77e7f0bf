package fleetsettings

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

func env(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

func deployment(name string, containers ...corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}}}
}

var (
	fleetEnv = env("NAMESPACE", "x",
		"CATTLE_ELECTION_LEASE_DURATION", "30s", "CATTLE_ELECTION_RETRY_PERIOD", "10s", "CATTLE_ELECTION_RENEW_DEADLINE", "25s")
	agentEnv = env("FLEET_AGENT_ELECTION_LEASE_DURATION", "30s", "FLEET_AGENT_ELECTION_RETRY_PERIOD", "10s",
		"FLEET_AGENT_ELECTION_RENEW_DEADLINE", "25s")
	five = election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 5 * time.Second}
)

func TestDesired(t *testing.T) {
	defaults := Inputs{Controller: election.FleetDefaults, ControllerOK: true, Agent: election.FleetDefaults, AgentOK: true,
		Channel: fleet.ChannelAgentManagement}
	v014 := deployment("fleet-controller",
		corev1.Container{Name: "fleet-controller", Env: fleetEnv},
		corev1.Container{Name: "fleet-cleanup", Env: fleetEnv},
		corev1.Container{Name: "fleet-agentmanagement", Env: append(append([]corev1.EnvVar{}, fleetEnv...), agentEnv...)},
		corev1.Container{Name: "sidecar", Env: env("CATTLE_ELECTION_RETRY_PERIOD", "1s")})
	v09 := deployment("fleet-controller", corev1.Container{Name: "fleet-controller", Env: env("NAMESPACE", "x")})
	v012am := deployment("fleet-controller", corev1.Container{Name: "fleet-agentmanagement", Env: fleetEnv})
	with := func(in Inputs, f func(*Inputs)) Inputs { f(&in); return in }

	cases := []struct {
		name string
		d    *appsv1.Deployment
		in   Inputs
		want []ContainerEnv
	}{
		{"nothing changes", v014, defaults, nil},
		{"equal durations written differently are equal", deployment("gitjob", corev1.Container{Name: "gitjob",
			Env: env("CATTLE_ELECTION_LEASE_DURATION", "0.5m", "CATTLE_ELECTION_RENEW_DEADLINE", "25000ms", "CATTLE_ELECTION_RETRY_PERIOD", "10s")}),
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
			i.Channel = fleet.ChannelClusterEnvV012
			i.Agent = five
		}), nil},
		{"v0.13+: agent env added when missing", v012am, with(defaults, func(i *Inputs) { i.Agent = five }),
			[]ContainerEnv{{"fleet-agentmanagement", election.FleetAgentPrefix.Env(five)}}},
		{"unknown controller triple: nothing", v09, with(defaults, func(i *Inputs) { i.ControllerOK = false }), nil},
		{"invalid triple never written", v09, with(defaults, func(i *Inputs) { i.Controller.RetryPeriod = time.Minute }), nil},
		{"a missing name means all three are written", deployment("helmops", corev1.Container{Name: "helmops",
			Env: env("CATTLE_ELECTION_LEASE_DURATION", "30s", "CATTLE_ELECTION_RENEW_DEADLINE", "25s")}),
			defaults, []ContainerEnv{{"helmops", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"valueFrom is rewritten", deployment("gitjob", corev1.Container{Name: "gitjob",
			Env: append(env("CATTLE_ELECTION_LEASE_DURATION", "30s", "CATTLE_ELECTION_RENEW_DEADLINE", "25s"),
				corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", ValueFrom: &corev1.EnvVarSource{}})}),
			defaults, []ContainerEnv{{"gitjob", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"a conflicting duplicate is fixed", deployment("gitjob", corev1.Container{Name: "gitjob",
			Env: append(append([]corev1.EnvVar{}, fleetEnv...), env("CATTLE_ELECTION_RETRY_PERIOD", "2s")...)}),
			defaults, []ContainerEnv{{"gitjob", election.CattlePrefix.Env(election.FleetDefaults)}}},
		{"not a Fleet Deployment", deployment("rancher", corev1.Container{Name: "fleet-controller"}), defaults, nil},
	}
	for _, c := range cases {
		got := Desired(c.d, c.in)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}

func TestIsTargetShards(t *testing.T) {
	shard := deployment("gitjob-shard-a")
	if fleet.IsTarget(shard) {
		t.Error("a shard-named Deployment without the shard-id label is a target")
	}
	shard.Spec.Template.Labels = map[string]string{fleet.ShardIDLabel: "a"}
	if !fleet.IsTarget(shard) {
		t.Error("a labelled shard is not a target")
	}
}

func TestPatchBody(t *testing.T) {
	d := deployment("gitjob", corev1.Container{Name: "gitjob", Env: []corev1.EnvVar{
		{Name: "CATTLE_ELECTION_RETRY_PERIOD", ValueFrom: &corev1.EnvVarSource{}}}})
	body, err := PatchBody(d, []ContainerEnv{{"gitjob", election.CattlePrefix.Env(five)}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]interface{}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	s := string(body)
	for _, want := range []string{`"name":"gitjob"`, `{"name":"CATTLE_ELECTION_LEASE_DURATION","value":"30s"}`,
		`{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"5s","valueFrom":null}`} {
		if !strings.Contains(s, want) {
			t.Errorf("patch %s lacks %s", s, want)
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
	// An empty document gets the keys.
	out, changed, err = MergeChartValues("", five, true, election.Timings{}, false)
	if err != nil || !changed || !strings.Contains(out, "leaderElection:\n  leaseDuration: 30s\n  renewDeadline: 25s\n  retryPeriod: 5s") || strings.Contains(out, "agent") {
		t.Errorf("empty doc: %q %v %v", out, changed, err)
	}
	for _, bad := range []string{"- a list", "leaderElection: 5", "{not yaml"} {
		if _, _, err := MergeChartValues(bad, five, true, five, true); err == nil {
			t.Errorf("MergeChartValues(%q) = nil error", bad)
		}
	}
}
