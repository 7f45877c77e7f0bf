package admission

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// TestOverridesAdmittedWhereTheControllerAppliesThem: for every Fleet
// agent channel and every object the webhook judges overrides on, the
// webhook refuses them exactly where the controller's decision would report
// them unsupported, with the same message. The webhook does not know the
// Rancher version: a Rancher-managed cluster counts as one whose
// cattle-cluster-agent reads them, as an unknown version does
// (rancher.Version.ClusterAgentReadsElectionEnv).
func TestOverridesAdmittedWhereTheControllerAppliesThem(t *testing.T) {
	channels := []fleet.AgentChannel{fleet.ChannelAgentManagement, fleet.ChannelFixedV012, fleet.ChannelClusterEnvV09,
		fleet.ChannelFixedV090, fleet.ChannelNoElection}
	obj := func(name string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetName(name)
		u.SetNamespace("fleet-default")
		u.SetLabels(labels)
		u.SetAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"})
		return u
	}
	sources := []struct {
		what    string
		group   string
		u       *unstructured.Unstructured
		managed bool
	}{
		{"standalone fleet Cluster", fleet.ClusterGVR.Group, obj("edge", nil), false},
		{"Rancher's fleet Cluster", fleet.ClusterGVR.Group, obj("edge", map[string]string{rancher.ClusterNameLabel: "c-m-abc"}), true},
		{"legacy management Cluster", rancher.ManagementClusterGVR.Group, obj("c-abcde", nil), true},
		{"provisioning Cluster", rancher.ProvisioningClusterGVR.Group, obj("rke2", nil), true},
	}
	for _, ch := range channels {
		for _, s := range sources {
			t.Run(fmt.Sprintf("%s/%s", ch, s.what), func(t *testing.T) {
				d := agentenv.Decide(agentenv.Input{Facts: agentenv.FactsOf(s.u), Global: election.FleetDefaults, Channel: ch, ClusterAgentReads: s.managed})
				err := overrideReaches(s.group, s.u, ch)
				if (err != nil) != (d.Problem == agentenv.ProblemUnsupported) {
					t.Fatalf("webhook %v; controller problem %q (%v)", err, d.Problem, d.Err)
				}
				if err != nil && err.Error() != d.Err.Error() {
					t.Errorf("messages differ:\nwebhook    %v\ncontroller %v", err, d.Err)
				}
			})
		}
	}
	// A non-legacy management Cluster's annotations are Rancher's copies:
	// never refused.
	for _, ch := range channels {
		if err := overrideReaches(rancher.ManagementClusterGVR.Group, obj("c-m-abc", nil), ch); err != nil {
			t.Errorf("%s: Rancher's copy on a management Cluster refused: %v", ch, err)
		}
	}
}
