package agentenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// These tests try to break the stream decoder (wire.go) against the real
// kube-apiserver, and the first pass's Event summary.

// rawCreate creates a fleet Cluster from raw JSON (bytes encoding/json
// would not write: escapes, unsorted keys, spaces, other number
// spellings), as kubectl or any client may send them, and deletes it
// (finalizers removed) when the test ends.
func rawCreate(t *testing.T, rc rest.Interface, ns, name, body string) {
	t.Helper()
	err := rc.Post().AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", ns, "clusters").
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
	if err != nil {
		t.Fatalf("create %s: %v\n%s", name, err, body[:min(len(body), 400)])
	}
	t.Cleanup(func() { removeWithFinalizers(ns, name) })
}

func removeWithFinalizers(ns, name string) {
	_, _ = cp.Resource(fleetGVR, ns).Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	_ = cp.Resource(fleetGVR, ns).Delete(context.Background(), name, metav1.DeleteOptions{})
}

func rawPatch(t *testing.T, rc rest.Interface, ns, name, body string) {
	t.Helper()
	err := rc.Patch(types.MergePatchType).AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", ns, "clusters", name).
		Body([]byte(body)).Do(context.Background()).Error()
	if err != nil {
		t.Fatalf("patch %s: %v\n%s", name, err, body[:min(len(body), 400)])
	}
}

func cachedIn(ix *index.Index, key string) *unstructured.Unstructured {
	o, ok, _ := ix.Informer().GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	return o.(*unstructured.Unstructured)
}

// agree waits until both caches hold the live object at its
// resourceVersion, then checks that the stream copy, the whole-decode copy
// and the live GET give one fingerprint, and that the two slim copies are
// the same. It returns the fingerprint.
func agree(t *testing.T, streamed, whole *index.Index, ns, name string) string {
	t.Helper()
	live := getObj(t, fleetGVR, ns, name)
	key := ns + "/" + name
	framework.Eventually(t, name+" cached at the live resourceVersion", func() bool {
		s, w := cachedIn(streamed, key), cachedIn(whole, key)
		return s != nil && w != nil && s.GetResourceVersion() == live.GetResourceVersion() && w.GetResourceVersion() == live.GetResourceVersion()
	})
	s, w := cachedIn(streamed, key), cachedIn(whole, key)
	fp := slim.Fingerprint(live)
	if fp == "" || slim.Fingerprint(s) != fp || slim.Fingerprint(w) != fp {
		b, _ := json.Marshal(live.Object)
		t.Errorf("%s: fingerprints live %q, streamed %q, decoded whole %q\nlive %s", name, fp, slim.Fingerprint(s), slim.Fingerprint(w), b[:min(len(b), 2000)])
	}
	if !reflect.DeepEqual(s.Object, w.Object) {
		t.Errorf("%s: slim copies differ:\nstreamed %v\nwhole    %v", name, s.Object, w.Object)
	}
	return fp
}

// trickyStrings are strings in every escape a client may send: \u
// escapes of non-ASCII, surrogate pairs, U+2028/9, escaped slashes,
// control characters, HTML.
const trickyStrings = `"\u00e9t\u00e9 \ud83d\ude00 😀 \u2028\u2029 \/path\/ <a href=\"x\">&amp;</a> \b\f\t\n\r \u0000\u0001\u001f \u007f \ufeff \\"`

// TestStreamBreakTrickyContentOnTheRealAPIServer: fleet Clusters created
// and patched with raw JSON the apiserver must normalize (escapes,
// unsorted keys, spaces, 1.0, -0.0, 1E5, integers beyond 2^53 and beyond
// int64, a large string, deep nesting, empty and null values, finalizers,
// ownerReferences): the stream cache, the whole-decode cache and a live GET
// give one fingerprint for each, listed and watched. So the apiserver
// serves only bytes encoding/json writes.
func TestStreamBreakTrickyContentOnTheRealAPIServer(t *testing.T) {
	ns := cp.Namespace(t)
	rc, err := slim.NewRESTClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(`{"d":[`, 300) + `"bottom"` + strings.Repeat(`]}`, 300)
	big := strings.Repeat(`\u00e9😀<&>\u2028`, 40000) // about 800 KB served
	head := func(name string) string {
		return ` { "kind" : "Cluster" , "apiVersion" : "fleet.cattle.io/v1alpha1" , "metadata" : { "namespace" : "` + ns + `" , "name" : "` + name + `" `
	}
	bodies := map[string]string{
		"uni": head("uni") + `, "labels" : {"z":"1", "` + rancher.ClusterNameLabel + `":"c-uni", "a":"x"}, "annotations" : {"note":` + trickyStrings +
			`, "` + agentenv.RetryPeriodAnnotation + `":"5\u0073", "leasetune.io/x":` + trickyStrings + `, "election.cattle.io/y":"\u003c\u003e"}},` +
			` "spec" : { "templateValues" : { "s" : ` + trickyStrings + `, ` + trickyStrings + ` : 1 }, "agentNamespace" : "cattle\/fleet", "kubeConfigSecret":"k\u0065y",` +
			` "agentEnvVars" : [ { "value" : ` + trickyStrings + ` , "name" : "NOTE" } ] } }`,
		"nums": head("nums") + `}, "spec" : { "redeployAgentGeneration" : 9007199254740993, "templateValues" : { "i53" : 9007199254740993, "imax" : 9223372036854775807,` +
			` "imin" : -9223372036854775808, "beyond" : 123456789012345678901234567890, "f" : 0.1, "one" : 1.0, "negzero" : -0.0, "nz" : -0, "e" : 1E5, "ep" : 1e+21,` +
			` "en" : 1.5e-7, "tiny" : 5e-324, "max" : 1.7976931348623157e308, "exp0" : 2.50e0, "frac" : 123456789.125000, "list" : [ 1 , 2.0 , -3e2 , 0.000001 ] } } }`,
		"empties": head("empties") + `, "labels" : {}, "annotations" : {} }, "spec" : { "templateValues" : { "o" : {}, "a" : [], "n" : null, "s" : "", "deep" : ` + deep + ` },` +
			` "agentTolerations" : [], "agentResources" : {}, "agentAffinity" : null, "agentEnvVars" : null, "paused" : false } }`,
		"meta": head("meta") + `, "finalizers" : [ "example.com/hold", "fleet.cattle.io/x" ], "ownerReferences" : [ { "uid" : "0e4b-1", "name" : "prod", "kind" : "Cluster",` +
			` "apiVersion" : "provisioning.cattle.io/v1", "controller" : true, "blockOwnerDeletion" : true } ] }, "spec" : { "agentEnvVars" : [ { "name" : "A", "value" : "b" } ] } }`,
		"big": head("big") + `, "annotations" : { "objectset.rio.cattle.io/applied" : "` + big[:len(big)/40000*8000] + `" } }, "spec" : { "templateValues" : { "blob" : "` + big + `" } } }`,
	}
	names := []string{"uni", "nums", "empties", "meta", "big"}
	for _, name := range names {
		rawCreate(t, rc, ns, name, bodies[name])
	}
	streamed, whole := startIndexes(t)
	fps := map[string]string{}
	for _, name := range names {
		fps[name] = agree(t, streamed, whole, ns, name) // by the list
	}
	// What the apiserver serves for the odd numbers, for the record.
	raw, err := rc.Get().AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", ns, "clusters", "nums").Do(context.Background()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(raw), `"templateValues"`); i >= 0 {
		t.Logf("served: %s", raw[i:])
	}

	// By the watch: raw patches of the same kinds, then changes that keep
	// the fingerprint (env, status subresource, the status annotation).
	rawPatch(t, rc, ns, "uni", `{ "metadata" : { "annotations" : { "note2" : `+trickyStrings+` } }, "spec" : { "templateValues" : { "t" : `+trickyStrings+` } } }`)
	rawPatch(t, rc, ns, "nums", `{"spec":{"templateValues":{"negzero":-0.0,"more":[1.0,-0,1E-7,18446744073709551616]}}}`)
	rawPatch(t, rc, ns, "empties", `{"spec":{"templateValues":{"o":{"x":{}},"deep":`+deep+`}}}`)
	rawPatch(t, rc, ns, "meta", `{"metadata":{"finalizers":["example.com/hold","example.com/h\u006fld2"]}}`)
	rawPatch(t, rc, ns, "big", `{"spec":{"templateValues":{"blob2":"\u2028"}}}`)
	for _, name := range names {
		if fp := agree(t, streamed, whole, ns, name); fp == fps[name] {
			t.Errorf("%s: a change of the spec or metadata kept the fingerprint", name)
		} else {
			fps[name] = fp
		}
	}
	for _, name := range names {
		rawPatch(t, rc, ns, name, `{"spec":{"agentEnvVars":[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"\u0037s"}]},"metadata":{"annotations":{"`+agentenv.StatusAnnotation+`":`+trickyStrings+`}}}`)
		err := rc.Patch(types.MergePatchType).AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", ns, "clusters", name, "status").
			Body([]byte(`{"status":{"display":{"readyBundles":"1\/1 \u00e9"},"summary":{"desiredReady":1.0}}}`)).Do(context.Background()).Error()
		if err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
	}
	for _, name := range names {
		if fp := agree(t, streamed, whole, ns, name); fp != fps[name] {
			t.Errorf("%s: a change of env, status and the status annotation changed the fingerprint", name)
		}
		s := cachedIn(streamed, ns+"/"+name)
		if l, _, _ := unstructured.NestedString(s.Object, "spec", "leasetune.io/agentEnvVars-json"); !strings.Contains(l, `"7s"`) {
			t.Errorf("%s: streamed env %q", name, l)
		}
	}
	// A relist: a new stream index lists what the old one watched.
	again, _ := startIndexes(t)
	for _, name := range names {
		if a, s := cachedIn(again, ns+"/"+name), cachedIn(streamed, ns+"/"+name); a == nil || !reflect.DeepEqual(a.Object, s.Object) {
			t.Errorf("%s: listed %v, watched %v", name, a, s)
		}
	}
}

// cutBody ends a watch's body after n bytes: a clean end (io.EOF) at an
// arbitrary byte, mostly inside an event, as a dropped connection or an
// apiserver restart does.
type cutBody struct {
	io.ReadCloser
	n int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.EOF
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.ReadCloser.Read(p)
	c.n -= n
	return n, err
}

type cutWatches struct {
	next           http.RoundTripper
	mu             sync.Mutex
	rnd            *rand.Rand
	watches, lists atomic.Int64
}

// expired is the ERROR event the apiserver sends a watch from a
// resourceVersion it no longer has: the reflector lists again.
const expired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n"

func (c *cutWatches) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil || !strings.Contains(r.URL.Path, "fleet.cattle.io") {
		return resp, err
	}
	if r.URL.Query().Get("watch") != "true" {
		c.lists.Add(1)
		return resp, err
	}
	if c.watches.Add(1)%4 == 0 { // every fourth watch: expired at once
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(expired))
		return resp, nil
	}
	c.mu.Lock()
	n := 300 + c.rnd.Intn(5000)
	c.mu.Unlock()
	resp.Body = &cutBody{ReadCloser: resp.Body, n: n}
	return resp, nil
}

// TestStreamBreakCutWatchesAndRelists: while the apiserver's watch streams
// are cut at random bytes (the reflector then watches again from the last
// resourceVersion the stream decoder gave it) or answered with a 410
// ERROR event (the reflector lists again), clusters are updated,
// deleted, and deleted and created again under the same name: the stream
// cache ends with exactly the live objects (uid, resourceVersion,
// fingerprint), like the whole-decode cache; and so does a new index
// started after more changes (a relist).
func TestStreamBreakCutWatchesAndRelists(t *testing.T) {
	ns := cp.Namespace(t)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cl := dynamic.NewForConfigOrDie(cfg).Resource(fleetGVR).Namespace(ns)
	const n = 20
	for i := 0; i < n; i++ {
		cp.Create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("w%02d", i), kit.WithLabels(map[string]string{rancher.ClusterNameLabel: fmt.Sprintf("c-w%02d", i)}), kit.WithEnv(user)))
	}
	seed := kit.Seed(t, 1)
	cut := &cutWatches{rnd: rand.New(rand.NewSource(seed))}
	scfg := rest.CopyConfig(cfg)
	scfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { cut.next = rt; return cut }
	stream, err := slim.NewRESTClient(scfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sctx, stopStreamed := context.WithCancel(ctx)
	streamed := index.New(dynamic.NewForConfigOrDie(cfg), stream)
	whole := index.New(dynamic.NewForConfigOrDie(cfg), nil)
	streamed.Start(sctx)
	whole.Start(ctx)
	framework.Eventually(t, "both indexes synced", func() bool { return streamed.HasSynced() && whole.HasSynced() })

	rnd := rand.New(rand.NewSource(seed + 1))
	gone := map[string]bool{}
	churn := func(rounds int) {
		for k := 0; k < rounds; k++ {
			name := fmt.Sprintf("w%02d", rnd.Intn(n))
			var err error
			switch op := rnd.Intn(10); {
			case gone[name]:
				u := fleetCluster(ns, name, kit.WithLabels(map[string]string{rancher.ClusterNameLabel: "c-" + name}))
				_, err = cl.Create(ctx, u, metav1.CreateOptions{})
				delete(gone, name)
			case op == 0:
				err = cl.Delete(ctx, name, metav1.DeleteOptions{})
				gone[name] = true
			case op == 1: // the same name, a new object
				if err = cl.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
					_, err = cl.Create(ctx, fleetCluster(ns, name, kit.WithAnnotations(map[string]string{"round": fmt.Sprint(k)})), metav1.CreateOptions{})
				}
			case op < 5:
				_, err = cl.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"round":"%d \u00e9\u2028<"}}}`, k)), metav1.PatchOptions{})
			case op < 8:
				_, err = cl.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"agentEnvVars":[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"%ds"}]}}`, k%30+1)), metav1.PatchOptions{})
			default:
				_, err = cl.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"templateValues":{"k":%d.5,"big":%d}}}`, k, int64(1)<<62+int64(k))), metav1.PatchOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("round %d %s: %v", k, name, err)
			}
		}
	}
	// converged: every cache of ixs holds exactly the live objects of ns.
	converged := func(ixs ...*index.Index) {
		t.Helper()
		var live *unstructured.UnstructuredList
		framework.Eventually(t, "caches hold the live objects", func() bool {
			l, err := cl.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			live = l
			for _, ix := range ixs {
				var keys []string
				for _, k := range ix.Informer().GetStore().ListKeys() {
					if strings.HasPrefix(k, ns+"/") {
						keys = append(keys, k)
					}
				}
				if len(keys) != len(l.Items) {
					return false
				}
				for i := range l.Items {
					c := cachedIn(ix, ns+"/"+l.Items[i].GetName())
					if c == nil || c.GetUID() != l.Items[i].GetUID() || c.GetResourceVersion() != l.Items[i].GetResourceVersion() {
						return false
					}
				}
			}
			return true
		})
		for i := range live.Items {
			fp := slim.Fingerprint(&live.Items[i])
			for j, ix := range ixs {
				if c := cachedIn(ix, ns+"/"+live.Items[i].GetName()); slim.Fingerprint(c) != fp {
					t.Errorf("index %d, %s: fingerprint %q, live %q", j, live.Items[i].GetName(), slim.Fingerprint(c), fp)
				}
			}
		}
	}
	churn(300)
	converged(streamed, whole)
	if w := cut.watches.Load(); w < 3 {
		t.Errorf("only %d watches: the cuts did not restart the stream's watch", w)
	} else {
		t.Logf("%d watches, %d list requests of the stream index", w, cut.lists.Load())
	}
	// Only the stream index's requests go through cut: its first list, and
	// one more after each expired watch (every fourth) that was followed.
	if w, l := cut.watches.Load(), cut.lists.Load(); w >= 4 && l < 2 {
		t.Errorf("%d watches but %d list requests: the expired watch made no relist", w, l)
	}

	// A relist: the stream index stopped, more changes, a new one.
	stopStreamed()
	churn(100)
	again := index.New(dynamic.NewForConfigOrDie(cfg), stream)
	again.Start(ctx)
	framework.Eventually(t, "new index synced", again.HasSynced)
	churn(50)
	converged(again, whole)
}

// eventLog is an EventRecorder that keeps every Event, for counting.
type eventLog struct {
	mu  sync.Mutex
	evs []loggedEvent
}

type loggedEvent struct{ kind, name, reason, msg string }

func (l *eventLog) Event(o runtime.Object, _, reason, msg string) {
	var name string
	if ref, ok := o.(*corev1.ObjectReference); ok {
		name = ref.Name
	} else if a, err := meta.Accessor(o); err == nil {
		name = a.GetName()
	}
	l.mu.Lock()
	l.evs = append(l.evs, loggedEvent{o.GetObjectKind().GroupVersionKind().Kind, name, reason, msg})
	l.mu.Unlock()
}

func (l *eventLog) Eventf(o runtime.Object, t, reason, f string, args ...interface{}) {
	l.Event(o, t, reason, fmt.Sprintf(f, args...))
}

func (l *eventLog) AnnotatedEventf(o runtime.Object, _ map[string]string, t, reason, f string, args ...interface{}) {
	l.Event(o, t, reason, fmt.Sprintf(f, args...))
}

func (l *eventLog) all() []loggedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedEvent(nil), l.evs...)
}

func (l *eventLog) with(reason string) []loggedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedEvent
	for _, e := range l.evs {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func recordTo(l *eventLog) func(*agentenvcontroller.Options) {
	return func(o *agentenvcontroller.Options) { o.Recorder = l }
}

// TestFirstPassBreakRestartOnConvergedClusters: the first start writes
// every cluster and sums that up in one Event per fleet-agent Setting; a
// restart beside the converged clusters writes nothing and raises no
// Event at all.
func TestFirstPassBreakRestartOnConvergedClusters(t *testing.T) {
	ns := cp.Namespace(t)
	for i := 0; i < 5; i++ {
		cp.Create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("r%d", i), kit.WithEnv(user)))
	}
	tr := fakes.AgentTriples(kit.Timings("60s", "50s", "20s"))
	first := &eventLog{}
	r := start(t, tr, fleet.ChannelClusterEnvV09, recordTo(first))
	r.settle()
	framework.Eventually(t, "first pass summed up", func() bool { return len(first.with(agentenvcontroller.ReasonPropagated)) == 3 })
	for _, e := range first.with(agentenvcontroller.ReasonPropagated) {
		if !strings.Contains(e.msg, "at leasetune's start") || !strings.Contains(e.msg, "5 cluster(s) had CATTLE_ELECTION_* written") {
			t.Errorf("first pass: %+v", e)
		}
	}
	if ev := first.with("AgentEnvUpdated"); len(ev) != 0 {
		t.Errorf("first pass: Events per cluster %v", ev)
	}
	r.cancel()
	second := &eventLog{}
	r2 := start(t, tr, fleet.ChannelClusterEnvV09, recordTo(second))
	r2.writes.NoWrites(t, "restart", framework.ConsistentlyMin, r2.idle)
	if n := r2.writes.Writes(); n != 0 {
		t.Errorf("restart made %d writes", n)
	}
	framework.Consistently(t, "no Event after a restart", framework.ConsistentlyMin, func() bool { return len(second.all()) == 0 })
	if evs := second.all(); len(evs) != 0 {
		t.Errorf("restart beside converged clusters raised Events: %+v", evs)
	}
}

// changeDuringFirstPass starts a controller (one worker) whose first pass
// writes a0 (all three overrides, so its env does not follow the global
// triple), then b1, b2, ... b7 in that order (the list's), and changes
// the global triple just as the write of b2 (decided for the old triple)
// goes out: the change arrives while the first pass runs, with one write
// in flight. It returns the Events and the new triple.
func changeDuringFirstPass(t *testing.T) (*eventLog, election.Timings) {
	ns := cp.Namespace(t)
	over := map[string]string{agentenv.LeaseDurationAnnotation: "70s", agentenv.RenewDeadlineAnnotation: "60s", agentenv.RetryPeriodAnnotation: "10s"}
	cp.Create(t, fleetGVR, fleetCluster(ns, "a0", kit.WithAnnotations(over), kit.WithEnv(user)))
	for i := 1; i < 8; i++ {
		cp.Create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("b%d", i), kit.WithEnv(user)))
	}
	tr := fakes.AgentTriples(kit.Timings("60s", "50s", "20s"))
	next := kit.Timings("50s", "40s", "15s")
	log := &eventLog{}
	var once sync.Once
	var aWritten atomic.Bool
	changeAtB2 := func(o *agentenvcontroller.Options) {
		o.Workers = 1
		cfg := rest.CopyConfig(cp.Config)
		framework.Record(cfg, framework.Before(func(q framework.Request) {
			if q.Method != http.MethodPatch || !strings.HasPrefix(q.Path, "/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/") {
				return
			}
			if strings.HasSuffix(q.Path, "/clusters/a0") {
				aWritten.Store(true)
			}
			if strings.HasSuffix(q.Path, "/clusters/b2") {
				once.Do(func() { tr.Set(settings.FleetAgent, next) })
			}
		}))
		o.Client = dynamic.NewForConfigOrDie(cfg)
	}
	start(t, tr, fleet.ChannelClusterEnvV09, recordTo(log), changeAtB2)
	for i := 1; i < 8; i++ {
		name := fmt.Sprintf("b%d", i)
		framework.Eventually(t, name+" written for the change", func() bool {
			return strings.Contains(strings.Join(kit.AgentEnv(getObj(t, fleetGVR, ns, name)), ","), "CATTLE_ELECTION_RETRY_PERIOD=15s")
		})
	}
	framework.Eventually(t, "the change summed up", func() bool { return len(log.with(agentenvcontroller.ReasonPropagated)) >= 3 })
	time.Sleep(time.Second)
	if !aWritten.Load() {
		t.Fatal("the first pass did not write a0 before the change")
	}
	log.mu.Lock()
	for _, e := range log.evs {
		t.Logf("%s %s %s: %.120s", e.kind, e.name, e.reason, e.msg)
	}
	log.mu.Unlock()
	return log, next
}

// TestFirstPassBreakChangeDuringFirstPassIsReportedOnce: a global triple
// change that arrives while the first pass runs is summed up once per
// fleet-agent Setting (not twice, not lost).
func TestFirstPassBreakChangeDuringFirstPassIsReportedOnce(t *testing.T) {
	log, next := changeDuringFirstPass(t)
	names := map[string]int{}
	for _, e := range log.with(agentenvcontroller.ReasonPropagated) {
		if strings.Contains(e.msg, "the agent triple "+next.String()+" is propagated") {
			names[e.name]++
		}
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		if names[d.Name] != 1 {
			t.Errorf("Setting %s: %d summaries of the change, want 1", d.Name, names[d.Name])
		}
	}
}

// TestFirstPassBreakWritesBeforeAChangeAreReported: the first pass wrote
// a0 (its overrides) before the change arrived; the change, which leaves
// a0 as it is, replaces the first pass's globalChange (New's OnChange:
// c.change = g), so a0's write is in no summary, and it got no Event of
// its own either (wrote() held it back for the first pass's summary, which
// is never raised).
func TestFirstPassBreakWritesBeforeAChangeAreReported(t *testing.T) {
	log, _ := changeDuringFirstPass(t)
	reported := false
	for _, e := range log.with("AgentEnvUpdated") {
		reported = reported || e.name == "a0"
	}
	// The change took over the first pass's summary: one summary since
	// the start, each of the 8 clusters counted once (b1 was written by the
	// first pass and again for the change).
	for _, e := range log.with(agentenvcontroller.ReasonPropagated) {
		reported = reported || (strings.Contains(e.msg, "since leasetune's start") && strings.Contains(e.msg, ": 8 cluster(s) had CATTLE_ELECTION_* written"))
	}
	if !reported {
		t.Errorf("a0 was written by the first pass, and no Event says so")
	}
}

// TestFirstPassBreakWriteInFlightAtAChange: b2 was decided for the old
// triple and written as the change arrived. wrote() counts that write for
// the change (c.change is already the new globalChange, which owes b2),
// and the worker's synced(b2) then deletes b2 from the new change's owed
// set; EnqueueAll had queued b2 again, and that second sync (the write of
// the new triple) is no longer owed: it raises an AgentEnvUpdated Event of
// its own, and the summary counts the stale write instead. With a pace
// (ClustersPerMinute) a worker waits between deciding and writing, so a
// change during a paced pass hits this nearly every time.
func TestFirstPassBreakWriteInFlightAtAChange(t *testing.T) {
	log, _ := changeDuringFirstPass(t)
	for _, e := range log.with("AgentEnvUpdated") {
		if e.name != "a0" {
			t.Errorf("a write of the change got an Event of its own: %s: %s", e.name, e.msg)
		}
	}
}

// TestFirstPassBreakChangeWhileCachesSync: a global triple change that
// arrives while the informers still list (the fleet cache is empty or
// partial) makes a globalChange owing only the clusters cached so far;
// sumUpFirstPass then sees a change "that owes every cluster already" and
// steps aside: the first pass writes every other cluster with an
// AgentEnvUpdated Event each (the flood the summary was to prevent), and
// the change, owing nothing, is never summed up.
func TestFirstPassBreakChangeWhileCachesSync(t *testing.T) {
	ns := cp.Namespace(t)
	for i := 0; i < 4; i++ {
		cp.Create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("s%d", i), kit.WithEnv(user)))
	}
	tr := fakes.AgentTriples(kit.Timings("60s", "50s", "20s"))
	next := kit.Timings("50s", "40s", "15s")
	log := &eventLog{}
	var once sync.Once
	hold := func(o *agentenvcontroller.Options) {
		cfg := rest.CopyConfig(cp.Config)
		framework.Record(cfg, framework.WithReads(), framework.Before(func(q framework.Request) {
			if q.Method == http.MethodGet && strings.HasSuffix(q.Path, "/fleet.cattle.io/v1alpha1/clusters") && q.Query.Get("watch") != "true" {
				once.Do(func() { tr.Set(settings.FleetAgent, next) }) // the Setting changes while the fleet Clusters are listed
			}
		}))
		s, err := slim.NewRESTClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		o.Stream = s
	}
	r := start(t, tr, fleet.ChannelClusterEnvV09, recordTo(log), hold)
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("s%d", i)
		framework.Eventually(t, name+" written", func() bool {
			return strings.Contains(strings.Join(kit.AgentEnv(getObj(t, fleetGVR, ns, name)), ","), "CATTLE_ELECTION_RETRY_PERIOD=15s")
		})
	}
	r.settle()
	framework.Consistently(t, "no Event per cluster", framework.ConsistentlyMin, func() bool { return len(log.with("AgentEnvUpdated")) == 0 })
	if ev := log.with("AgentEnvUpdated"); len(ev) != 0 {
		t.Errorf("%d Events per cluster for the first pass / the change: %+v", len(ev), ev)
	}
	if ev := log.with(agentenvcontroller.ReasonPropagated); len(ev) != 3 {
		t.Errorf("%d summaries, want 3 (one per fleet-agent Setting): %+v", len(ev), ev)
	}
}
