// Package kit is the part of the project's test kit that unit tests may
// import as well as integration tests: object builders, election triples
// from strings, the stripper of fields a comparison leaves out, and the
// seed of property tests. Of the project's packages it imports only
// pkg/election (so that package's own tests cannot import kit); the fakes
// of settings.Triples and of the Fleet agent channel, which import more,
// are in tests/kit/fakes. It imports no envtest and no controller package; the parts that need a
// running kube-apiserver (the control plane, the write recorder, the
// quiet-period wait, Consistently) are in tests/integration/framework.
package kit

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Env returns env entries from NAME=VALUE strings, split at the first "=",
// in order. It panics on a string without "=": a test's own typo.
func Env(kv ...string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(kv))
	for _, s := range kv {
		name, value, ok := strings.Cut(s, "=")
		if !ok {
			panic(fmt.Sprintf("kit.Env: %q is not NAME=VALUE", s))
		}
		out = append(out, corev1.EnvVar{Name: name, Value: value})
	}
	return out
}

// ---- cluster objects ---------------------------------------------------

// ClusterOption changes a cluster object a builder makes.
type ClusterOption func(*unstructured.Unstructured)

// FleetCluster is a clusters.fleet.cattle.io/v1alpha1 object in ns, with
// an empty spec unless opts set one.
func FleetCluster(ns, name string, opts ...ClusterOption) *unstructured.Unstructured {
	return cluster("fleet.cattle.io/v1alpha1", ns, name, opts)
}

// ProvisioningCluster is a clusters.provisioning.cattle.io/v1 object in ns.
func ProvisioningCluster(ns, name string, opts ...ClusterOption) *unstructured.Unstructured {
	return cluster("provisioning.cattle.io/v1", ns, name, opts)
}

// ManagementCluster is a (cluster-scoped) clusters.management.cattle.io/v3
// object.
func ManagementCluster(name string, opts ...ClusterOption) *unstructured.Unstructured {
	return cluster("management.cattle.io/v3", "", name, opts)
}

func cluster(apiVersion, ns, name string, opts []ClusterOption) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion, "kind": "Cluster", "spec": map[string]interface{}{}}}
	u.SetNamespace(ns)
	u.SetName(name)
	for _, o := range opts {
		o(u)
	}
	return u
}

// WithEnv sets spec.agentEnvVars (the field of all three cluster kinds)
// to env, in order.
func WithEnv(env ...corev1.EnvVar) ClusterOption {
	return func(u *unstructured.Unstructured) {
		l := make([]interface{}, 0, len(env))
		for i := range env {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&env[i])
			if err != nil {
				panic(fmt.Sprintf("kit.WithEnv: %v", err))
			}
			l = append(l, m)
		}
		spec(u)["agentEnvVars"] = l
	}
}

// WithSpec sets the given spec fields (a deep copy of each value), keeping
// the others.
func WithSpec(fields map[string]interface{}) ClusterOption {
	return func(u *unstructured.Unstructured) {
		s := spec(u)
		for k, v := range fields {
			s[k] = runtime.DeepCopyJSONValue(v)
		}
	}
}

// WithLabels adds labels.
func WithLabels(labels map[string]string) ClusterOption {
	return func(u *unstructured.Unstructured) { u.SetLabels(merged(u.GetLabels(), labels)) }
}

// WithAnnotations adds annotations.
func WithAnnotations(annotations map[string]string) ClusterOption {
	return func(u *unstructured.Unstructured) { u.SetAnnotations(merged(u.GetAnnotations(), annotations)) }
}

func spec(u *unstructured.Unstructured) map[string]interface{} {
	s, ok := u.Object["spec"].(map[string]interface{})
	if !ok {
		s = map[string]interface{}{}
		u.Object["spec"] = s
	}
	return s
}

func merged(a, b map[string]string) map[string]string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// FleetAgentCustomization is a fleet Cluster's agent customization as
// users set it (agent namespace, tolerations, affinity, resources: the
// spec fields of rancher/fleet's ClusterSpec), for checking that a write
// of spec.agentEnvVars leaves it exactly as it was. Use it with WithSpec.
func FleetAgentCustomization() map[string]interface{} {
	return map[string]interface{}{
		"agentNamespace":   "cattle-fleet-system",
		"agentTolerations": []interface{}{edgeToleration()},
		"agentAffinity":    edgeAffinity(),
		"agentResources":   map[string]interface{}{"limits": map[string]interface{}{"memory": "256Mi"}, "requests": map[string]interface{}{"cpu": "50m"}},
	}
}

// RancherAgentCustomization is the agent deployment customization users
// set on a provisioning or management Cluster for cattle-cluster-agent and
// fleet-agent (rancher/rancher's AgentDeploymentCustomization:
// appendTolerations, overrideAffinity, overrideResourceRequirements), under
// both of its spec fields. Use it with WithSpec.
func RancherAgentCustomization() map[string]interface{} {
	one := func() map[string]interface{} {
		return map[string]interface{}{
			"appendTolerations": []interface{}{edgeToleration()},
			"overrideResourceRequirements": map[string]interface{}{
				"limits": map[string]interface{}{"memory": "512Mi"}, "requests": map[string]interface{}{"cpu": "100m"}},
			"overrideAffinity": edgeAffinity(),
		}
	}
	return map[string]interface{}{"clusterAgentDeploymentCustomization": one(), "fleetAgentDeploymentCustomization": one()}
}

func edgeToleration() map[string]interface{} {
	return map[string]interface{}{"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoSchedule"}
}

func edgeAffinity() map[string]interface{} {
	return map[string]interface{}{"nodeAffinity": map[string]interface{}{"preferredDuringSchedulingIgnoredDuringExecution": []interface{}{
		map[string]interface{}{"weight": int64(1), "preference": map[string]interface{}{"matchExpressions": []interface{}{
			map[string]interface{}{"key": "node-role.kubernetes.io/edge", "operator": "Exists"}}}}}}}
}

// AgentEnv returns a cluster object's spec.agentEnvVars as NAME=VALUE
// strings, in order; an entry set from a source reads NAME=<valueFrom>.
// It returns nil for a nil object or one without the field.
func AgentEnv(u *unstructured.Unstructured) []string {
	if u == nil {
		return nil
	}
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	var out []string
	for _, it := range l {
		m, _ := it.(map[string]interface{})
		v, _ := m["value"].(string)
		if _, from := m["valueFrom"]; from {
			v = "<valueFrom>"
		}
		n, _ := m["name"].(string)
		out = append(out, n+"="+v)
	}
	return out
}

// ---- Deployments -------------------------------------------------------

// DeploymentOption changes a Deployment a builder makes.
type DeploymentOption func(*appsv1.Deployment)

// Deployment is an apps/v1 Deployment in ns (which may be "") with no
// containers unless opts add them.
func Deployment(ns, name string, opts ...DeploymentOption) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, o := range opts {
		o(d)
	}
	return d
}

// WithContainer appends a container of the pod template with (a copy of)
// env.
func WithContainer(name string, env ...corev1.EnvVar) DeploymentOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers,
			corev1.Container{Name: name, Env: append([]corev1.EnvVar(nil), env...)})
	}
}

// WithImage sets the image of the container called name (added before by
// WithContainer; it panics when there is none).
func WithImage(container, image string) DeploymentOption {
	return func(d *appsv1.Deployment) {
		for i := range d.Spec.Template.Spec.Containers {
			if d.Spec.Template.Spec.Containers[i].Name == container {
				d.Spec.Template.Spec.Containers[i].Image = image
				return
			}
		}
		panic(fmt.Sprintf("kit.WithImage: no container %q", container))
	}
}

// WithSelector sets spec.selector to match labels and gives the pod
// template those labels, as the API server requires of a Deployment.
func WithSelector(labels map[string]string) DeploymentOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: merged(nil, labels)}
		d.Spec.Template.Labels = merged(d.Spec.Template.Labels, labels)
	}
}

// WithReplicas sets spec.replicas.
func WithReplicas(n int32) DeploymentOption {
	return func(d *appsv1.Deployment) { d.Spec.Replicas = &n }
}

// RolledOut sets metadata.generation to gen and the status a finished
// rollout of it has, as kube-controller-manager's Deployment controller
// reports it: observedGeneration gen and every replica (spec.replicas, 1
// when unset) updated, ready and available.
func RolledOut(gen int64) DeploymentOption {
	return func(d *appsv1.Deployment) {
		n := int32(1)
		if d.Spec.Replicas != nil {
			n = *d.Spec.Replicas
		}
		d.Generation = gen
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: n, UpdatedReplicas: n, AvailableReplicas: n, ReadyReplicas: n}
	}
}

// RancherDeployment is the Rancher Deployment cattle-system/rancher as
// Rancher's chart renders its env (rancher/rancher v2.11.3
// chart/templates/deployment.yaml), 3 replicas of rancher/rancher:tag,
// settled, with extra after the chart's entries.
func RancherDeployment(tag string, extra ...corev1.EnvVar) *appsv1.Deployment {
	env := append(Env("CATTLE_NAMESPACE=cattle-system", "CATTLE_PEER_SERVICE=rancher",
		"IMPERATIVE_API_DIRECT=true", "IMPERATIVE_API_APP_SELECTOR=rancher"), extra...)
	return Deployment("cattle-system", "rancher", WithReplicas(3),
		WithContainer("rancher", env...), WithImage("rancher", "rancher/rancher:"+tag), RolledOut(1))
}
