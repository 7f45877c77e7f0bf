package fleetagent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"leasetune.io/leasetune/pkg/election"
)

// Name is the agent workload's and its main container's name (every tag:
// DefaultName = "fleet-agent"; v0.14.10 manifest.go:31).
const Name = "fleet-agent"

// Env names the agent manifest renders itself (string literals in
// manifest.go at every tag cited below).
const (
	EnvNamespace               = "NAMESPACE"
	EnvAgentScope              = "AGENT_SCOPE"
	EnvCheckinInterval         = "CHECKIN_INTERVAL"
	EnvBundleDeploymentWorkers = "BUNDLEDEPLOYMENT_RECONCILER_WORKERS"
	EnvDriftWorkers            = "DRIFT_RECONCILER_WORKERS"
	EnvLeaseDuration           = "CATTLE_ELECTION_LEASE_DURATION"
	EnvRetryPeriod             = "CATTLE_ELECTION_RETRY_PERIOD"
	EnvRenewDeadline           = "CATTLE_ELECTION_RENEW_DEADLINE"
	// v0.14.0-v0.15.x: experimental.CopyResourcesDownstreamFlag
	// (v0.14.10 internal/experimental/experimental.go:9).
	EnvCopyResourcesDownstream = "EXPERIMENTAL_COPY_RESOURCES_DOWNSTREAM"
	// v0.15.2+: config.EnvVarWranglerCheckGVKErrorMapping
	// (v0.16.1 internal/config/config.go:51).
	EnvWranglerCheckGVKErrorMapping = "CATTLE_WRANGLER_CHECK_GVK_ERROR_MAPPING"
)

// Options are the inputs of Fleet's ManifestOptions other than the
// cluster's spec.agentEnvVars and the agent triple.
type Options struct {
	// Namespace of the workload (Fleet: the agent namespace,
	// cattle-fleet-system by default).
	Namespace string
	// AgentScope, rendered as AGENT_SCOPE ("" unless the agent namespace
	// is not the default; v0.14.10 manageagent.go:334).
	AgentScope string
	// CheckinInterval: cfg.AgentCheckinInterval.Duration.String() (v0.14.10
	// manageagent.go:350); the chart's agentCheckinInterval is "15m".
	CheckinInterval string
	// BundleDeploymentWorkers and DriftWorkers (v0.11.3+): the chart's
	// agent.reconciler.workers, "50" each (v0.14.10 charts/fleet/values.yaml:153-154).
	BundleDeploymentWorkers, DriftWorkers string
	// AgentReplicas (v0.13+): FLEET_AGENT_REPLICA_COUNT, 1 by default.
	AgentReplicas int32
	// Image of every container.
	Image string
	// CopyResourcesDownstream (v0.14.0-v0.15.x): whether
	// EXPERIMENTAL_COPY_RESOURCES_DOWNSTREAM parses as true in
	// fleet-agentmanagement's own env.
	CopyResourcesDownstream bool
	// WranglerCheckGVKErrorMapping (v0.15.2+): the value of
	// CATTLE_WRANGLER_CHECK_GVK_ERROR_MAPPING in fleet-agentmanagement's own
	// env ("" = unset: nothing rendered).
	WranglerCheckGVKErrorMapping string
}

// DefaultOptions are the chart's defaults for a release.
func DefaultOptions(version string) Options {
	return Options{
		Namespace:               "cattle-fleet-system",
		CheckinInterval:         (15 * time.Minute).String(),
		BundleDeploymentWorkers: "50",
		DriftWorkers:            "50",
		AgentReplicas:           1,
		Image:                   "rancher/fleet-agent:" + version,
	}
}

// layout is what a Fleet release's agent manifest renders, as far as env is
// concerned.
type layout int

const (
	layoutV09       layout = iota // v0.9.x
	layoutV10                     // v0.10.0-v0.11.2
	layoutV11Worker               // v0.11.3-v0.11.x
	layoutV12                     // v0.12.x
	layoutV13                     // v0.13.x
	layoutV14                     // v0.14.0-v0.15.1
	layoutV152                    // v0.15.2-v0.15.x
	layoutV16                     // v0.16.x and later
)

// parse maps a release ("v0.14.10", "0.14.10", or "v0.10" meaning the last
// patch of that minor) to its layout.
func parse(version string) (layout, error) {
	s := strings.TrimPrefix(version, "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "0" {
		return 0, fmt.Errorf("fleetagent: unknown Fleet version %q (want v0.9.x-v0.16.x)", version)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0, fmt.Errorf("fleetagent: version %q: %w", version, err)
	}
	patch := 1 << 30 // "v0.10": the latest patch
	if len(parts) == 3 {
		if patch, err = strconv.Atoi(parts[2]); err != nil {
			return 0, fmt.Errorf("fleetagent: version %q: %w", version, err)
		}
	}
	switch {
	case minor == 9:
		return layoutV09, nil
	case minor == 10 || (minor == 11 && patch < 3):
		return layoutV10, nil
	case minor == 11:
		return layoutV11Worker, nil
	case minor == 12:
		return layoutV12, nil
	case minor == 13:
		return layoutV13, nil
	case minor == 14 || (minor == 15 && patch < 2):
		return layoutV14, nil
	case minor == 15:
		return layoutV152, nil
	case minor >= 16:
		return layoutV16, nil
	}
	return 0, fmt.Errorf("fleetagent: Fleet version %q is not modelled (want v0.9.x-v0.16.x)", version)
}

// IsStatefulSet reports whether the release renders the agent as a
// StatefulSet (v0.10.0-v0.11.x: agentApp returns *appsv1.StatefulSet,
// v0.10.16 manifest.go:152, v0.11.14 manifest.go:155; v0.12.0 manifest.go:143
// returns a Deployment again). It panics on an unknown version.
func IsStatefulSet(version string) bool {
	l := mustParse(version)
	return l == layoutV10 || l == layoutV11Worker
}

// RendersElectionEnv reports whether the release's agent manifest renders
// CATTLE_ELECTION_* itself (v0.12+). It panics on an unknown version.
func RendersElectionEnv(version string) bool { return mustParse(version) >= layoutV12 }

func mustParse(version string) layout {
	l, err := parse(version)
	if err != nil {
		panic(err)
	}
	return l
}

// Render returns the agent workload Fleet renders for a cluster, with the
// chart's default options, as a Deployment: for v0.10-v0.11, which render a
// StatefulSet, a Deployment with the StatefulSet's pod template (Object
// returns the StatefulSet itself). agentTriple is the agent triple
// (FLEET_AGENT_ELECTION_* on fleet-agentmanagement; read by v0.13+ only),
// agentEnvVars the cluster's spec.agentEnvVars. It panics on an unknown
// version.
func Render(version string, agentTriple election.Timings, agentEnvVars []corev1.EnvVar) *appsv1.Deployment {
	return RenderWith(version, agentTriple, agentEnvVars, DefaultOptions(version))
}

// RenderWith is Render with explicit options.
func RenderWith(version string, agentTriple election.Timings, agentEnvVars []corev1.EnvVar, o Options) *appsv1.Deployment {
	switch obj := Object(version, agentTriple, agentEnvVars, o).(type) {
	case *appsv1.Deployment:
		return obj
	case *appsv1.StatefulSet:
		return &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: obj.ObjectMeta,
			Spec:       appsv1.DeploymentSpec{Selector: obj.Spec.Selector, Template: obj.Spec.Template},
		}
	}
	panic("unreachable")
}

// Object returns the agent workload exactly as the release renders it: a
// *appsv1.Deployment, or for v0.10-v0.11 a *appsv1.StatefulSet. TypeMeta
// is set, as wrangler's yaml.Export sets it on the Bundle's copy. It panics
// on an unknown version.
func Object(version string, agentTriple election.Timings, agentEnvVars []corev1.EnvVar, o Options) runtime.Object {
	l := mustParse(version)
	// Fleet appends the same slice to every container: give each its own
	// copy so a caller editing one container does not edit the others.
	clusterEnv := func() []corev1.EnvVar {
		if agentEnvVars == nil {
			return nil
		}
		return append([]corev1.EnvVar(nil), agentEnvVars...)
	}
	switch l {
	case layoutV09:
		return renderV09(o, clusterEnv)
	case layoutV10, layoutV11Worker:
		return renderV10(l, o, clusterEnv)
	default:
		return renderV12(l, agentTriple, o, clusterEnv)
	}
}

func namespaceFromField() corev1.EnvVar {
	return corev1.EnvVar{Name: EnvNamespace, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}
}

func podSecurityContext() *corev1.PodSecurityContext {
	t, uid := true, int64(1000)
	return &corev1.PodSecurityContext{RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &uid}
}

func containerSecurityContext() *corev1.SecurityContext {
	f, t := false, true
	return &corev1.SecurityContext{AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &t, Privileged: &f,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

func labels() map[string]string { return map[string]string{"app": Name} }

// renderV09 models rancher/fleet v0.9.9 internal/cmd/controller/agent/manifest.go
// agentDeployment (lines 136-261; the same blob in v0.9.1-v0.9.18, and v0.9.0
// differs only in an import).
func renderV09(o Options, clusterEnv func() []corev1.EnvVar) runtime.Object {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: Name}, // :142-145
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels()}, // :147-151
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()}, // :153-157
				Spec: corev1.PodSpec{
					ServiceAccountName: Name, // :159
					Containers: []corev1.Container{{
						Name:  Name,    // :162
						Image: o.Image, // :163
						// rancher/fleet v0.9.9 internal/cmd/controller/agent/manifest.go:165-176
						Env: []corev1.EnvVar{
							namespaceFromField(),                                 // :166-173
							{Name: EnvAgentScope, Value: o.AgentScope},           // :174
							{Name: EnvCheckinInterval, Value: o.CheckinInterval}, // :175
						},
					}},
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"}, // :179
				},
			},
		},
	}
	// :217-231: the container loop ranges over copies
	// (`for _, container := range ...Containers`), so only the pod's
	// security context reaches the Deployment.
	d.Spec.Template.Spec.SecurityContext = podSecurityContext() // :226-230
	// rancher/fleet v0.9.9 internal/cmd/controller/agent/manifest.go:246-249:
	// "additional env vars from cluster", appended to container 0 only.
	if env := clusterEnv(); env != nil {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, env...)
	}
	return d
}

// renderV10 models agentApp of internal/cmd/controller/agentmanagement/agent/manifest.go
// at rancher/fleet v0.10.16 (lines 152-342; v0.10.0 lines 151-338 render the
// same env), v0.11.0 (lines 153-...; the same env) and, with the worker
// variables, v0.11.14 (lines 155-...; the blob of v0.11.3-v0.11.14).
func renderV10(l layout, o Options, clusterEnv func() []corev1.EnvVar) runtime.Object {
	// The fleet-agent container's own env.
	// rancher/fleet v0.10.16 internal/cmd/controller/agentmanagement/agent/manifest.go:203-213
	// (v0.11.0 :204-214): NAMESPACE, AGENT_SCOPE.
	agentEnv := []corev1.EnvVar{
		namespaceFromField(),                       // v0.10.16 :204-211
		{Name: EnvAgentScope, Value: o.AgentScope}, // v0.10.16 :212
	}
	if l == layoutV11Worker {
		// rancher/fleet v0.11.14 internal/cmd/controller/agentmanagement/agent/manifest.go:206-224
		// (first in v0.11.3): the two worker variables come first.
		agentEnv = append([]corev1.EnvVar{
			{Name: EnvBundleDeploymentWorkers, Value: o.BundleDeploymentWorkers}, // v0.11.14 :207-210
			{Name: EnvDriftWorkers, Value: o.DriftWorkers},                       // v0.11.14 :211-214
		}, agentEnv...) // then NAMESPACE :215-222, AGENT_SCOPE :223
	}
	s := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: Name}, // v0.10.16 :158-161
		Spec: appsv1.StatefulSetSpec{
			Selector:    &metav1.LabelSelector{MatchLabels: labels()}, // v0.10.16 :163-167
			ServiceName: Name,                                         // v0.10.16 :168
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()}, // v0.10.16 :170-174
				Spec: corev1.PodSpec{
					ServiceAccountName: Name, // v0.10.16 :176
					// rancher/fleet v0.10.16 internal/cmd/controller/agentmanagement/agent/manifest.go:177-197
					// (v0.11.14 :180-200): the register init container, env NAMESPACE only.
					InitContainers: []corev1.Container{{
						Name:    Name + "-register", // v0.10.16 :179
						Image:   o.Image,
						Env:     []corev1.EnvVar{namespaceFromField()}, // v0.10.16 :182-191
						Command: []string{"fleetagent", "register"},    // v0.10.16 :192-195
					}},
					Containers: []corev1.Container{
						{
							Name:         Name, // v0.10.16 :200
							Image:        o.Image,
							Env:          agentEnv,
							Command:      []string{"fleetagent"},                                    // v0.10.16 :214-216
							VolumeMounts: []corev1.VolumeMount{{Name: "kube", MountPath: "/.kube"}}, // v0.10.16 :217-222
						},
						{
							// rancher/fleet v0.10.16 internal/cmd/controller/agentmanagement/agent/manifest.go:224-243
							// (v0.11.14 :235-254): NAMESPACE, CHECKIN_INTERVAL.
							Name:  Name + "-clusterstatus", // v0.10.16 :225
							Image: o.Image,
							Env: []corev1.EnvVar{
								namespaceFromField(), // v0.10.16 :229-236
								{Name: EnvCheckinInterval, Value: o.CheckinInterval}, // v0.10.16 :237
							},
							Command: []string{"fleetagent", "clusterstatus"}, // v0.10.16 :239-242
						},
					},
					Volumes: []corev1.Volume{{Name: "kube", VolumeSource: corev1.VolumeSource{
						EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, // v0.10.16 :245-252
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
				},
			},
		},
	}
	s.Spec.Template.Spec.SecurityContext = podSecurityContext() // v0.10.16 :291-297
	// rancher/fleet v0.10.16 internal/cmd/controller/agentmanagement/agent/manifest.go:310-339
	// (v0.11.0 :319-327, v0.11.14 :322-337): containers first, then init
	// containers, each gets the cluster's env appended (:324-327; v0.11.14
	// :336-337) and a security context (:332-337).
	ps := &s.Spec.Template.Spec
	for _, c := range podContainers(ps) {
		if env := clusterEnv(); env != nil {
			c.Env = append(c.Env, env...)
		}
		c.SecurityContext = containerSecurityContext()
	}
	return s
}

// renderV12 models agentApp of internal/cmd/controller/agentmanagement/agent/manifest.go
// at rancher/fleet v0.12.0 (lines 143-314), v0.13.0 (143-316), v0.14.10
// (146-326), v0.15.2 (147-...) and v0.16.1 (147-333).
func renderV12(l layout, triple election.Timings, o Options, clusterEnv func() []corev1.EnvVar) runtime.Object {
	// rancher/fleet v0.14.10 internal/cmd/controller/agentmanagement/agent/manifest.go:178-201
	// (v0.12.0 :172-194, v0.13.0 :174-196, v0.16.1 :180-202).
	env := []corev1.EnvVar{
		{Name: EnvBundleDeploymentWorkers, Value: o.BundleDeploymentWorkers}, // v0.14.10 :179-182
		{Name: EnvDriftWorkers, Value: o.DriftWorkers},                       // v0.14.10 :183-186
		namespaceFromField(),                                 // v0.14.10 :187-194
		{Name: EnvAgentScope, Value: o.AgentScope},           // v0.14.10 :195
		{Name: EnvCheckinInterval, Value: o.CheckinInterval}, // v0.14.10 :196
	}
	if l == layoutV12 {
		// rancher/fleet v0.12.0 internal/cmd/controller/agentmanagement/agent/manifest.go:191-193,
		// from the constants at :29-31: lease "30s", retry "10s", renew "25s".
		env = append(env,
			corev1.EnvVar{Name: EnvLeaseDuration, Value: "30s"},
			corev1.EnvVar{Name: EnvRetryPeriod, Value: "10s"},
			corev1.EnvVar{Name: EnvRenewDeadline, Value: "25s"})
	} else {
		// rancher/fleet v0.14.10 internal/cmd/controller/agentmanagement/agent/manifest.go:197-199
		// (v0.13.0 :193-195, v0.16.1 :199-201): opts.LeaseDuration.String(),
		// RetryPeriod, RenewDeadline, in that order.
		env = append(env,
			corev1.EnvVar{Name: EnvLeaseDuration, Value: triple.LeaseDuration.String()},
			corev1.EnvVar{Name: EnvRetryPeriod, Value: triple.RetryPeriod.String()},
			corev1.EnvVar{Name: EnvRenewDeadline, Value: triple.RenewDeadline.String()})
	}
	if l == layoutV14 || l == layoutV152 {
		// rancher/fleet v0.14.10 internal/cmd/controller/agentmanagement/agent/manifest.go:200
		// (added in v0.14.0, still in v0.15.2 :201, gone in v0.16.0).
		env = append(env, corev1.EnvVar{Name: EnvCopyResourcesDownstream, Value: strconv.FormatBool(o.CopyResourcesDownstream)})
	}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: Name}, // v0.14.10 :153-156
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels()}, // v0.14.10 :159-163
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()}, // v0.14.10 :165-169
				Spec: corev1.PodSpec{
					ServiceAccountName: Name, // v0.14.10 :172
					Containers: []corev1.Container{{
						Name:    Name, // v0.14.10 :175
						Image:   o.Image,
						Env:     env,
						Command: []string{"fleetagent"}, // v0.14.10 :202-204
						VolumeMounts: []corev1.VolumeMount{ // v0.14.10 :205-214
							{Name: "kube", MountPath: "/.kube"},
							{Name: "tmp", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{ // v0.14.10 :217-230
						{Name: "kube", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					NodeSelector: map[string]string{"kubernetes.io/os": "linux"}, // v0.14.10 :231
				},
			},
		},
	}
	if l >= layoutV13 {
		// rancher/fleet v0.14.10 internal/cmd/controller/agentmanagement/agent/manifest.go:150,158
		// (v0.13.0 :147,155): Replicas from opts.AgentReplicas; v0.12 sets none.
		r := o.AgentReplicas
		d.Spec.Replicas = &r
	}
	d.Spec.Template.Spec.SecurityContext = podSecurityContext() // v0.14.10 :269-275
	// rancher/fleet v0.14.10 internal/cmd/controller/agentmanagement/agent/manifest.go:293-323
	// (v0.12.0 :281-311, v0.13.0 :283-313, v0.16.1 :294-330): every
	// container, the cluster's env appended (v0.14.10 :307-310, v0.12.0
	// :295-298, v0.13.0 :297-300, v0.16.1 :315-317).
	for _, c := range podContainers(&d.Spec.Template.Spec) {
		if (l == layoutV152 || l == layoutV16) && o.WranglerCheckGVKErrorMapping != "" &&
			!named(clusterEnv(), EnvWranglerCheckGVKErrorMapping) {
			// rancher/fleet v0.16.1 internal/cmd/controller/agentmanagement/agent/manifest.go:309-314
			// (v0.15.2 :309-314), envVarPresent :335-342: only where the
			// cluster's entries do not name it, before them.
			c.Env = append(c.Env, corev1.EnvVar{Name: EnvWranglerCheckGVKErrorMapping, Value: o.WranglerCheckGVKErrorMapping})
		}
		if env := clusterEnv(); env != nil {
			c.Env = append(c.Env, env...)
		}
		c.SecurityContext = containerSecurityContext() // v0.14.10 :315-322
	}
	return d
}

func named(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// podContainers returns pointers to the containers then the init
// containers, the order Fleet's loop visits them (v0.14.10 :294-300).
func podContainers(ps *corev1.PodSpec) []*corev1.Container {
	var out []*corev1.Container
	for i := range ps.Containers {
		out = append(out, &ps.Containers[i])
	}
	for i := range ps.InitContainers {
		out = append(out, &ps.InitContainers[i])
	}
	return out
}

// PodSpec returns the pod spec of a Deployment or StatefulSet (nil for
// anything else).
func PodSpec(obj runtime.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	}
	return nil
}

// Duplicates returns, per container (init containers included), the env
// names that occur more than once in it; empty when there is none.
func Duplicates(ps *corev1.PodSpec) map[string][]string {
	out := map[string][]string{}
	for _, c := range podContainers(ps) {
		seen := map[string]int{}
		for _, e := range c.Env {
			seen[e.Name]++
			if seen[e.Name] == 2 {
				out[c.Name] = append(out[c.Name], e.Name)
			}
		}
	}
	return out
}

// Manifest returns obj as the agent's Bundle carries it, in JSON: what
// wrangler's yaml.Export (v3.3.1 pkg/yaml/yaml.go:138-224) writes — kind and
// apiVersion, metadata reduced to name, namespace, labels and annotations,
// no status — and so what helm decodes as the release's manifest.
func Manifest(obj runtime.Object) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]interface{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	md, _ := m["metadata"].(map[string]interface{})
	clean := map[string]interface{}{}
	for _, k := range []string{"name", "namespace", "labels", "annotations"} {
		if v, ok := md[k]; ok {
			clean[k] = v
		}
	}
	m["metadata"] = clean
	delete(m, "status")
	return json.Marshal(m)
}
