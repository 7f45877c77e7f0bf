package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	pkgrancher "leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
	"leasetune.io/leasetune/tests/rancher"
)

var (
	fleetGVR = fleet.ClusterGVR
	provGVR  = pkgrancher.ProvisioningClusterGVR
	mgmtGVR  = pkgrancher.ManagementClusterGVR
	allGVRs  = []schema.GroupVersionResource{fleetGVR, provGVR, mgmtGVR}
)

// doubleResync is the double's resync period: far shorter than Rancher's
// 600s, so that a put-back Rancher makes only when it handles a source
// again shows within the tests' windows.
const doubleResync = 2 * time.Second

// calmWindow is how long nothing may happen for a state to count as
// settled (longer than doubleResync: a resync's writes show in it).
const calmWindow = 3 * time.Second

// cattleNames are the three CATTLE_ELECTION_* names, in the order
// leasetune writes them.
var cattleNames = []string{"CATTLE_ELECTION_LEASE_DURATION", "CATTLE_ELECTION_RENEW_DEADLINE", "CATTLE_ELECTION_RETRY_PERIOD"}

// tripleEnv is what leasetune writes for t: NAME=VALUE in its order.
func tripleEnv(t election.Timings) []string {
	return []string{cattleNames[0] + "=" + t.LeaseDuration.String(), cattleNames[1] + "=" + t.RenewDeadline.String(),
		cattleNames[2] + "=" + t.RetryPeriod.String()}
}

// ---- leasetune's writes, by object -------------------------------------

// The controller's writes are recorded by a framework.Recorder (h.writes):
// its accepted writes count, by URL path; requests the API server refused
// (a 409 conflict on a stale resourceVersion) change nothing and are kept
// apart (Refused).

// delta is what grew from before to now, by path.
func delta(before, now map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// objRef names one cluster object (agentenv.Ref).
type objRef = agentenv.Ref

// path is the object's URL path, as the write log keys it.
func path(o objRef) string {
	p := "/apis/" + o.GVR.Group + "/" + o.GVR.Version
	if o.Namespace != "" {
		p += "/namespaces/" + o.Namespace
	}
	return p + "/" + o.GVR.Resource + "/" + o.Name
}

// ---- a watch on the three kinds ----------------------------------------

// observed is one watch event of a cluster object.
type observed struct {
	seq  int
	at   time.Time
	typ  watch.EventType
	obj  objRef
	rv   string
	env  []string
	mgr  string // the field manager of the newest managedFields entry
	anns string // the leasetune.io annotations, for reports
}

// recorder records every event of the three kinds from before the test
// creates anything: each resourceVersion change of an object is one event.
// It checks every fleet Cluster version it sees for a duplicate env name
// in the agent container Fleet would render.
type recorder struct {
	channel fleet.AgentChannel
	start   time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	events []observed
	errs   []string
	dupes  []string
}

func startRecorder(t *testing.T, ch fleet.AgentChannel) *recorder {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{channel: ch, start: time.Now(), cancel: cancel}
	for _, gvr := range allGVRs {
		ready := make(chan struct{})
		r.wg.Add(1)
		go r.run(ctx, dyn.Resource(gvr), gvr, ready)
		<-ready
	}
	return r
}

func (r *recorder) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *recorder) run(ctx context.Context, res dynamic.NamespaceableResourceInterface, gvr schema.GroupVersionResource, ready chan struct{}) {
	defer r.wg.Done()
	l, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		r.errorf("list %s: %v", gvr.Resource, err)
		close(ready)
		return
	}
	rv := l.GetResourceVersion()
	close(ready)
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				r.errorf("watch %s: %v", gvr.Resource, err)
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() != nil {
					return
				}
				// A gap (410 Gone): the record is no longer complete.
				r.errorf("watch %s from %s: %v", gvr.Resource, rv, apierrors.FromObject(ev.Object))
				w.Stop()
				return
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if ev.Type == watch.Bookmark {
				continue
			}
			r.add(gvr, ev.Type, u)
		}
	}
}

func (r *recorder) errorf(format string, args ...interface{}) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) add(gvr schema.GroupVersionResource, typ watch.EventType, u *unstructured.Unstructured) {
	o := observed{at: time.Now(), typ: typ, obj: objRef{GVR: gvr, Namespace: u.GetNamespace(), Name: u.GetName()}, rv: u.GetResourceVersion(), env: kit.AgentEnv(u)}
	var newest metav1.Time
	for _, mf := range u.GetManagedFields() {
		if mf.Time != nil && !mf.Time.Before(&newest) {
			newest, o.mgr = *mf.Time, mf.Manager
		}
	}
	var anns []string
	for k, v := range u.GetAnnotations() {
		if strings.HasPrefix(k, "leasetune.io/") {
			anns = append(anns, k+"="+v)
		}
	}
	sort.Strings(anns)
	o.anns = strings.Join(anns, " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	o.seq = len(r.events) + 1
	r.events = append(r.events, o)
	if gvr == fleetGVR && typ != watch.Deleted {
		if d := duplicateNames(r.channel, o.env); len(d) > 0 {
			r.dupes = append(r.dupes, fmt.Sprintf("%s rv %s: %v has %v twice in the agent container (channel %s)", o.obj, o.rv, o.env, d, r.channel))
		}
	}
}

// duplicateNames returns the names that occur twice in the agent
// container Fleet renders: its own election entries (agentmanagement
// renders the three CATTLE_ELECTION_*; v0.9 none) then spec.agentEnvVars.
func duplicateNames(ch fleet.AgentChannel, env []string) []string {
	var names []string
	if ch == fleet.ChannelAgentManagement || ch == fleet.ChannelFixedV012 {
		names = append(names, cattleNames...)
	}
	for _, e := range env {
		names = append(names, strings.SplitN(e, "=", 2)[0])
	}
	seen := map[string]int{}
	var dups []string
	for _, n := range names {
		seen[n]++
		if seen[n] == 2 {
			dups = append(dups, n)
		}
	}
	return dups
}

// count is the number of events so far whose object keep accepts.
func (r *recorder) count(keep func(objRef) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if keep(e.obj) {
			n++
		}
	}
	return n
}

// after returns the events seen at or after since whose object keep
// accepts.
func (r *recorder) after(since time.Time, keep func(objRef) bool) []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []observed
	for _, e := range r.events {
		if !e.at.Before(since) && keep(e.obj) {
			out = append(out, e)
		}
	}
	return out
}

// seq is the number of events so far: a mark for since.
func (r *recorder) seq() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// since returns the events after mark whose object keep accepts.
func (r *recorder) since(mark int, keep func(objRef) bool) []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []observed
	for _, e := range r.events[mark:] {
		if keep(e.obj) {
			out = append(out, e)
		}
	}
	return out
}

// envChanges counts the events of o after mark whose env differs from the
// version seen before.
func (r *recorder) envChanges(o objRef, mark int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var prev []string
	var seen bool
	n := 0
	for _, e := range r.events {
		if e.obj != o {
			continue
		}
		if seen && e.seq > mark && strings.Join(prev, "\x00") != strings.Join(e.env, "\x00") {
			n++
		}
		prev, seen = e.env, true
	}
	return n
}

func (r *recorder) describe(events []observed) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n  +%6.2fs %-8s %s rv=%s manager=%s env=%v %s", e.at.Sub(r.start).Seconds(), e.typ, e.obj, e.rv, e.mgr, e.env, e.anns)
	}
	return b.String()
}

// ---- the harness -------------------------------------------------------

// harness is one test's namespace, Rancher double, controller and watch.
type harness struct {
	t       *testing.T
	ns      string
	version string
	rv      pkgrancher.Version
	channel fleet.AgentChannel
	dyn     dynamic.Interface
	tr      *fakes.Triples
	global  election.Timings
	d       *rancher.Double
	ctrl    *agentenvcontroller.Controller
	writes  *framework.Recorder
	rec     *recorder
	stopCtl func()
	mgmts   []string
	local   bool
}

// currentFleetCRD is the Fleet release whose Cluster CRD is installed.
var currentFleetCRD = "v0.14.10"

// fleetCRDOf is the Fleet release of a channel's fixture.
func fleetCRDOf(ch fleet.AgentChannel) string {
	if ch == fleet.ChannelClusterEnvV09 {
		return "v0.9.9"
	}
	return "v0.14.10"
}

// newHarness starts the watch, the double as Rancher version and the
// controller with the global agent triple and channel. Its cleanup stops
// them and deletes every object the test made.
func newHarness(t *testing.T, version string, ch fleet.AgentChannel, global election.Timings) *harness {
	t.Helper()
	useFleetCRD(t, fleetCRDOf(ch))
	rv, ok := pkgrancher.Parse(version)
	if !ok {
		t.Fatalf("rancher version %q", version)
	}
	h := &harness{t: t, ns: cp.Namespace(t), version: version, rv: rv, channel: ch,
		dyn: dynamic.NewForConfigOrDie(cp.Config), global: global}
	t.Cleanup(h.cleanup)
	h.rec = startRecorder(t, ch)
	d, err := rancher.Start(context.Background(), rancher.Options{Config: cp.Config, Version: version,
		Resync: doubleResync, FleetDefaultWorkspace: h.ns})
	if err != nil {
		t.Fatalf("start the Rancher double %s: %v", version, err)
	}
	h.d = d
	h.startController()
	return h
}

func (h *harness) startController() {
	h.t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	h.writes = framework.Record(cfg)
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Client.CoreV1().Events("")})
	h.tr = fakes.AgentTriples(h.global)
	stream, err := slim.NewRESTClient(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	c := agentenvcontroller.New(agentenvcontroller.Options{
		Client: dynamic.NewForConfigOrDie(cfg), Stream: stream, Rancher: true, RancherVersion: h.rv,
		Triples: h.tr, Channels: fakes.Channel(h.channel),
		Recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"}),
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	h.ctrl = c
	h.stopCtl = func() { cancel(); <-done; b.Shutdown() }
	framework.Eventually(h.t, "controller caches synced", c.HasSynced)
}

func (h *harness) cleanup() {
	if h.stopCtl != nil {
		h.stopCtl()
	}
	if h.d != nil {
		h.d.Stop()
	}
	if h.rec != nil {
		h.rec.stop()
		h.rec.mu.Lock()
		for _, e := range h.rec.errs {
			h.t.Errorf("watch: %s", e)
		}
		for _, d := range h.rec.dupes {
			h.t.Errorf("duplicate env name on a fleet Cluster: %s", d)
		}
		h.rec.mu.Unlock()
	}
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{provGVR, fleetGVR} {
		l, err := h.dyn.Resource(gvr).Namespace(h.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, o := range l.Items {
				_ = h.dyn.Resource(gvr).Namespace(h.ns).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
			}
		}
		if h.local {
			_ = h.dyn.Resource(gvr).Namespace(rancher.FleetLocalNamespace).Delete(ctx, "local", metav1.DeleteOptions{})
		}
	}
	for _, n := range h.mgmts {
		_ = h.dyn.Resource(mgmtGVR).Delete(ctx, n, metav1.DeleteOptions{})
	}
}

// owns reports whether an object is one this test made (or Rancher made
// for it).
func (h *harness) owns(o objRef) bool {
	switch {
	case o.Namespace == h.ns:
		return true
	case o.Namespace == rancher.FleetLocalNamespace:
		return h.local && o.Name == "local"
	case o.Namespace == "" && o.GVR == mgmtGVR:
		for _, n := range h.mgmts {
			if n == o.Name {
				return true
			}
		}
	}
	return false
}

func (h *harness) res(o objRef) dynamic.ResourceInterface {
	if o.Namespace == "" {
		return h.dyn.Resource(o.GVR)
	}
	return h.dyn.Resource(o.GVR).Namespace(o.Namespace)
}

// get returns the object, or nil when it does not exist.
func (h *harness) get(o objRef) *unstructured.Unstructured {
	h.t.Helper()
	u, err := h.res(o).Get(context.Background(), o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		h.t.Fatalf("get %s: %v", o, err)
	}
	return u
}

func (h *harness) create(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	h.t.Helper()
	if gvr == mgmtGVR {
		h.mgmts = append(h.mgmts, u.GetName())
	}
	var r dynamic.ResourceInterface = h.dyn.Resource(gvr)
	if u.GetNamespace() != "" {
		r = h.dyn.Resource(gvr).Namespace(u.GetNamespace())
	}
	if _, err := r.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// patch sends a JSON merge patch as a user (field manager "kubectl-edit").
func (h *harness) patch(o objRef, p map[string]interface{}) {
	h.t.Helper()
	b, _ := json.Marshal(p)
	if _, err := h.res(o).Patch(context.Background(), o.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		h.t.Fatalf("patch %s: %v", o, err)
	}
}

// calm waits until, over calmWindow, the watch sees no event of this
// test's objects, neither leasetune nor the double writes, and the
// controller's queue is empty. It fails the test, with what it saw, when
// that does not happen within two minutes: a write fight.
func (h *harness) calm(what string) {
	h.t.Helper()
	type moves struct{ events, writes, double int }
	framework.WaitQuiet(h.t, what+": the objects settle (a write fight?)", calmWindow, 2*time.Minute,
		func() (moves, bool) {
			return moves{h.rec.count(h.owns), h.writes.Writes(), h.d.TotalWrites()}, h.ctrl.QueueLen() == 0
		},
		func(since time.Time) string {
			return "\nleasetune's writes:" + h.writes.WritesSince(since) + "\nevents:" + h.rec.describe(h.rec.after(since, h.owns))
		})
}

// ---- cluster fixtures --------------------------------------------------

// cluster is one downstream cluster of the fixture and what the test
// expects of it.
type cluster struct {
	kind   string // local, legacy, imported, provisioned, standalone
	fleet  objRef
	prov   *objRef // nil for standalone
	mgmt   *objRef // nil for standalone
	source objRef  // the object leasetune reads and writes
	// before and after are the user's entries on the source, before and
	// after leasetune's three; appended are the entries Rancher appends
	// to the management (and so the fleet) Cluster.
	before, after, appended []string
	// override is the cluster's effective triple when it has overrides.
	override *election.Timings
	// custom are the agent customizations (spec fields) created on
	// customOn (the source, but for an imported cluster beside v2.11+, whose
	// provisioning Cluster the user created), to check they survive.
	custom   map[string]interface{}
	customOn objRef
}

var userEnv = []string{"HTTPS_PROXY=http://proxy.example.com:3128", "NO_PROXY=127.0.0.0/8,10.0.0.0/8,.svc,.cluster.local"}

// kinds of the full fixture.
var allKinds = []string{"local", "legacy", "imported", "provisioned", "standalone"}

// createClusters creates the clusters of the given kinds, each with the
// user's env and agent customizations on its source, and waits until
// Rancher (the double) has generated their other objects.
func (h *harness) createClusters(kinds ...string) []*cluster {
	h.t.Helper()
	var out []*cluster
	for _, k := range kinds {
		c := &cluster{kind: k, before: append([]string(nil), userEnv...)}
		custom := kit.RancherAgentCustomization()
		withCustom := []kit.ClusterOption{kit.WithSpec(custom), kit.WithEnv(kit.Env(c.before...)...)}
		switch k {
		case "local":
			h.ensureNamespace(rancher.FleetLocalNamespace)
			h.local = true
			h.create(mgmtGVR, kit.ManagementCluster("local", append(withCustom,
				kit.WithSpec(map[string]interface{}{"internal": true, "displayName": "local"}))...))
			m := objRef{GVR: mgmtGVR, Namespace: "", Name: "local"}
			p := objRef{GVR: provGVR, Namespace: rancher.FleetLocalNamespace, Name: "local"}
			c.mgmt, c.prov, c.source = &m, &p, m
			c.fleet = objRef{GVR: fleetGVR, Namespace: rancher.FleetLocalNamespace, Name: "local"}
		case "legacy":
			name := framework.LegacyClusterName(h.t)
			h.create(mgmtGVR, kit.ManagementCluster(name, append(withCustom,
				kit.WithSpec(map[string]interface{}{"displayName": "legacy-eks", "fleetWorkspaceName": h.ns}))...))
			m := objRef{GVR: mgmtGVR, Namespace: "", Name: name}
			p := objRef{GVR: provGVR, Namespace: h.ns, Name: name}
			c.mgmt, c.prov, c.source = &m, &p, m
			c.fleet = objRef{GVR: fleetGVR, Namespace: h.ns, Name: name}
		case "imported", "provisioned":
			opts := withCustom
			if k == "provisioned" {
				opts = append(opts, kit.WithSpec(map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1",
					"rkeConfig": map[string]interface{}{"dataDirectories": map[string]interface{}{"systemAgent": "/opt/rke-agent"}}}))
				if h.rv.AtLeast(2, 9, 1) {
					c.appended = []string{rancher.SystemAgentDataDirEnvVar + "=/opt/rke-agent"}
				}
			}
			h.create(provGVR, kit.ProvisioningCluster(h.ns, k, opts...))
			p := objRef{GVR: provGVR, Namespace: h.ns, Name: k}
			c.prov, c.source = &p, p
			c.fleet = objRef{GVR: fleetGVR, Namespace: h.ns, Name: k}
			var mname string
			framework.Eventually(h.t, "status.clusterName of "+p.String(), func() bool {
				if u := h.get(p); u != nil {
					mname, _, _ = unstructured.NestedString(u.Object, "status", "clusterName")
				}
				return mname != ""
			})
			h.mgmts = append(h.mgmts, mname)
			m := objRef{GVR: mgmtGVR, Namespace: "", Name: mname}
			c.mgmt = &m
			if k == "imported" && h.rv.ImportedSourceIsManagement() {
				c.source = m
			}
		case "standalone":
			custom = kit.FleetAgentCustomization()
			h.create(fleetGVR, kit.FleetCluster(h.ns, "standalone", kit.WithSpec(custom), kit.WithEnv(kit.Env(c.before...)...)))
			c.fleet = objRef{GVR: fleetGVR, Namespace: h.ns, Name: "standalone"}
			c.source = c.fleet
		}
		c.custom = custom
		c.customOn = c.source
		if c.prov != nil && c.kind == "imported" {
			c.customOn = *c.prov
		}
		out = append(out, c)
	}
	for _, c := range out {
		framework.Eventually(h.t, "Rancher's objects of "+c.kind, func() bool {
			return h.get(c.fleet) != nil && (c.prov == nil || h.get(*c.prov) != nil) && (c.mgmt == nil || h.get(*c.mgmt) != nil)
		})
	}
	return out
}

// ensureNamespace creates a namespace with a fixed name if absent (left in
// place; the harness deletes its own objects there).
func (h *harness) ensureNamespace(name string) {
	h.t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
}

// triple is the triple the cluster's agents need: its override, else the
// global one.
func (h *harness) triple(c *cluster) election.Timings {
	if c.override != nil {
		return *c.override
	}
	return h.global
}

// wantSource is the env the source object should have: on
// cluster-env-v0.9 the user's entries with leasetune's three after them;
// on agentmanagement the user's only.
func (h *harness) wantSource(c *cluster) []string {
	out := append([]string(nil), c.before...)
	if h.channel == fleet.ChannelClusterEnvV09 {
		out = append(out, tripleEnv(h.triple(c))...)
	}
	return append(out, c.after...)
}

// wantFleet is the env the fleet Cluster should have: the source's, with
// what Rancher appends on the way.
func (h *harness) wantFleet(c *cluster) []string {
	return append(h.wantSource(c), c.appended...)
}

// mismatch describes how the clusters differ from what they should have
// ("" when they all match).
func (h *harness) mismatch(cs []*cluster) string {
	var b strings.Builder
	for _, c := range cs {
		if got, want := kit.AgentEnv(h.get(c.source)), h.wantSource(c); !slices.Equal(got, want) {
			fmt.Fprintf(&b, "\n  %s (source of %s): env %v, want %v", c.source, c.kind, got, want)
		}
		if c.fleet != c.source {
			if got, want := kit.AgentEnv(h.get(c.fleet)), h.wantFleet(c); !slices.Equal(got, want) {
				fmt.Fprintf(&b, "\n  %s (%s): env %v, want %v", c.fleet, c.kind, got, want)
			}
		}
	}
	return b.String()
}

// converge waits until every cluster has what it should and nothing moves
// any more.
func (h *harness) converge(what string, cs []*cluster) {
	h.t.Helper()
	var last string
	err := pollMinute(func() bool { last = h.mismatch(cs); return last == "" })
	if err != nil {
		h.t.Fatalf("%s: not within a minute:%s\nevents:%s", what, last, h.rec.describe(h.rec.since(0, h.owns)))
	}
	h.calm(what)
	if m := h.mismatch(cs); m != "" {
		h.t.Fatalf("%s: changed again after converging:%s\nevents:%s", what, m, h.rec.describe(h.rec.since(0, h.owns)))
	}
}

func pollMinute(cond func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timeout")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// ---- small helpers -----------------------------------------------------

// specJSON is the JSON of the object's spec fields named in keys.
func specJSON(u *unstructured.Unstructured, keys map[string]interface{}) string {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return customJSON(spec, keys)
}

// customJSON is the JSON of the fields of spec named in keys.
func customJSON(spec, keys map[string]interface{}) string {
	sel := map[string]interface{}{}
	for k := range keys {
		sel[k] = spec[k]
	}
	b, _ := json.Marshal(sel)
	return string(b)
}

// useFleetCRD replaces clusters.fleet.cattle.io with the CRD of a Fleet
// release and waits until it is established.
func useFleetCRD(t *testing.T, version string) {
	t.Helper()
	if currentFleetCRD == version {
		return
	}
	cp.UseFleetCRD(t, version)

	currentFleetCRD = version
}
