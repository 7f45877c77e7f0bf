package prometheus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/dashboard"
	"leasetune.io/leasetune/tests/integration/framework"

	"leasetune.io/leasetune/tests/kit"
)

// settle is the controller's settle time: the three Settings of a triple,
// patched one after the other well within it, make one change.
const settle = 2 * time.Second

// env is what the tests share: a Rancher installation with Fleet v0.9.9
// (whose agents read each cluster's spec.agentEnvVars, so that an agent
// triple change writes clusters and restarts their agents), leasetune's
// controller in this process with its metrics and webhook servers, and a
// Prometheus scraping the controller and the kube-apiserver.
type env struct {
	ns, fleetNS, rancherNS, clusterNS string
	metricsAddr, webhookAddr          string
	dash                              *dashboard.Dashboard
	prom                              *promServer
	promStarted                       time.Time
	dir                               string
	cancel                            context.CancelFunc
	done                              chan error
}

var (
	envOnce sync.Once
	envErr  string
)

// sharedEnv returns the shared env, starting it on the first call; it skips
// t when there is no Prometheus and fails it when starting failed (in this
// test or an earlier one).
func sharedEnv(t *testing.T) *env {
	t.Helper()
	if noPrometheus != "" {
		kit.SkipUnlessRequired(t, "prometheus", noPrometheus)
	}
	envOnce.Do(func() {
		envErr = "the shared installation did not start (see the first test's failure)"
		start(t)
		envErr = ""
	})
	if envErr != "" {
		t.Fatal(envErr)
	}
	return shared
}

// namespace creates a namespace that lives as long as the control plane
// (the shared installation outlives any one test).
func namespace(t *testing.T) string {
	t.Helper()
	ns, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "prom-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// start seeds the installation, runs the controller and Prometheus, and
// stores them in shared (TestMain stops what was started, also when start
// fails half-way).
func start(t *testing.T) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := dashboard.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "leasetune-prom-env-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{ns: namespace(t), fleetNS: namespace(t), rancherNS: namespace(t), clusterNS: namespace(t),
		metricsAddr: framework.FreeAddr(t), webhookAddr: framework.FreeAddr(t), dash: d, dir: dir, done: make(chan error, 1)}
	shared = e
	e.seed(t)

	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + e.ns + ":leasetune", Groups: []string{"system:masters"}}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		e.done <- manager.Run(ctx, sa, manager.Config{
			Namespace: e.ns, FleetNamespace: e.fleetNS, RancherNamespace: e.rancherNS,
			RancherDeployment: "rancher", RancherEnv: true,
			QPS: 100, Burst: 200, Workers: 2, Settle: settle,
			LeaderElection: true, LeaseName: "leasetune", Identity: "prometheus-test", Timings: manager.DefaultTimings,
			MetricsAddr: e.metricsAddr,
			WebhookAddr: e.webhookAddr, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"},
			CertCheckInterval: time.Second, WebhookConfigName: "leasetune",
			ServiceAccount: "system:serviceaccount:" + e.ns + ":leasetune",
			LookupEnv:      func(string) (string, bool) { return "", false },
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	framework.Eventually(t, "settings created", func() bool {
		l, err := e.dyn().Resource(framework.SettingsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == len(settings.Registry)
	})

	host, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	e.promStarted = time.Now()
	e.prom, err = startPrometheus(dir, []target{{job: "apiserver", addr: host.Host, tls: true}, {job: "leasetune", addr: e.metricsAddr}})
	if err != nil {
		t.Fatal(err)
	}
}

// stop stops Prometheus and the controller and removes Prometheus's data.
func (e *env) stop() {
	if e.prom != nil {
		e.prom.stop()
	}
	if e.cancel != nil {
		e.cancel()
		if err := <-e.done; err != nil {
			fmt.Fprintf(os.Stderr, "the controller after cancel: %v\n", err)
		}
	}
	_ = os.RemoveAll(e.dir)
}

func (e *env) dyn() dynamic.Interface { return dynamic.NewForConfigOrDie(cp.Config) }

// The clusters of the installation, as leasetune sees them on Fleet
// v0.9.9: two standalone fleet Clusters, one with override annotations
// that make an invalid triple (left alone), a legacy Rancher cluster
// (management Cluster c-xxxxx: fleet-agent and cattle-cluster-agent) and
// an RKE2 cluster Rancher provisions (provisioning Cluster: also a new
// node plan).
const invalidCluster = "edge-invalid"

// seed creates the Fleet v0.9.9 Deployments, rancher-config, the Rancher
// Deployment (v2.11.3, rolled out) and the clusters.
func (e *env) seed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dyn := e.dyn()
	cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.9.9"))
	cp.SeedRancherConfig(t, e.rancherNS)
	create := func(gvr schema.GroupVersionResource, ns, name string, spec map[string]interface{}, labels, ann map[string]string) *unstructured.Unstructured {
		t.Helper()
		return cp.CreateKept(t, gvr, framework.Cluster(gvr, ns, name, spec, labels, ann)) // the package's tests share them
	}
	none := map[string]interface{}{}
	create(fleet.ClusterGVR, e.clusterNS, "edge-1", none, nil, nil)
	create(fleet.ClusterGVR, e.clusterNS, invalidCluster, none, nil,
		map[string]string{agentenv.RenewDeadlineAnnotation: "50s"}) // beyond any lease duration the tests set
	suffix := strings.TrimPrefix(e.clusterNS, "prom-") // 5 lowercase alphanumerics
	legacy, prov := "c-"+suffix, "c-m-"+suffix
	create(rancher.ManagementClusterGVR, "", legacy, none, nil, nil)
	create(fleet.ClusterGVR, e.clusterNS, "legacy", none, map[string]string{rancher.ClusterNameLabel: legacy}, nil)
	create(rancher.ManagementClusterGVR, "", prov, none, nil, nil)
	p := create(rancher.ProvisioningClusterGVR, e.clusterNS, "rke2", map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1", "rkeConfig": none}, nil, nil)
	_ = unstructured.SetNestedField(p.Object, prov, "status", "clusterName")
	if _, err := dyn.Resource(rancher.ProvisioningClusterGVR).Namespace(e.clusterNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(fleet.ClusterGVR, e.clusterNS, "rke2", none, map[string]string{rancher.ClusterNameLabel: prov}, nil)

	// The Rancher Deployment, rolled out (envtest runs no Deployment
	// controller: the status is set here), whose CATTLE_ELECTION_*
	// leasetune keeps on the rancher-leader-election-* settings.
	one := int32(1)
	rd, err := cp.Client.AppsV1().Deployments(e.rancherNS).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rancher"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rancher"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "rancher", Image: "rancher/rancher:v2.11.3",
					Env: []corev1.EnvVar{{Name: "CATTLE_NAMESPACE", Value: e.rancherNS}}}}}}},
	}, metav1.CreateOptions{FieldManager: "helm"})
	if err != nil {
		t.Fatal(err)
	}
	rd.Status = appsv1.DeploymentStatus{ObservedGeneration: rd.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := cp.Client.AppsV1().Deployments(e.rancherNS).UpdateStatus(ctx, rd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// patchSettings sets Setting values as an admin would with kubectl, one
// after the other (pairs of name and value).
func (e *env) patchSettings(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		body, _ := json.Marshal(map[string]string{"value": pairs[i+1]})
		if _, err := e.dyn().Resource(framework.SettingsGVR).Patch(context.Background(), pairs[i], types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch %s=%s: %w", pairs[i], pairs[i+1], err)
		}
	}
	return nil
}

// dashboardQuery returns the dashboard's query whose expression uses
// metric (the first one, in the file's order) and fails t when there is
// none: the tests evaluate the panels' own queries, not copies of them.
func (e *env) dashboardQuery(t *testing.T, metric string) dashboard.Query {
	t.Helper()
	for _, q := range e.dash.Queries() {
		if regexp.MustCompile(`\b` + regexp.QuoteMeta(metric) + `\b`).MatchString(q.Expr) {
			return q
		}
	}
	t.Fatalf("no query of the dashboard uses %s", metric)
	return dashboard.Query{}
}

// expand is dashboard.Expand, failing t on an error.
func expand(t *testing.T, q dashboard.Query, window time.Duration) string {
	t.Helper()
	s, err := dashboard.Expand(q.Expr, window)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// event is an Event's message and how many times it was recorded.
type event struct {
	message string
	count   int
}

// events returns the Events with reason about the object name in ns ("":
// a cluster-scoped object, whose Events go to "default"); with name "",
// every Event with reason in any namespace (this package's tests share one
// installation, so all are its).
func events(t *testing.T, ns, name, reason string) []event {
	t.Helper()
	sel := "reason=" + reason
	switch {
	case name == "":
		ns = metav1.NamespaceAll
	case ns == "":
		ns = metav1.NamespaceDefault
		fallthrough
	default:
		sel += ",involvedObject.name=" + name
	}
	l, err := cp.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, ev := range l.Items {
		n := int(ev.Count)
		if n == 0 {
			n = 1
		}
		out = append(out, event{message: ev.Message, count: n})
	}
	return out
}

// ints returns the integers the regular expression's groups match in s,
// or nil when it does not match.
func ints(re *regexp.Regexp, s string) []int {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return nil
	}
	out := make([]int, 0, len(m)-1)
	for _, g := range m[1:] {
		n, err := strconv.Atoi(g)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}
