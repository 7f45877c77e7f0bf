package uiapi

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/settings"
)

var invOptions = inventory.Options{Namespace: "leasetune-system", FleetNamespace: "cattle-fleet-system", RancherNamespace: "cattle-system", RancherDeployment: "rancher"}

func forbidden(what string) error {
	return fmt.Errorf("%s: %w", what, apierrors.NewForbidden(schema.GroupResource{Resource: "x"}, "y", errors.New("no")))
}

// TestNotes: each part the caller could not read is one note, in Read's
// order, with the API server's message; none is an empty list.
func TestNotes(t *testing.T) {
	for _, tc := range []struct {
		unread map[inventory.Part]error
		want   []string
	}{
		{nil, []string{}},
		{map[inventory.Part]error{inventory.FleetDeployments: forbidden("list"), inventory.State: forbidden("get")}, []string{
			`leasetune's record (ConfigMap leasetune-system/leasetune-state) could not be read with your rights (x "y" is forbidden: no): the triples in effect are computed from the settings alone`,
			`the Fleet Deployments in cattle-fleet-system could not be read with your rights (x "y" is forbidden: no)`,
		}},
		{map[inventory.Part]error{inventory.ChannelRecord: forbidden("get"), inventory.RancherDeployment: forbidden("get")}, []string{
			`leasetune's record of the Fleet agent channel (ConfigMap leasetune-system/leasetune-fleet-channel) could not be read with your rights (x "y" is forbidden: no): the channel is detected without it`,
			`the Rancher Deployment cattle-system/rancher could not be read with your rights (x "y" is forbidden: no): the clusters are routed as for an unknown Rancher version`,
		}},
	} {
		if got := notes(&inventory.Snapshot{Options: invOptions, Unread: tc.unread}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.unread, got, tc.want)
		}
	}
}

// TestLocksOf: the locks counted in what could be read, else an estimate
// that says why.
func TestLocksOf(t *testing.T) {
	ctrl := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fleet.ControllerDeployment}}
	ctrl.Spec.Template.Spec.Containers = []corev1.Container{{Name: fleet.ControllerContainer}, {Name: fleet.AgentManagementContainer}}
	zero := int32(0)
	rancherDep := &appsv1.Deployment{}
	rancherDep.Spec.Replicas = &zero
	for _, tc := range []struct {
		name string
		comp settings.Component
		snap inventory.Snapshot
		want Locks
	}{
		{"Fleet processes", settings.FleetController, inventory.Snapshot{FleetDeployments: []appsv1.Deployment{ctrl}},
			Locks{Count: 2, What: "2 Fleet controller processes in cattle-fleet-system (one lock each)"}},
		{"no Fleet", settings.FleetController, inventory.Snapshot{},
			Locks{Count: 5, Estimated: true, What: "5 locks, as Fleet v0.14 has (no Fleet Deployments found)"}},
		{"Fleet unread", settings.FleetController, inventory.Snapshot{Unread: map[inventory.Part]error{inventory.FleetDeployments: forbidden("list")}},
			Locks{Count: 5, Estimated: true, What: "5 locks, as Fleet v0.14 has (the Fleet Deployments could not be read with your rights)"}},
		{"clusters", settings.FleetAgent, inventory.Snapshot{FleetClusterCount: 10000},
			Locks{Count: 10000, What: "10000 fleet Clusters (one fleet-agent lock each)"}},
		{"no cluster", settings.FleetAgent, inventory.Snapshot{},
			Locks{Count: 0, What: "0 fleet Clusters (one fleet-agent lock each)"}},
		{"no fleet Cluster kind", settings.FleetAgent, inventory.Snapshot{Absent: inventory.ClusterCount},
			Locks{Count: 1, Estimated: true, What: "1 cluster (no fleet Cluster kind here)"}},
		{"clusters unread", settings.FleetAgent, inventory.Snapshot{Unread: map[inventory.Part]error{inventory.ClusterCount: forbidden("list")}},
			Locks{Count: 1, Estimated: true, What: "1 cluster (the fleet Clusters could not be read with your rights)"}},
		{"Rancher", settings.Rancher, inventory.Snapshot{Rancher: &appsv1.Deployment{}, RancherReplicas: 3},
			Locks{Count: 1, Followers: 2, What: "kube-system/cattle-controllers, 3 Rancher replica(s): 1 leader, 2 follower(s)"}},
		{"Rancher at 0 replicas counts one", settings.Rancher, inventory.Snapshot{Rancher: rancherDep, RancherReplicas: 0},
			Locks{Count: 1, Followers: 0, What: "kube-system/cattle-controllers, 1 Rancher replica(s): 1 leader, 0 follower(s)"}},
		{"no Rancher", settings.Rancher, inventory.Snapshot{Absent: inventory.RancherDeployment},
			Locks{Count: 1, Followers: 2, Estimated: true, What: `kube-system/cattle-controllers with Rancher's chart default of 3 replicas (Deployment cattle-system/rancher: deployments.apps "rancher" not found)`}},
		{"Rancher unread", settings.Rancher, inventory.Snapshot{Unread: map[inventory.Part]error{inventory.RancherDeployment: forbidden("get")}},
			Locks{Count: 1, Followers: 2, Estimated: true, What: `kube-system/cattle-controllers with Rancher's chart default of 3 replicas (Deployment cattle-system/rancher: x "y" is forbidden: no)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Options = invOptions
			if got := locksOf(&tc.snap, tc.comp); got != tc.want {
				t.Errorf("%+v, want %+v", got, tc.want)
			}
		})
	}
}
