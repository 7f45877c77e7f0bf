package agentenv_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

type running struct {
	*agentenvcontroller.Controller
	t      *testing.T
	writes *framework.Recorder
	cancel context.CancelFunc
}

// start runs a controller with the given global agent triple and channel.
func start(t *testing.T, tr *fakes.Triples, ch fleet.AgentChannel, tweak ...func(*agentenvcontroller.Options)) *running {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	wc := framework.Record(cfg)
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Client.CoreV1().Events("")})
	stream, err := slim.NewRESTClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := agentenvcontroller.Options{
		Client: dynamic.NewForConfigOrDie(cfg), Stream: stream, Rancher: true, Triples: tr, Channels: fakes.Channel(ch),
		Recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"}),
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, f := range tweak {
		f(&opts)
	}
	c := agentenvcontroller.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	r := &running{Controller: c, t: t, writes: wc, cancel: func() { cancel(); <-done; b.Shutdown() }}
	t.Cleanup(r.cancel)
	framework.Eventually(t, "caches synced", c.HasSynced)
	return r
}

// idle reports whether the controller's queue is empty.
func (r *running) idle() bool { return r.QueueLen() == 0 }

// settle waits until the queue is empty and nothing has been written for
// framework.QuietWindow, failing the test after framework.QuietDeadline,
// and returns the number of writes so far.
func (r *running) settle() int {
	r.t.Helper()
	return r.writes.Settle(r.t, r.idle)
}

var (
	fleetGVR = fleet.ClusterGVR
	provGVR  = rancher.ProvisioningClusterGVR
	mgmtGVR  = rancher.ManagementClusterGVR
)

// fleetCluster is kit.FleetCluster with kit.FleetAgentCustomization (the
// agent customizations users set, to check they survive exactly), then
// opts.
func fleetCluster(ns, name string, opts ...kit.ClusterOption) *unstructured.Unstructured {
	return kit.FleetCluster(ns, name, append([]kit.ClusterOption{kit.WithSpec(kit.FleetAgentCustomization())}, opts...)...)
}

func getObj(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := cp.Resource(gvr, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// annotate sets (value != nil) or removes override annotations with a merge patch.
func annotate(t *testing.T, gvr schema.GroupVersionResource, ns, name string, ann map[string]interface{}) {
	t.Helper()
	body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	if _, err := cp.Resource(gvr, ns).Patch(context.Background(), name, "application/merge-patch+json", body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// notEnv leaves out, for kit.Stripped, all but a cluster object's spec,
// and its spec.agentEnvVars: what the agents' customizations are.
var notEnv = []kit.StripOption{kit.WithoutMetadata(), kit.WithoutSpec("agentEnvVars")}

// startIndexes starts two indexes of the fleet Clusters until the test
// ends: one reading through the stream decoder, as the controller runs,
// and one decoding whole objects; it returns once both have synced.
func startIndexes(t *testing.T) (streamed, whole *index.Index) {
	t.Helper()
	stream, err := slim.NewRESTClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	streamed = index.New(dynamic.NewForConfigOrDie(cp.Config), stream)
	whole = index.New(dynamic.NewForConfigOrDie(cp.Config), nil)
	streamed.Start(ctx)
	whole.Start(ctx)
	framework.Eventually(t, "both indexes synced", func() bool { return streamed.HasSynced() && whole.HasSynced() })
	return streamed, whole
}
