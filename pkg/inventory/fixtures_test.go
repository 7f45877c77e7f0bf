package inventory

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

const (
	ns        = "leasetune-system"
	fleetNS   = fleet.DefaultNamespace
	rancherNS = "cattle-system"
	workspace = "fleet-default"
)

func options(parts, optional Part) Options {
	return Options{Namespace: ns, FleetNamespace: fleetNS, RancherNamespace: rancherNS, Parts: parts, Optional: optional}
}

func setting(name string, value interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Setting",
		"metadata": map[string]interface{}{"name": name}, "value": value}}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

func deployment(namespace, name string, replicas *int32, containers ...corev1.Container) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	d.Spec.Replicas = replicas
	d.Spec.Template.Spec.Containers = containers
	return d
}

// cluster is a cluster object of kind gvr; mgmt, when set, is its
// management.cattle.io/cluster-name label (fleet) or status.clusterName
// (provisioning).
func cluster(gvr schema.GroupVersionResource, namespace, name, mgmt string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": gvr.GroupVersion().String(), "kind": "Cluster",
		"spec": map[string]interface{}{}}}
	u.SetNamespace(namespace)
	u.SetName(name)
	switch {
	case mgmt == "":
	case gvr == fleet.ClusterGVR:
		u.SetLabels(map[string]string{rancher.ClusterNameLabel: mgmt})
	case gvr == rancher.ProvisioningClusterGVR:
		_ = unstructured.SetNestedField(u.Object, mgmt, "status", "clusterName")
		_ = unstructured.SetNestedField(u.Object, map[string]interface{}{}, "spec", "rkeConfig")
	}
	return u
}

func int32p(n int32) *int32 { return &n }

// installation is a Rancher v2.11.3 installation with Fleet v0.14.10: two
// of the nine Settings set and one Setting of Rancher's own, leasetune's
// state and channel record, fleet-controller and gitjob, rancher-config,
// the Rancher Deployment (3 replicas), and three fleet Clusters: edge-1
// standalone, rke2-1 provisioned by Rancher, gone-1 whose provisioning
// Cluster is missing.
func installation() (kube, dyn []runtime.Object) {
	kube = []runtime.Object{
		configMap(ns, settings.DefaultStateName, map[string]string{}),
		configMap(ns, fleetenv.ChannelConfigMapName, map[string]string{"channel": "agentmanagement", "evidence": "image rancher/fleet:v0.14.10"}),
		configMap(rancherNS, fleetenv.RancherConfigName, map[string]string{fleetenv.RancherConfigKey: "{}"}),
		deployment(fleetNS, fleet.ControllerDeployment, nil,
			corev1.Container{Name: fleet.ControllerContainer, Image: "rancher/fleet:v0.14.10"},
			corev1.Container{Name: fleet.AgentManagementContainer, Image: "rancher/fleet:v0.14.10"}),
		deployment(fleetNS, fleet.GitjobDeployment, nil, corev1.Container{Name: fleet.GitjobContainer, Image: "rancher/fleet:v0.14.10"}),
		deployment(rancherNS, "rancher", int32p(3), corev1.Container{Name: "rancher", Image: "rancher/rancher:v2.11.3"}),
	}
	dyn = []runtime.Object{
		setting("fleet-agent-leader-election-retry-period", "20s"),
		setting("fleet-agent-leader-election-lease-duration", "60s"),
		setting("server-url", "https://rancher.example"),
		cluster(fleet.ClusterGVR, workspace, "edge-1", ""),
		cluster(fleet.ClusterGVR, workspace, "rke2-1", "c-m-rke2"),
		cluster(fleet.ClusterGVR, workspace, "gone-1", "c-m-gone"),
		cluster(rancher.ProvisioningClusterGVR, workspace, "rke2-1", "c-m-rke2"),
		cluster(rancher.ManagementClusterGVR, "", "c-m-rke2", ""),
	}
	return kube, dyn
}

// fakes are the fake clientsets Read reads from.
type fakes struct {
	cs  *k8sfake.Clientset
	dyn *dynamicfake.FakeDynamicClient
}

func newFakes(kube, dyn []runtime.Object) fakes {
	kinds := map[schema.GroupVersionResource]string{SettingsGVR: "SettingList", fleet.ClusterGVR: "ClusterList",
		rancher.ProvisioningClusterGVR: "ClusterList", rancher.ManagementClusterGVR: "ClusterList"}
	return fakes{cs: k8sfake.NewSimpleClientset(kube...), dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, dyn...)}
}

// call names one API call: its verb, resource and group, and for a get its
// object's name.
type call struct{ verb, group, resource, name string }

func (c call) matches(a k8stesting.Action) bool {
	if a.GetVerb() != c.verb || a.GetResource().Resource != c.resource || a.GetResource().Group != c.group {
		return false
	}
	if g, ok := a.(k8stesting.GetAction); ok && c.name != "" {
		return g.GetName() == c.name
	}
	return true
}

// fail makes the call c answer err, in both fakes.
func (f fakes) fail(c call, err error) {
	react := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if c.matches(a) {
			return true, nil, err
		}
		return false, nil, nil
	}
	f.cs.PrependReactor("*", "*", react)
	f.dyn.PrependReactor("*", "*", react)
}

// calls are the API calls both fakes received, in order per fake.
func (f fakes) calls() []call {
	var out []call
	for _, a := range append(f.cs.Actions(), f.dyn.Actions()...) {
		c := call{verb: a.GetVerb(), group: a.GetResource().Group, resource: a.GetResource().Resource}
		if g, ok := a.(k8stesting.GetAction); ok {
			c.name = g.GetName()
		}
		out = append(out, c)
	}
	return out
}
