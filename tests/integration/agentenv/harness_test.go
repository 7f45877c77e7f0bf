package agentenv_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
)

// triples and channels are the framework's doubles of the Provider and
// of the channel detection.
type triples = framework.AgentTriples

type channels = framework.FixedChannel

func newTriples(t election.Timings) *triples { return framework.NewAgentTriples(t) }

// writeCounter counts non-GET requests.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		w.writes.Add(1)
	}
	return w.next.RoundTrip(r)
}

type running struct {
	*agentenv.Controller
	writes *writeCounter
	cancel context.CancelFunc
}

// start runs a controller with the given global agent triple and channel.
func start(t *testing.T, tr *triples, ch fleet.AgentChannel, tweak ...func(*agentenv.Options)) *running {
	t.Helper()
	wc := &writeCounter{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { wc.next = rt; return wc }
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Client.CoreV1().Events("")})
	stream, err := agentenv.NewRESTClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := agentenv.Options{
		Client: dynamic.NewForConfigOrDie(cfg), Stream: stream, Rancher: true, Triples: tr, Channels: channels(ch),
		Recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"}),
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, f := range tweak {
		f(&opts)
	}
	c := agentenv.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	r := &running{Controller: c, writes: wc, cancel: func() { cancel(); <-done; b.Shutdown() }}
	t.Cleanup(r.cancel)
	eventually(t, "caches synced", c.HasSynced)
	return r
}

// settle waits until the queue is empty and no write happened for a while,
// and returns the number of writes so far.
func (r *running) settle() int64 {
	last := int64(-1)
	for {
		time.Sleep(300 * time.Millisecond)
		n := r.writes.writes.Load()
		if n == last && r.QueueLen() == 0 {
			return n
		}
		last = n
	}
}

var (
	fleetGVR = agentenv.FleetClusterGVR
	provGVR  = agentenv.ProvisioningClusterGVR
	mgmtGVR  = agentenv.ManagementClusterGVR
)

func res(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	d := dynamic.NewForConfigOrDie(cp.Config)
	if ns == "" {
		return d.Resource(gvr)
	}
	return d.Resource(gvr).Namespace(ns)
}

// fleetCluster builds a fleet Cluster with the agent customizations users
// set, to check they survive exactly.
func fleetCluster(ns, name string, labels, annotations map[string]string, env ...map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"spec": map[string]interface{}{
			"agentNamespace":   "cattle-fleet-system",
			"agentTolerations": []interface{}{map[string]interface{}{"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoSchedule"}},
			"agentAffinity": map[string]interface{}{"nodeAffinity": map[string]interface{}{"preferredDuringSchedulingIgnoredDuringExecution": []interface{}{
				map[string]interface{}{"weight": int64(1), "preference": map[string]interface{}{"matchExpressions": []interface{}{
					map[string]interface{}{"key": "node-role.kubernetes.io/edge", "operator": "Exists"}}}}}}},
			"agentResources": map[string]interface{}{"limits": map[string]interface{}{"memory": "256Mi"}, "requests": map[string]interface{}{"cpu": "50m"}},
		},
	}}
	if len(env) > 0 {
		var l []interface{}
		for _, e := range env {
			l = append(l, e)
		}
		u.Object["spec"].(map[string]interface{})["agentEnvVars"] = l
	}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// create creates u and deletes it when the test ends: envtest runs no
// namespace controller, so objects outlive their test's namespace, and
// every controller a later test starts would see them.
func create(t *testing.T, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := res(gvr, u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	t.Cleanup(func() {
		_ = res(gvr, u.GetNamespace()).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
	return out
}

func getObj(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := res(gvr, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// annotate sets (value != nil) or removes override annotations with a merge patch.
func annotate(t *testing.T, gvr schema.GroupVersionResource, ns, name string, ann map[string]interface{}) {
	t.Helper()
	body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	if _, err := res(gvr, ns).Patch(context.Background(), name, "application/merge-patch+json", body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// envOf returns spec.agentEnvVars as name=value strings.
func envOf(u *unstructured.Unstructured) []string {
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	var out []string
	for _, it := range l {
		m := it.(map[string]interface{})
		v, _ := m["value"].(string)
		if _, from := m["valueFrom"]; from {
			v = "<valueFrom>"
		}
		out = append(out, m["name"].(string)+"="+v)
	}
	return out
}

// specWithoutEnv is the JSON of spec without agentEnvVars.
func specWithoutEnv(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	delete(spec, "agentEnvVars")
	b, _ := json.Marshal(spec)
	return string(b)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	framework.Eventually(t, what, cond)
}

// events lists the messages of Events with reason on the object named name in ns.
func events(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	return cp.Events(t, ns, name, reason)
}

func mustTimings(l, r, p string) election.Timings {
	t, err := election.Parse(l, r, p)
	if err != nil || t.Validate() != nil {
		panic("bad test timings")
	}
	return t
}

// startIndexes starts two indexes of the fleet Clusters until the test
// ends: one reading through the stream decoder, as the controller runs,
// and one decoding whole objects; it returns once both have synced.
func startIndexes(t *testing.T) (streamed, whole *agentenv.Index) {
	t.Helper()
	stream, err := agentenv.NewRESTClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	streamed = agentenv.NewIndex(dynamic.NewForConfigOrDie(cp.Config), stream)
	whole = agentenv.NewIndex(dynamic.NewForConfigOrDie(cp.Config), nil)
	streamed.Start(ctx)
	whole.Start(ctx)
	eventually(t, "both indexes synced", func() bool { return streamed.HasSynced() && whole.HasSynced() })
	return streamed, whole
}
