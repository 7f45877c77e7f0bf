package fleet

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/election"
)

func TestDetectChannelByImage(t *testing.T) {
	for image, want := range map[string]AgentChannel{
		"rancher/fleet:v0.9.0":   ChannelFixedV090,
		"rancher/fleet:v0.9.1":   ChannelClusterEnvV09,
		"rancher/fleet:v0.9.9":   ChannelClusterEnvV09,
		"rancher/fleet:v0.10.4":  ChannelNoElection,
		"rancher/fleet:v0.11.9":  ChannelNoElection,
		"rancher/fleet:v0.12.13": ChannelFixedV012,
		"rancher/fleet:v0.13.1":  ChannelAgentManagement,
		"rancher/fleet:v0.14.10": ChannelAgentManagement,
	} {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: ControllerContainer, Image: image}}}}}}
		got := DetectChannel(d, "leasetune", "")
		if got.Channel != want || !got.Certain {
			t.Errorf("%s: %+v, want %s", image, got, want)
		}
	}
}

func TestDetectChannelByStructure(t *testing.T) {
	helmOwns := func(container string, p election.EnvPrefix) metav1.ManagedFieldsEntry {
		raw := `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"` + container + `\"}":{"f:env":{"k:{\"name\":\"` +
			p.EnvName(election.RetryPeriod) + `\"}":{".":{},"f:name":{}}}}}}}}}`
		return metav1.ManagedFieldsEntry{Manager: "helm", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
	}
	ctrlEnv := election.CattlePrefix.Env(election.FleetDefaults)
	agentEnv := election.FleetAgentPrefix.Env(election.FleetDefaults)
	dep := func(mf []metav1.ManagedFieldsEntry, containers ...corev1.Container) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}}}
	}
	ctrl := corev1.Container{Name: ControllerContainer, Image: "rancher/fleet:dev", Env: ctrlEnv}
	am := corev1.Container{Name: AgentManagementContainer, Env: append(append([]corev1.EnvVar{}, ctrlEnv...), agentEnv...)}
	cases := []struct {
		name     string
		d        *appsv1.Deployment
		recorded AgentChannel
		want     AgentChannel
	}{
		{"chart set FLEET_AGENT_ELECTION_*", dep([]metav1.ManagedFieldsEntry{helmOwns(AgentManagementContainer, election.FleetAgentPrefix)}, ctrl, am),
			"", ChannelAgentManagement},
		{"only we set FLEET_AGENT_ELECTION_*: the record decides", dep(nil, ctrl, am), ChannelFixedV012, ChannelFixedV012},
		{"chart set CATTLE_ELECTION_* only", dep([]metav1.ManagedFieldsEntry{helmOwns(ControllerContainer, election.CattlePrefix)}, ctrl),
			"", ChannelFixedV012},
		{"only we set CATTLE_ELECTION_*: the record decides", dep(nil, ctrl), ChannelClusterEnvV09, ChannelClusterEnvV09},
		{"only we set CATTLE_ELECTION_*, nothing recorded", dep(nil, ctrl), "", ChannelClusterEnvV09},
		{"no election env", dep(nil, corev1.Container{Name: ControllerContainer}), "", ChannelClusterEnvV09},
		// An Update that dropped the env does not turn a recorded v0.13+ into v0.9.
		{"env stripped after detection", dep(nil, corev1.Container{Name: ControllerContainer}), ChannelAgentManagement, ChannelAgentManagement},
		{"env stripped after detection (v0.12)", dep(nil, corev1.Container{Name: ControllerContainer}), ChannelFixedV012, ChannelFixedV012},
		// An upgrade to v0.13+ is seen although something else was recorded.
		{"upgraded to v0.13+", dep([]metav1.ManagedFieldsEntry{helmOwns(AgentManagementContainer, election.FleetAgentPrefix)}, ctrl, am),
			ChannelFixedV012, ChannelAgentManagement},
	}
	for _, c := range cases {
		if got := DetectChannel(c.d, "leasetune", c.recorded); got.Channel != c.want {
			t.Errorf("%s: %+v, want %s", c.name, got, c.want)
		}
	}
}

func TestBaseline(t *testing.T) {
	global := election.Timings{LeaseDuration: 60e9, RenewDeadline: 50e9, RetryPeriod: 20e9}
	for ch, want := range map[AgentChannel]election.Timings{
		ChannelAgentManagement: global, ChannelFixedV012: election.FleetDefaults, ChannelClusterEnvV09: election.WranglerDefaults,
		ChannelFixedV090: election.WranglerDefaults,
	} {
		if got, ok := ch.Baseline(global); !ok || got != want {
			t.Errorf("%s: %s %v", ch, got, ok)
		}
	}
	if _, ok := ChannelNoElection.Baseline(global); ok {
		t.Error("agents without election have a baseline")
	}
	if _, err := ParseChannel("v0.13"); err == nil {
		t.Error("ParseChannel accepted an unknown channel")
	}
	if c, err := ParseChannel("cluster-env-v0.12"); err != nil || c != ChannelFixedV012 {
		t.Errorf("the name earlier releases recorded for v0.12 reads as %q, %v", c, err)
	}
	for _, c := range Channels {
		if got, err := ParseChannel(string(c)); err != nil || got != c {
			t.Errorf("ParseChannel(%q) = %q, %v", c, got, err)
		}
	}
}
