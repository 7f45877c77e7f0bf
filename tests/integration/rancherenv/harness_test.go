// Package rancherenv_test checks the rancherenv controller against a real
// kube-apiserver: the Rancher Deployment is installed and upgraded by the
// real helm CLI from a chart whose one template is what rancher/rancher's
// chart renders (../shared/fixtures/rancher, framework.RancherChart; every
// test runs once per release there, v2.11.3 and v2.15.0), the real
// settings Provider resolves the rancher-leader-election-* Settings, and a
// double of kube-controller-manager's Deployment controller keeps the
// Deployment's status (envtest runs no controller-manager).
package rancherenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rancher/lasso/pkg/cache"
	lassoclient "github.com/rancher/lasso/pkg/client"
	"github.com/rancher/wrangler/v2/pkg/generated/controllers/apps"
	"github.com/rancher/wrangler/v2/pkg/generic"
	"github.com/rancher/wrangler/v2/pkg/schemes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	rancherenvcontroller "leasetune.io/leasetune/pkg/controllers/rancherenv"
	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

var (
	cp      *framework.ControlPlane
	helmBin string
	// chartVersion is the Rancher release whose chart the tests run on.
	chartVersion string
)

// eachChart runs the package's tests once per Rancher release of
// framework.RancherChartVersions.
type eachChart struct{ m *testing.M }

func (e eachChart) Run() int {
	code := 0
	for _, v := range framework.RancherChartVersions {
		chartVersion = v
		fmt.Fprintf(os.Stderr, "rancherenv: the tests on Rancher %s's chart\n", v)
		if c := e.m.Run(); c != 0 {
			code = c
		}
	}
	return code
}

func TestMain(m *testing.M) {
	var err error
	if helmBin, err = framework.HelmPath(); err != nil {
		fmt.Fprintf(os.Stderr, "helm: %v\n", err)
		os.Exit(1)
	}
	os.Exit(framework.Main(eachChart{m}, &cp, framework.Options{RepoCRDs: []string{framework.SettingCRD}}))
}

// chartDir is Rancher's chart of the release under test, made from its
// rendered Deployment in ../shared/fixtures/rancher.
func chartDir(t *testing.T) string {
	t.Helper()
	t.Logf("Rancher %s's chart", chartVersion)
	return framework.RancherChart(t, chartVersion)
}

// kubeconfig writes an admin kubeconfig for helm, once per test.
func kubeconfig(t *testing.T) string {
	t.Helper()
	p, err := cp.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// helm runs the real helm CLI with the release "rancher" in ns.
func helm(t *testing.T, kc, ns string, args ...string) {
	t.Helper()
	full := append([]string{"--kubeconfig", kc, "--namespace", ns}, args...)
	cmd := exec.Command(helmBin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
}

// env is one test's namespaces and clients.
type env struct {
	ns, stateNS string
	kc          string
	mf          *management.Factory
	provider    *settings.Provider
	// triples, when set, is what the controller reads instead of provider.
	triples   settings.Triples
	deployCtl *deploymentController
}

// newEnv installs the Rancher chart with values, starts the Deployment
// controller double and the settings Provider (settle time 0, no env
// overrides): newEnvWith with no options.
func newEnv(t *testing.T, values ...string) *env {
	t.Helper()
	return newEnvWith(t, envOptions{}, values...)
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// set writes the value of a Setting, as kubectl or the Rancher UI does.
func (e *env) set(t *testing.T, name, value string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"value": value})
	if _, err := e.mf.Management().V3().Setting().Patch(name, types.MergePatchType, body); err != nil {
		t.Fatal(err)
	}
}

func (e *env) get(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := cp.Client.AppsV1().Deployments(e.ns).Get(context.Background(), "rancher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// running is a started rancherenv controller and the recorder of its
// client's writes.
type running struct {
	*framework.Recorder
	cancel context.CancelFunc
}

// start runs the controller as the manager wires it, recording its
// client's writes, and fails the test on a write to anything but the
// Rancher Deployment. hook, when not nil, runs once, synchronously, just
// before the first write reaches the apiserver, to put another writer
// between leasetune's read and its write.
func (e *env) start(t *testing.T, hook func()) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var once sync.Once
	cfg := rest.CopyConfig(cp.Config)
	rec := framework.Record(cfg, framework.Before(func(q framework.Request) {
		if hook != nil {
			once.Do(hook)
		}
	}))
	want := "/apis/apps/v1/namespaces/" + e.ns + "/deployments/rancher"
	t.Cleanup(func() {
		for _, q := range rec.Requests() {
			if q.Method != http.MethodPatch || q.Path != want {
				t.Errorf("leasetune wrote %s; it may only patch %s", q, want)
			}
		}
	})
	e.register(t, ctx, cfg)
	return &running{Recorder: rec, cancel: cancel}
}

func (e *env) triplesRead() settings.Triples {
	if e.triples != nil {
		return e.triples
	}
	return e.provider
}

// register runs the controller until ctx ends as the manager wires it: a
// wrangler Deployment informer on the one Deployment by name, in the
// Rancher namespace; its writes go through a client built from cfg.
func (e *env) register(t *testing.T, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	clients, err := lassoclient.NewSharedClientFactory(cp.Config, &lassoclient.SharedClientFactoryOptions{Scheme: schemes.All})
	if err != nil {
		t.Fatal(err)
	}
	af, err := apps.NewFactoryFromConfigWithOptions(cp.Config, &generic.FactoryOptions{
		SharedCacheFactory: cache.NewSharedCachedFactory(clients, &cache.SharedCacheFactoryOptions{
			DefaultNamespace: e.ns,
			DefaultTweakList: func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", "rancher").String()
			},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	rancherenvcontroller.Register(ctx, rancherenvcontroller.Options{
		Namespace: e.ns, Name: "rancher", Deployments: af.Apps().V1().Deployment(),
		Client: kubernetes.NewForConfigOrDie(cfg), Triples: e.triplesRead(),
		Recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"}), Log: quietLog(),
	})
	if err := af.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// deploymentController is a double of kube-controller-manager's Deployment
// controller (k8s.io/kubernetes pkg/controller/deployment), reduced to what
// rancherenv reads: when a Deployment's spec changes (generation), it
// records observedGeneration and, unless held, reports the rollout done
// (every replica updated and available, Available true), as
// syncRolloutStatus does once the new ReplicaSet is ready; while held it
// reports a rollout in progress (one replica updated, one unavailable,
// maxSurge 1). It counts rollouts: changes of spec.template, each of which
// makes a new ReplicaSet and replaces every pod.
type deploymentController struct {
	mu        sync.Mutex
	held      bool
	templates map[string]string // last template seen, by name
	rollouts  int
	kick      chan struct{}
}

func startDeploymentController(t *testing.T, ctx context.Context, ns string) *deploymentController {
	t.Helper()
	dc := &deploymentController{templates: map[string]string{}, kick: make(chan struct{}, 1)}
	go func() {
		for ctx.Err() == nil {
			dc.syncAll(ctx, ns)
			select {
			case <-ctx.Done():
			case <-dc.kick:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return dc
}

func (dc *deploymentController) syncAll(ctx context.Context, ns string) {
	l, err := cp.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range l.Items {
		d := &l.Items[i]
		tmpl, _ := json.Marshal(d.Spec.Template)
		dc.mu.Lock()
		if last, seen := dc.templates[d.Name]; seen && last != string(tmpl) {
			dc.rollouts++
		}
		dc.templates[d.Name] = string(tmpl)
		held := dc.held
		dc.mu.Unlock()
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: want, UpdatedReplicas: want,
			ReadyReplicas: want, AvailableReplicas: want,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
				Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."}}}
		if held {
			st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, st.UnavailableReplicas = want+1, 1, want-1, want-1, 2
		}
		if equalStatus(d.Status, st) {
			continue
		}
		d.Status = st
		_, _ = cp.Client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "deployment-controller"})
	}
}

func equalStatus(a, b appsv1.DeploymentStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Type != b.Conditions[i].Type || a.Conditions[i].Status != b.Conditions[i].Status {
			return false
		}
	}
	a.Conditions, b.Conditions = nil, nil
	return reflect.DeepEqual(a, b)
}

// hold makes the double report a rollout in progress (true) or done.
func (dc *deploymentController) hold(v bool) {
	dc.mu.Lock()
	dc.held = v
	dc.mu.Unlock()
	select {
	case dc.kick <- struct{}{}:
	default:
	}
}

func (dc *deploymentController) count() int {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.rollouts
}

// electionEnv returns the rancher container's CATTLE_ELECTION_* entries,
// in order, as NAME=VALUE.
func electionEnv(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "rancher" {
			continue
		}
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "CATTLE_ELECTION_") {
				out = append(out, e.Name+"="+e.Value)
			}
		}
	}
	return out
}

// others returns d as kit.Stripped does, without the rancher container's
// CATTLE_ELECTION_* entries and leasetune's record: everything leasetune
// must leave exactly as it was.
func others(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	return kit.Stripped(t, d, kit.WithoutAnnotations(rancherenv.RecordAnnotation),
		kit.WithoutEnv(func(_, name string) bool { return strings.HasPrefix(name, "CATTLE_ELECTION_") }))
}
