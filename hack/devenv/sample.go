package main

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The sample installation: Fleet v0.14 as its chart renders it (three
// Deployments, the election env at the chart's 30s/25s/10s), Rancher's
// Deployment and rancher-config, and downstream clusters of every kind.

func env(kv ...string) []corev1.EnvVar {
	out := []corev1.EnvVar{{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

var chartElection = []string{"CATTLE_ELECTION_LEASE_DURATION", "30s", "CATTLE_ELECTION_RETRY_PERIOD", "10s", "CATTLE_ELECTION_RENEW_DEADLINE", "25s"}

func deployment(name string, containers ...corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name, "fleet.cattle.io/shard-id": "", "fleet.cattle.io/shard-default": "true"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "fleet-104.1.0_up0.14.10"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{ServiceAccountName: name, Containers: containers},
			},
		},
	}
}

func container(name string, e []corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: name, Image: "rancher/fleet:v0.14.10", Env: e}
}

func fleetDeployments() []*appsv1.Deployment {
	el := chartElection
	return []*appsv1.Deployment{
		deployment("fleet-controller",
			container("fleet-controller", env(append(append([]string{}, el...), "BUNDLE_RECONCILER_WORKERS", "50", "CLUSTER_RECONCILER_WORKERS", "50")...)),
			container("fleet-cleanup", env(el...)),
			container("fleet-agentmanagement", env(append(append([]string{"FLEET_PROPAGATE_DEBUG_SETTINGS_TO_AGENTS", "true"}, el...),
				"FLEET_AGENT_REPLICA_COUNT", "1", "FLEET_AGENT_ELECTION_LEASE_DURATION", "30s",
				"FLEET_AGENT_ELECTION_RETRY_PERIOD", "10s", "FLEET_AGENT_ELECTION_RENEW_DEADLINE", "25s")...))),
		deployment("gitjob", container("gitjob", env(append(append([]string{}, el...), "GITREPO_SYNC_PERIOD", "2h")...))),
		deployment("helmops", container("helmops", env(append(append([]string{}, el...), "HELMOPS_RECONCILER_WORKERS", "50")...))),
	}
}

const rancherConfigFleetValues = `# Values Rancher installs the Fleet chart with.
apiServerURL: https://rancher.example.com
priorityClassName: rancher-critical
`

func u(apiVersion, kind, ns, name string, labels, annotations map[string]string, spec map[string]interface{}) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	o.SetNamespace(ns)
	o.SetName(name)
	o.SetLabels(labels)
	o.SetAnnotations(annotations)
	return o
}

func envList(kv ...string) []interface{} {
	var out []interface{}
	for i := 0; i < len(kv); i += 2 {
		out = append(out, map[string]interface{}{"name": kv[i], "value": kv[i+1]})
	}
	return out
}

// withEnv sets spec.agentEnvVars of o.
func withEnv(o *unstructured.Unstructured, env []interface{}) *unstructured.Unstructured {
	o.Object["spec"].(map[string]interface{})["agentEnvVars"] = env
	return o
}

// clusters returns the sample downstream clusters: fleet, provisioning and
// management objects as Rancher and Fleet create them.
func clusters() []*unstructured.Unstructured {
	const fleetV, provV, mgmtV = "fleet.cattle.io/v1alpha1", "provisioning.cattle.io/v1", "management.cattle.io/v3"
	managed := func(m string) map[string]string { return map[string]string{"management.cattle.io/cluster-name": m} }
	proxy := envList("HTTPS_PROXY", "http://proxy.example.com:3128", "NO_PROXY", "10.0.0.0/8,.svc")
	tolerations := []interface{}{map[string]interface{}{"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoSchedule"}}
	prov := func(ns, name, mgmt string, rke bool, ann map[string]string) *unstructured.Unstructured {
		spec := map[string]interface{}{"kubernetesVersion": "v1.31.4+rke2r1"}
		if rke {
			spec["rkeConfig"] = map[string]interface{}{"machinePools": []interface{}{}}
		}
		o := u(provV, "Cluster", ns, name, nil, ann, spec)
		o.Object["status"] = map[string]interface{}{"clusterName": mgmt, "ready": true}
		return o
	}
	return []*unstructured.Unstructured{
		// The local cluster: Rancher-managed, imported-like.
		u(mgmtV, "Cluster", "", "local", nil, nil, map[string]interface{}{"displayName": "local"}),
		prov("fleet-local", "local", "local", false, nil),
		u(fleetV, "Cluster", "fleet-local", "local", managed("local"), nil, map[string]interface{}{"agentNamespace": "cattle-fleet-local-system"}),
		// An RKE2 cluster Rancher provisions, with an override on its provisioning Cluster.
		u(mgmtV, "Cluster", "", "c-m-prod", nil, nil, map[string]interface{}{"displayName": "prod-rke2"}),
		prov("fleet-default", "prod-rke2", "c-m-prod", true, map[string]string{"election.cattle.io/retry-period": "5s"}),
		u(fleetV, "Cluster", "fleet-default", "prod-rke2", managed("c-m-prod"), nil, map[string]interface{}{}),
		// An imported cluster (through the current UI: the management name is
		// not legacy): its provisioning Cluster is the source of its agent
		// env; Rancher generates the management and fleet Clusters' from it.
		u(mgmtV, "Cluster", "", "c-m-imp4x7q2", nil, nil, map[string]interface{}{"displayName": "imported-eks", "agentEnvVars": proxy}),
		withEnv(prov("fleet-default", "imported-eks", "c-m-imp4x7q2", false, nil), proxy),
		u(fleetV, "Cluster", "fleet-default", "imported-eks", managed("c-m-imp4x7q2"), nil, map[string]interface{}{"agentEnvVars": proxy}),
		// A legacy imported cluster (v3 API, c-xxxxx): its management Cluster
		// is the source; Rancher generates the provisioning Cluster without env.
		u(mgmtV, "Cluster", "", "c-7x2kq", nil, nil, map[string]interface{}{"displayName": "imported-legacy", "agentEnvVars": proxy}),
		prov("fleet-default", "c-7x2kq", "c-7x2kq", false, nil),
		u(fleetV, "Cluster", "fleet-default", "c-7x2kq", managed("c-7x2kq"), nil, map[string]interface{}{"agentEnvVars": proxy}),
		// Standalone Fleet clusters with agent customizations.
		u(fleetV, "Cluster", "fleet-default", "edge-1", nil, map[string]string{"election.cattle.io/lease-duration": "60s", "election.cattle.io/renew-deadline": "50s"},
			map[string]interface{}{"agentEnvVars": proxy, "agentTolerations": tolerations}),
		u(fleetV, "Cluster", "fleet-default", "edge-2", nil, nil,
			map[string]interface{}{"agentEnvVars": envList("CATTLE_ELECTION_RETRY_PERIOD", "3s"), "agentTolerations": tolerations}),
	}
}

// rancherDeployment is the Rancher Deployment as Rancher's chart renders it
// with its defaults (rancher/rancher chart/templates/deployment.yaml at
// v2.10.3: 3 replicas, RollingUpdate with maxSurge 1 and maxUnavailable 1,
// the container "rancher" with its four env entries), trimmed to what
// leasetune reads. v2.10.3, so that the imported clusters' source stays the
// provisioning Cluster as the sample describes (v2.11+ makes it the
// management Cluster).
func rancherDeployment() *appsv1.Deployment {
	three := int32(3)
	one := intstr.FromInt32(1)
	labels := map[string]string{"app": "rancher"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher", Labels: map[string]string{"app": "rancher", "chart": "rancher-2.10.3", "heritage": "Helm", "release": "rancher"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &three,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &one}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rancher", "release": "rancher"}},
				Spec: corev1.PodSpec{ServiceAccountName: "rancher", Containers: []corev1.Container{{
					Name: "rancher", Image: "rancher/rancher:v2.10.3",
					Env: []corev1.EnvVar{{Name: "CATTLE_NAMESPACE", Value: "cattle-system"}, {Name: "CATTLE_PEER_SERVICE", Value: "rancher"},
						{Name: "IMPERATIVE_API_DIRECT", Value: "true"}, {Name: "IMPERATIVE_API_APP_SELECTOR", Value: "rancher"}},
				}}},
			},
		},
	}
}
