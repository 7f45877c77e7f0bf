package inventory

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/rancher"
)

// TestChannel: the flag, else the fleet-controller Deployment's evidence
// with the record, else the record, else unknown.
func TestChannel(t *testing.T) {
	record := func(ch string) *corev1.ConfigMap {
		return configMap(ns, fleetenv.ChannelConfigMapName, map[string]string{"channel": ch, "evidence": "image x"})
	}
	tagged := *deployment(fleetNS, fleet.ControllerDeployment, nil, corev1.Container{Name: fleet.ControllerContainer, Image: "rancher/fleet:v0.12.4"})
	untagged := *deployment(fleetNS, fleet.ControllerDeployment, nil, corev1.Container{Name: fleet.ControllerContainer, Image: "rancher/fleet:dev"})
	for _, tc := range []struct {
		name     string
		s        Snapshot
		channel  fleet.AgentChannel
		evidence string
	}{
		{"nothing", Snapshot{}, "", ""},
		{"the record alone", Snapshot{ChannelRecord: record("cluster-env-v0.9")}, fleet.ChannelClusterEnvV09, "recorded: image x"},
		{"a record that does not parse", Snapshot{ChannelRecord: record("v0.42")}, "", "recorded: image x"},
		{"the image's tag over the record", Snapshot{ChannelRecord: record("cluster-env-v0.9"), FleetDeployments: []appsv1.Deployment{tagged}},
			fleet.ChannelFixedV012, "image rancher/fleet:v0.12.4"},
		{"no tag: the record decides", Snapshot{ChannelRecord: record("agentmanagement"), FleetDeployments: []appsv1.Deployment{untagged}},
			fleet.ChannelAgentManagement, "recorded at first detection"},
		{"the flag over everything", Snapshot{Options: Options{ChannelOverride: fleet.ChannelNoElection}, ChannelRecord: record("agentmanagement"),
			FleetDeployments: []appsv1.Deployment{tagged}}, fleet.ChannelNoElection, "--fleet-agent-channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ch, ev := channel(&tc.s); ch != tc.channel || ev != tc.evidence {
				t.Errorf("%q (%s), want %q (%s)", ch, ev, tc.channel, tc.evidence)
			}
		})
	}
}

// TestRoute: each fleet Cluster is paired with its provisioning Cluster
// (by status.clusterName) and its management Cluster (by name); the
// imported cluster's source follows the Rancher version; a missing source
// is the cluster's own error.
func TestRoute(t *testing.T) {
	imported := cluster(rancher.ProvisioningClusterGVR, workspace, "imp-1", "c-m-imp")
	unstructured.RemoveNestedField(imported.Object, "spec", "rkeConfig")
	fleets := []unstructured.Unstructured{
		*cluster(fleet.ClusterGVR, workspace, "edge-1", ""),
		*cluster(fleet.ClusterGVR, workspace, "rke2-1", "c-m-rke2"),
		*cluster(fleet.ClusterGVR, workspace, "imp-1", "c-m-imp"),
		*cluster(fleet.ClusterGVR, workspace, "local", "local"),
	}
	provs := []unstructured.Unstructured{*cluster(rancher.ProvisioningClusterGVR, workspace, "rke2-1", "c-m-rke2"), *imported}
	mgmts := []unstructured.Unstructured{*cluster(rancher.ManagementClusterGVR, "", "c-m-rke2", ""), *cluster(rancher.ManagementClusterGVR, "", "c-m-imp", "")}
	v210, _ := rancher.Parse("v2.10.5")
	v211, _ := rancher.Parse("v2.11.3")
	for _, tc := range []struct {
		rv   rancher.Version
		want []string
	}{
		{v210, []string{"clusters.fleet.cattle.io fleet-default/edge-1", "clusters.provisioning.cattle.io fleet-default/rke2-1",
			"clusters.provisioning.cattle.io fleet-default/imp-1", `fleet Cluster fleet-default/local: management Cluster "local" not found`}},
		{v211, []string{"clusters.fleet.cattle.io fleet-default/edge-1", "clusters.provisioning.cattle.io fleet-default/rke2-1",
			"clusters.management.cattle.io c-m-imp", `fleet Cluster fleet-default/local: management Cluster "local" not found`}},
	} {
		got := Route(fleets, provs, mgmts, tc.rv)
		if len(got) != len(tc.want) {
			t.Fatalf("%v: %d clusters", tc.rv, len(got))
		}
		for i, c := range got {
			s := c.Routing.TargetRef.String()
			if c.Err != nil {
				s = c.Err.Error()
			}
			if s != tc.want[i] || c.Fleet != &fleets[i] {
				t.Errorf("%v, cluster %d: %s, want %s", tc.rv, i, s, tc.want[i])
			}
		}
	}
	if got := Route(nil, provs, mgmts, v211); len(got) != 0 {
		t.Errorf("no fleet Clusters: %v", got)
	}
}

// TestFleetLocks: one lock per Fleet container of a target Deployment;
// other Deployments and containers count nothing.
func TestFleetLocks(t *testing.T) {
	s := Snapshot{FleetDeployments: []appsv1.Deployment{
		*deployment(fleetNS, fleet.ControllerDeployment, nil, corev1.Container{Name: fleet.ControllerContainer},
			corev1.Container{Name: fleet.CleanupContainer}, corev1.Container{Name: fleet.AgentManagementContainer}),
		*deployment(fleetNS, fleet.HelmopsDeployment, nil, corev1.Container{Name: fleet.HelmopsContainer}, corev1.Container{Name: "sidecar"}),
		*deployment(fleetNS, "fleet-agent", nil, corev1.Container{Name: fleet.ControllerContainer}),
	}}
	if n := s.FleetLocks(); n != 4 {
		t.Errorf("%d locks, want 4", n)
	}
	if n := (&Snapshot{}).FleetLocks(); n != 0 {
		t.Errorf("no Deployments: %d locks", n)
	}
	if d := s.FleetDeployment(fleet.HelmopsDeployment); d == nil || d != &s.FleetDeployments[1] {
		t.Errorf("helmops: %v", d)
	}
	if d := s.FleetDeployment(fleet.GitjobDeployment); d != nil {
		t.Errorf("gitjob: %v", d)
	}
}

// TestMissing: the first unread part of those asked, in Read's order.
func TestMissing(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	s := Snapshot{Unread: map[Part]error{RancherDeployment: b, State: a}}
	for _, tc := range []struct {
		p    Part
		want error
	}{{All, a}, {All &^ State, b}, {Settings | Clusters, nil}, {0, nil}} {
		if got := s.Missing(tc.p); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("Missing(%s) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestPartString(t *testing.T) {
	for p, want := range map[Part]string{0: "", State: "state", State | Settings: "settings+state",
		All: "settings+state+channel-record+fleet-deployments+rancher-config+rancher-deployment+clusters+cluster-count"} {
		if got := p.String(); got != want {
			t.Errorf("%d: %q, want %q", p, got, want)
		}
	}
}
