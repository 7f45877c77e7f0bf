package agentenv

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// FieldManager is the field manager of every write this controller makes.
const FieldManager = "leasetune"

const (
	byMgmtName    = "byMgmtName"    // fleet Clusters by their management Cluster's name
	byClusterName = "byClusterName" // provisioning Clusters by status.clusterName
)

// Options configures New.
type Options struct {
	// Patcher writes the cluster objects; DynamicPatcher{Client} when nil.
	Patcher Patcher
	// Client reads (through informers) and writes the cluster objects.
	// Give it a QPS and burst fit for thousands of clusters.
	Client dynamic.Interface
	// Stream, when set (NewRESTClient), is what the informers list and
	// watch the cluster objects through, decoding them straight into their
	// slim form (wire.go); nil: through Client.
	Stream rest.Interface
	// Rancher is true when the provisioning and management Cluster kinds
	// exist (a Rancher installation); without them only fleet Clusters are
	// read and written.
	Rancher bool
	// RancherNamespace and RancherDeployment name the Rancher Deployment,
	// whose image tells the Rancher version (pkg/rancher); defaults
	// cattle-system/rancher. RancherVersion, when set (vX.Y.Z), is used
	// instead of detection.
	RancherNamespace, RancherDeployment string
	RancherVersion                      rancher.Version
	// Triples gives the global agent triple; Channels the Fleet agent channel.
	Triples  settings.Triples
	Channels fleetsettings.Channels
	// Recorder records Events on the cluster objects; may be nil.
	Recorder record.EventRecorder
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
	// Fleet, when set, is a running informer of fleet Clusters made by
	// NewSlimInformer with FleetIndexers (the judgement index's, shared on
	// the leader); nil: the controller makes and runs its own.
	Fleet cache.SharedIndexInformer
	// Workers is the number of concurrent syncs (default 4).
	Workers int
	// ClustersPerMinute paces the writes, to spread agent restarts over
	// time; 0 means unpaced.
	ClustersPerMinute float64
}

// Controller converges each downstream cluster's agent env.
type Controller struct {
	opts    Options
	patcher Patcher
	log     *slog.Logger
	queue   workqueue.RateLimitingInterface
	pace    *rate.Limiter
	own     []cache.SharedIndexInformer // the informers this controller runs
	handles []cache.ResourceEventHandlerRegistration
	fleet   cache.SharedIndexInformer
	prov    cache.SharedIndexInformer
	mgmt    cache.SharedIndexInformer
	// rancherDep watches the Rancher Deployment (by name) for its version.
	rancherFactory dynamicinformer.DynamicSharedInformerFactory
	rancherDep     cache.SharedIndexInformer

	mu       sync.Mutex
	rancherV rancher.Version // the Rancher version in effect
	changeAt time.Time       // when the triples last changed, for the propagation metric
	// change is the global agent triple change being propagated (nil:
	// none): its writes are summed up in one Event on the agent Settings
	// when the last cluster it enqueued is synced, instead of one Event
	// per cluster (at 10,000 clusters those were 10,000 Event writes, most
	// of which client-go's broadcaster dropped).
	change *globalChange
	// changeSeq numbers the globalChanges; firstPass is set once the
	// first pass has begun (the caches synced).
	changeSeq uint64
	firstPass bool
	problems  map[string]Problem     // fleet Cluster key → why it is left alone
	reported  map[string]string      // fleet Cluster key → last problem message reported
	ignored   map[string]string      // fleet Cluster key → the ignored overrides last reported
	reverts   map[string][]time.Time // fleet Cluster key → when its entries were found removed
	fenced    map[string]string      // fleet Cluster key → fingerprint of the object it stopped writing
}

// New builds the controller and its informers; call Run to start it.
func New(opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Patcher == nil {
		opts.Patcher = DynamicPatcher{Client: opts.Client}
	}
	c := &Controller{
		patcher:  opts.Patcher,
		opts:     opts,
		log:      opts.Log.With("controller", "agentenv"),
		queue:    workqueue.NewNamedRateLimitingQueue(workqueue.DefaultControllerRateLimiter(), "agentenv"),
		problems: map[string]Problem{},
		reported: map[string]string{},
		reverts:  map[string][]time.Time{},
		ignored:  map[string]string{},
		fenced:   map[string]string{},
	}
	for _, p := range []Problem{ProblemInvalid, ProblemForeign, ProblemUnsupported, ProblemReverted} {
		metrics.ClustersLeftAlone.WithLabelValues(string(p)).Add(0) // present from the start
	}
	if opts.ClustersPerMinute > 0 {
		c.pace = rate.NewLimiter(rate.Limit(opts.ClustersPerMinute/60), 1)
	}
	c.fleet = opts.Fleet
	if c.fleet == nil {
		c.fleet = NewSlimInformer(opts.Client, opts.Stream, FleetClusterGVR, FleetIndexers())
		c.own = append(c.own, c.fleet)
	}
	h, _ := c.fleet.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueFleet,
		UpdateFunc: func(old, new interface{}) { c.enqueueFleet(new) },
		DeleteFunc: c.enqueueFleet,
	})
	c.handles = append(c.handles, h)
	if opts.Rancher {
		c.prov = NewSlimInformer(opts.Client, opts.Stream, ProvisioningClusterGVR, cache.Indexers{byClusterName: func(obj interface{}) ([]string, error) {
			if n := provClusterName(obj.(*unstructured.Unstructured)); n != "" {
				return []string{n}, nil
			}
			return nil, nil
		}})
		_, _ = c.prov.AddEventHandler(c.relatedHandler(func(u *unstructured.Unstructured) string { return provClusterName(u) }))
		c.mgmt = NewSlimInformer(opts.Client, opts.Stream, ManagementClusterGVR, cache.Indexers{})
		_, _ = c.mgmt.AddEventHandler(c.relatedHandler(func(u *unstructured.Unstructured) string { return u.GetName() }))
		c.own = append(c.own, c.prov, c.mgmt)
		c.rancherV = opts.RancherVersion
		if !opts.RancherVersion.Known {
			c.watchRancherDeployment()
		}
	}
	// Only the agent triple decides a cluster's env: a change of the Fleet
	// controllers' or Rancher's triple re-syncs no cluster.
	lastAgent, lastOK := opts.Triples.Effective(settings.FleetAgent)
	opts.Triples.OnChange(func() {
		t, ok := opts.Triples.Effective(settings.FleetAgent)
		c.mu.Lock()
		same := ok == lastOK && t == lastAgent
		lastAgent, lastOK = t, ok
		if !same {
			c.changeAt = time.Now()
			// Before the first pass has begun (the caches are still
			// syncing) the first pass takes the new triple and owes every
			// cluster; a change owes only the clusters cached so far.
			if ok && c.firstPass {
				c.beginChange(t, false)
			}
		}
		c.mu.Unlock()
		if !same {
			c.EnqueueAll()
		}
	})
	opts.Channels.OnChannelChange(c.EnqueueAll)
	return c
}

// watchRancherDeployment watches the Rancher Deployment, by name, and
// re-enqueues every cluster when the Rancher version it shows changes.
func (c *Controller) watchRancherDeployment() {
	ns, name := c.opts.RancherNamespace, c.opts.RancherDeployment
	if ns == "" {
		ns = rancher.DefaultNamespace
	}
	if name == "" {
		name = rancher.DefaultDeployment
	}
	c.rancherFactory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.opts.Client, 0, ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	c.rancherDep = c.rancherFactory.ForResource(appsv1.SchemeGroupVersion.WithResource("deployments")).Informer()
	update := func(obj interface{}) {
		var v rancher.Version
		if u, ok := obj.(*unstructured.Unstructured); ok {
			var d appsv1.Deployment
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d) == nil {
				v, _ = rancher.Detect(&d)
			}
		}
		c.mu.Lock()
		changed := v != c.rancherV
		c.rancherV = v
		c.mu.Unlock()
		if changed {
			c.log.Info("Rancher version", "version", v.String(), "known", v.Known)
			c.EnqueueAll()
		}
	}
	_, _ = c.rancherDep.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, new interface{}) { update(new) },
		DeleteFunc: func(interface{}) { update(nil) },
	})
}

// RancherVersion is the Rancher version the routing follows.
func (c *Controller) RancherVersion() rancher.Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rancherV
}

// Run starts the informers and workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	ictx, stopInformers := context.WithCancel(ctx)
	var informers sync.WaitGroup
	defer func() { stopInformers(); informers.Wait() }()
	for _, inf := range c.own {
		informers.Add(1)
		go func(inf cache.SharedIndexInformer) { defer informers.Done(); inf.Run(ictx.Done()) }(inf)
	}
	defer func() {
		for _, h := range c.handles {
			_ = c.fleet.RemoveEventHandler(h) // a shared informer outlives this controller
		}
	}()
	if c.rancherFactory != nil {
		c.rancherFactory.Start(ctx.Done())
		defer c.rancherFactory.Shutdown()
		for gvr, ok := range c.rancherFactory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("cache of %s did not sync", gvr)
			}
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		return fmt.Errorf("caches of the cluster objects did not sync")
	}
	c.log.Info("caches synced", "fleetClusters", len(c.fleet.GetStore().ListKeys()))
	c.sumUpFirstPass()
	var wg sync.WaitGroup
	for i := 0; i < c.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.worker, time.Second)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	// The gauge counts this controller's problems: a later one (after a
	// lost and regained lease) starts from none.
	c.mu.Lock()
	for key, p := range c.problems {
		metrics.ClustersLeftAlone.WithLabelValues(string(p)).Dec()
		delete(c.problems, key)
	}
	c.mu.Unlock()
	return nil
}

// HasSynced reports whether the informers have synced.
func (c *Controller) HasSynced() bool {
	ok := c.fleet.HasSynced()
	if c.prov != nil {
		ok = ok && c.prov.HasSynced() && c.mgmt.HasSynced()
	}
	if c.rancherDep != nil {
		ok = ok && c.rancherDep.HasSynced()
	}
	return ok
}

// QueueLen is the number of fleet Clusters waiting to be synced.
func (c *Controller) QueueLen() int { return c.queue.Len() }

// EnqueueAll enqueues every fleet Cluster.
func (c *Controller) EnqueueAll() {
	for _, key := range c.fleet.GetStore().ListKeys() {
		c.queue.Add(key)
	}
	metrics.QueueDepth.WithLabelValues("agentenv").Set(float64(c.queue.Len()))
}

func (c *Controller) enqueueFleet(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		c.queue.Add(key)
	}
}

// relatedHandler enqueues the fleet Clusters whose management Cluster name
// mgmtName gives, for the old and the new object.
func (c *Controller) relatedHandler(mgmtName func(*unstructured.Unstructured) string) cache.ResourceEventHandler {
	enqueue := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		name := mgmtName(u)
		if name == "" {
			return
		}
		objs, _ := c.fleet.GetIndexer().ByIndex(byMgmtName, name)
		for _, o := range objs {
			c.enqueueFleet(o)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(old, new interface{}) { enqueue(old); enqueue(new) },
		DeleteFunc: enqueue,
	}
}

func (c *Controller) worker(ctx context.Context) {
	for {
		item, quit := c.queue.Get()
		if quit {
			return
		}
		key := item.(string)
		seq := c.syncSeq()
		err := c.sync(ctx, key)
		switch {
		case err == nil:
			c.queue.Forget(item)
			c.synced(key, seq)
		case ctx.Err() != nil:
		default:
			c.log.Error("sync failed; retrying", "cluster", key, "error", err)
			c.queue.AddRateLimited(item)
		}
		c.queue.Done(item)
		depth := c.queue.Len()
		metrics.QueueDepth.WithLabelValues("agentenv").Set(float64(depth))
		if depth == 0 {
			// The change has been propagated: later writes (an override
			// edited by hand) are not part of it.
			c.mu.Lock()
			c.changeAt = time.Time{}
			c.mu.Unlock()
		}
	}
}

// sync gathers one fleet Cluster's objects from the caches, decides, and
// writes when the decision differs from what is there.
func (c *Controller) sync(ctx context.Context, key string) error {
	obj, exists, err := c.fleet.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		c.forget(key)
		return nil
	}
	global, ok := c.opts.Triples.Effective(settings.FleetAgent)
	if !ok {
		return nil // no valid agent triple known: write nothing
	}
	channel, ok := c.opts.Channels.Channel()
	if !ok {
		return nil // Fleet not seen yet: the channel change re-enqueues everything
	}
	rt, err := c.route(obj.(*unstructured.Unstructured))
	if err != nil {
		c.log.Info("cluster not routable yet", "cluster", key, "reason", err.Error())
		return nil // the related object's arrival re-enqueues it
	}
	for _, o := range rt.Ignored {
		c.reportIgnored(key, o, rt)
	}
	if c.isFenced(key, rt.Target) {
		return nil
	}
	for attempt := 0; ; attempt++ {
		d := rt.Decide(global, channel)
		if d.Problem == ProblemInvalid || d.Problem == ProblemForeign {
			return c.leaveAlone(ctx, key, rt, d.Problem, d.Err)
		}
		status := c.report(key, rt, d.Problem, d.Err)
		_, hasStatus := rt.Target.GetAnnotations()[StatusAnnotation]
		statusChange := (status == "" && hasStatus) || (status != "" && rt.Target.GetAnnotations()[StatusAnnotation] != status)
		if !d.Change && !statusChange {
			return nil
		}
		if !d.Change {
			return c.patchStatus(ctx, rt, statusValue(status))
		}
		if stop, err := c.guardReverts(ctx, key, rt, d); stop {
			return err
		}
		if c.pace != nil {
			if err := c.pace.Wait(ctx); err != nil {
				return err
			}
		}
		err = Write(ctx, c.patcher, rt.TargetRef, rt.Target.GetResourceVersion(), d.Env, d.Record, statusValue(status))
		if err == nil {
			c.wrote(key, rt, d)
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 4 {
			return fmt.Errorf("write %s: %w", rt.TargetRef, err)
		}
		// Someone else wrote the object since the cache saw it: decide
		// again from the fresh object, so that their edit is kept.
		fresh, gerr := c.resource(rt.TargetRef).Get(ctx, rt.TargetRef.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		rt.Target = fresh
	}
}

// guardReverts counts a write that would restore entries someone removed
// (isRevert) and, after RevertLimit of them within RevertWindow, stops
// writing the object: it reports the other writer by its field manager
// (Warning Event AgentEnvReverted, the StatusAnnotation, the metric's
// "reverted" reason) and resumes once the object changes otherwise
// (fingerprint). stop is true when the write is not to be made.
func (c *Controller) guardReverts(ctx context.Context, key string, rt Routing, d Decision) (stop bool, err error) {
	fp := fingerprint(rt.Target)
	now := time.Now()
	c.mu.Lock()
	var n int
	if isRevert(rt.Target, d) {
		kept := c.reverts[key][:0]
		for _, at := range c.reverts[key] {
			if now.Sub(at) < RevertWindow {
				kept = append(kept, at)
			}
		}
		c.reverts[key] = append(kept, now)
		n = len(c.reverts[key])
	}
	fence := n >= RevertLimit
	if fence {
		c.fenced[key] = fp
	}
	c.mu.Unlock()
	if !fence {
		return false, nil
	}
	// The cache keeps no managedFields: who wrote the env is read live.
	var writer string
	if live, err := c.resource(rt.TargetRef).Get(ctx, rt.TargetRef.Name, metav1.GetOptions{}); err == nil {
		writer = envWriters(live)
	}
	if writer == "" {
		writer = "another writer"
	}
	msg := fmt.Sprintf("%s removed leasetune's CATTLE_ELECTION_* entries from spec.agentEnvVars %d times within %s; leasetune stops writing this object (each write redeploys %s) until it changes otherwise; to keep other timings here, give the other writer the entries, or remove the override annotations",
		writer, n, RevertWindow, Restarts(rt))
	c.setProblem(key, ProblemReverted)
	c.mu.Lock()
	c.reported[key] = msg
	c.mu.Unlock()
	c.log.Warn("another writer keeps removing leasetune's entries; stopped writing", "cluster", key, "object", rt.TargetRef.String(), "writer", writer)
	c.event(rt.Target, corev1.EventTypeWarning, "AgentEnvReverted", msg)
	return true, c.patchStatus(ctx, rt, msg)
}

// isFenced reports whether the guard stopped writing this object and the
// object has not changed otherwise since; once it has, the guard forgets
// the reverts and the object is written again.
func (c *Controller) isFenced(key string, u *unstructured.Unstructured) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was, ok := c.fenced[key]
	if !ok {
		return false
	}
	if was == fingerprint(u) {
		return true
	}
	delete(c.fenced, key)
	delete(c.reverts, key)
	return false
}

// forget drops what the controller remembers of a deleted cluster.
func (c *Controller) forget(key string) {
	c.setProblem(key, "")
	c.mu.Lock()
	delete(c.reported, key)
	delete(c.reverts, key)
	delete(c.fenced, key)
	delete(c.ignored, key)
	c.mu.Unlock()
}

// statusValue is the merge-patch value of the StatusAnnotation: the
// message, or nil to remove it.
func statusValue(status string) interface{} {
	if status == "" {
		return nil
	}
	return status
}

// route finds the objects of a fleet Cluster in the caches.
func (c *Controller) route(fc *unstructured.Unstructured) (Routing, error) {
	var prov, mgmt *unstructured.Unstructured
	if name, ok := fc.GetLabels()[MgmtNameLabel]; ok && c.opts.Rancher {
		if objs, _ := c.prov.GetIndexer().ByIndex(byClusterName, name); len(objs) > 0 {
			prov = objs[0].(*unstructured.Unstructured)
		}
		if o, ok, _ := c.mgmt.GetIndexer().GetByKey(name); ok {
			mgmt = o.(*unstructured.Unstructured)
		}
	}
	return Route(fc, prov, mgmt, c.RancherVersion())
}

func (c *Controller) resource(r Ref) dynamic.ResourceInterface {
	if r.Namespace == "" {
		return c.opts.Client.Resource(r.GVR)
	}
	return c.opts.Client.Resource(r.GVR).Namespace(r.Namespace)
}

// Write patches spec.agentEnvVars and the ownership record of the object
// ref, with the resourceVersion read: a JSON merge patch replaces the list
// whole, so the precondition is what keeps a concurrent edit from being
// lost (the API server answers a conflict). An empty env removes the
// field; a nil record removes the annotation; status is the value of the
// StatusAnnotation in the same patch (nil removes it), so that a change and
// its report are one write.
func Write(ctx context.Context, p Patcher, ref Ref, resourceVersion string,
	env []map[string]interface{}, rec map[string]string, status interface{}) error {
	var recValue interface{}
	if rec != nil {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		recValue = string(b)
	}
	var envValue interface{}
	if len(env) > 0 {
		envValue = env
	}
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]interface{}{RecordAnnotation: recValue, StatusAnnotation: status},
		},
		"spec": map[string]interface{}{"agentEnvVars": envValue},
	})
	if err != nil {
		return err
	}
	return p.MergePatch(ctx, ref, body)
}

// Patcher sends a JSON merge patch of a cluster object with FieldManager.
type Patcher interface {
	MergePatch(ctx context.Context, ref Ref, body []byte) error
}

// DynamicPatcher patches through a dynamic client (which decodes the
// object the apiserver answers with).
type DynamicPatcher struct{ Client dynamic.Interface }

// MergePatch implements Patcher.
func (d DynamicPatcher) MergePatch(ctx context.Context, ref Ref, body []byte) error {
	var r dynamic.ResourceInterface = d.Client.Resource(ref.GVR)
	if ref.Namespace != "" {
		r = d.Client.Resource(ref.GVR).Namespace(ref.Namespace)
	}
	_, err := r.Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

// RawPatcher patches through a REST client without decoding the object the
// apiserver answers with: the controller never reads it (the informer
// brings the new object), and decoding a whole cluster object into an
// unstructured map for every write was a third of the controller's
// allocations during a global change at 10,000 clusters (hack/bench
// -profile). An error answer is still decoded into a StatusError.
type RawPatcher struct{ REST rest.Interface }

// NewRawPatcher returns a RawPatcher for cfg (its QPS and burst apply to
// these writes).
func NewRawPatcher(cfg *rest.Config) (RawPatcher, error) {
	rc, err := NewRESTClient(cfg)
	return RawPatcher{REST: rc}, err
}

// MergePatch implements Patcher.
func (r RawPatcher) MergePatch(ctx context.Context, ref Ref, body []byte) error {
	path := []string{"/apis", ref.GVR.Group, ref.GVR.Version}
	if ref.Namespace != "" {
		path = append(path, "namespaces", ref.Namespace)
	}
	path = append(path, ref.GVR.Resource, ref.Name)
	return r.REST.Patch(types.MergePatchType).AbsPath(path...).Param("fieldManager", FieldManager).
		Body(body).Do(ctx).Error()
}

// Restarts says what a change of a routed object's agent env redeploys.
func Restarts(rt Routing) string {
	switch {
	case rt.Provisioned:
		return "fleet-agent, cattle-cluster-agent and the system agent on every node"
	case rt.RancherManaged:
		return "fleet-agent and cattle-cluster-agent"
	}
	return "fleet-agent"
}

// wrote counts, logs and records a write.
func (c *Controller) wrote(key string, rt Routing, d Decision) {
	metrics.Writes.WithLabelValues("cluster").Inc()
	if d.Change {
		metrics.Restarts.WithLabelValues("fleet-agent").Inc()
		if rt.RancherManaged {
			metrics.Restarts.WithLabelValues("cattle-cluster-agent").Inc()
		}
		if rt.Provisioned {
			metrics.Restarts.WithLabelValues("node-plan").Inc()
		}
	}
	c.mu.Lock()
	at := c.changeAt
	c.mu.Unlock()
	if !at.IsZero() {
		metrics.PropagationSeconds.WithLabelValues("agentenv").Set(time.Since(at).Seconds())
	}
	restarts := Restarts(rt)
	msg := fmt.Sprintf("spec.agentEnvVars now holds CATTLE_ELECTION_* for %s; this redeploys %s", d.Effective, restarts)
	if d.Record == nil {
		msg = fmt.Sprintf("removed the CATTLE_ELECTION_* entries leasetune had added; this redeploys %s", restarts)
	}
	if d.Elects {
		msg += fmt.Sprintf("; fleet-agent runs %s", d.Runs)
	}
	if d.Record == nil {
		c.log.Info("agent env entries removed", "object", rt.TargetRef.String(), "redeploys", restarts)
	} else {
		c.log.Info("agent env updated", "object", rt.TargetRef.String(), "timings", d.Effective.String(), "redeploys", restarts)
	}
	c.mu.Lock()
	g := c.change
	inChange := g != nil && g.owed[key]
	if inChange {
		g.count(key, rt, d)
	}
	c.mu.Unlock()
	if !inChange {
		c.event(rt.Target, corev1.EventTypeNormal, "AgentEnvUpdated", msg)
	}
}

// sumUpFirstPass makes the first pass over the clusters after the caches
// synced (each was enqueued as the informer added it) a globalChange, so
// that its writes too are summed up in one Event instead of one per
// cluster: leasetune's first start beside 10,000 clusters writes them all.
// A first pass that writes nothing (a restart, a new leader) raises no
// Event, only its log line.
func (c *Controller) sumUpFirstPass() {
	t, ok := c.opts.Triples.Effective(settings.FleetAgent)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.firstPass = true
	if ok {
		c.beginChange(t, true)
	}
}

// beginChange starts summing up the propagation of the agent triple t
// over every cached fleet Cluster (first: the first pass after the caches
// synced). A change that replaces one still propagating takes over its
// counts and the clusters it still owes, so that no write goes unreported:
// each was held back from its own Event for the summary. Syncs that began
// before it settle nothing of it (see synced). Call with c.mu held.
func (c *Controller) beginChange(t election.Timings, first bool) {
	c.changeSeq++
	g := &globalChange{seq: c.changeSeq, at: time.Now(), triple: t, owed: map[string]bool{}, first: first}
	if c.fleet != nil {
		for _, key := range c.fleet.GetStore().ListKeys() {
			g.owed[key] = true
		}
	}
	if old := c.change; old != nil {
		for key := range old.owed {
			g.owed[key] = true
		}
		g.wrote = old.wrote
		g.first = g.first || old.first
		g.replaced = true
		g.at = old.at
	}
	c.change = g
	if len(g.owed) == 0 {
		c.change = nil // no cluster: nothing to sum up
	}
}

// syncSeq is the globalChange a sync that begins now can settle (0: none).
func (c *Controller) syncSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.change == nil {
		return 0
	}
	return c.change.seq
}

// globalChange is the propagation of one global agent triple: the fleet
// Clusters it enqueued and not yet synced, and what its writes restarted.
// first marks the controller's first pass after its caches synced (or a
// change that took one over); replaced, a change that took over another
// one's counts.
type globalChange struct {
	seq    uint64
	at     time.Time
	triple election.Timings
	owed   map[string]bool
	// wrote is each cluster written, by its key: a cluster written twice
	// (by the first pass, then for a change that took it over) counts once.
	wrote           map[string]clusterWrite
	first, replaced bool
}

// clusterWrite is what a cluster's last write in a globalChange did.
type clusterWrite struct{ removed, cattle, replans bool }

func (g *globalChange) count(key string, rt Routing, d Decision) {
	if g.wrote == nil {
		g.wrote = map[string]clusterWrite{}
	}
	g.wrote[key] = clusterWrite{removed: d.Record == nil, cattle: rt.RancherManaged, replans: rt.Provisioned}
}

// totals counts the clusters written (their entries written or removed)
// and what those writes restarted.
func (g *globalChange) totals() (written, removed, cattle, replans int) {
	for _, w := range g.wrote {
		if w.removed {
			removed++
		} else {
			written++
		}
		if w.cattle {
			cattle++
		}
		if w.replans {
			replans++
		}
	}
	return written, removed, cattle, replans
}

// synced marks a fleet Cluster as done for the global change, when its
// sync began under that change (seq, from syncSeq): a sync decided for an
// earlier triple settles nothing, the cluster is queued again and its next
// sync does. With the last cluster the change is summed up: a log line and
// a Normal Event AgentTimingsPropagated on each fleet-agent Setting.
func (c *Controller) synced(key string, seq uint64) {
	c.mu.Lock()
	g := c.change
	if g == nil || g.seq != seq || !g.owed[key] {
		c.mu.Unlock()
		return
	}
	delete(g.owed, key)
	done := len(g.owed) == 0
	if done {
		c.change = nil
	}
	left := 0
	for _, p := range c.problems {
		if p != "" {
			left++
		}
	}
	c.mu.Unlock()
	if !done {
		return
	}
	written, removed, cattle, replans := g.totals()
	took := time.Since(g.at).Round(time.Millisecond)
	msg := fmt.Sprintf("the agent triple %s is propagated (%s): %d cluster(s) had CATTLE_ELECTION_* written to their agent env and %d had leasetune's entries removed, each redeploying its fleet-agent (%d also cattle-cluster-agent, %d re-planning every node); %d cluster(s) are left alone (their leasetune.io/agent-env-status annotation says why)",
		g.triple, took, written, removed, cattle, replans, left)
	if written+removed == 0 {
		msg = fmt.Sprintf("the agent triple %s needed no change of any cluster's agent env (%s)", g.triple, took)
		if ch, ok := c.opts.Channels.Channel(); ok && ch == fleet.ChannelAgentManagement {
			msg += "; on this Fleet the agents get it from fleet-agentmanagement (FLEET_AGENT_ELECTION_* on the fleet-controller Deployment), which re-renders every agent when it restarts"
		}
		msg += fmt.Sprintf("; %d cluster(s) are left alone (their leasetune.io/agent-env-status annotation says why)", left)
	}
	switch {
	case g.first && g.replaced:
		msg = "since leasetune's start (a change came during its first pass), " + msg
	case g.first:
		msg = "at leasetune's start, " + msg
	case g.replaced:
		msg += " (with the writes of the change it replaced)"
	}
	c.log.Info("agent triple propagated", "timings", g.triple.String(), "took", took.String(), "written", written,
		"removed", removed, "cattleClusterAgents", cattle, "nodePlans", replans, "leftAlone", left, "firstPass", g.first)
	if c.opts.Recorder == nil || (g.first && !g.replaced && written+removed == 0) {
		return
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		ref := &corev1.ObjectReference{APIVersion: "management.cattle.io/v3", Kind: "Setting", Name: d.Name}
		c.opts.Recorder.Event(ref, corev1.EventTypeNormal, ReasonPropagated, msg)
	}
}

// ReasonPropagated is the Event on the fleet-agent Settings that sums up a
// global agent triple change once every cluster has been synced.
const ReasonPropagated = "AgentTimingsPropagated"

// leaveAlone reports a cluster that is left as it is (report) and sets the
// StatusAnnotation on its source object. It is not retried: a change of
// the objects re-enqueues it.
func (c *Controller) leaveAlone(ctx context.Context, key string, rt Routing, p Problem, err error) error {
	msg := c.report(key, rt, p, err)
	if rt.Target.GetAnnotations()[StatusAnnotation] == msg {
		return nil
	}
	return c.patchStatus(ctx, rt, msg)
}

// report records a cluster's problem (p == "": none) for the metric and,
// once per distinct problem, logs it and records a Warning Event on the
// source object. It returns the StatusAnnotation value ("" for none).
func (c *Controller) report(key string, rt Routing, p Problem, err error) string {
	c.setProblem(key, p)
	if p == "" {
		c.mu.Lock()
		delete(c.reported, key)
		c.mu.Unlock()
		return ""
	}
	msg := err.Error()
	c.mu.Lock()
	seen := c.reported[key] == msg
	c.reported[key] = msg
	c.mu.Unlock()
	if !seen {
		reason := map[Problem]string{ProblemInvalid: "InvalidElectionOverride", ProblemForeign: "ForeignElectionEnv",
			ProblemUnsupported: "ElectionOverrideUnsupported"}[p]
		c.log.Warn("cluster's agent env left as it is", "cluster", key, "object", rt.TargetRef.String(), "problem", p, "error", msg)
		c.event(rt.Target, corev1.EventTypeWarning, reason, msg)
	}
	return msg
}

// patchStatus sets (a string) or removes (nil) the StatusAnnotation. It
// never touches the cached objects, which the informer owns.
func (c *Controller) patchStatus(ctx context.Context, rt Routing, value interface{}) error {
	body, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"annotations": map[string]interface{}{StatusAnnotation: value}}})
	if err != nil {
		return err
	}
	err = c.patcher.MergePatch(ctx, rt.TargetRef, body)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// reportIgnored tells, once per object and value, that override
// annotations on o do not apply: this cluster's are read from rt.Source.
func (c *Controller) reportIgnored(key string, o *unstructured.Unstructured, rt Routing) {
	vals, _ := overrides(o)
	id := fmt.Sprintf("%s/%s %v", o.GetNamespace(), o.GetName(), vals)
	c.mu.Lock()
	seen := c.ignored[key] == id
	c.ignored[key] = id
	c.mu.Unlock()
	if seen {
		return
	}
	msg := fmt.Sprintf("the election.cattle.io/* override annotations on this object do not apply: for this cluster leasetune reads them from %s", rt.TargetRef)
	c.log.Warn("override annotations ignored", "cluster", key, "object", o.GetName(), "readFrom", rt.TargetRef.String())
	c.event(o, corev1.EventTypeWarning, "ElectionOverrideIgnored", msg)
}

// setProblem records (p != "") or clears a cluster's problem and updates
// the metric.
func (c *Controller) setProblem(key string, p Problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.problems[key]
	if had && old == p {
		return
	}
	if had {
		metrics.ClustersLeftAlone.WithLabelValues(string(old)).Dec()
	}
	if p == "" {
		delete(c.problems, key)
		return
	}
	c.problems[key] = p
	metrics.ClustersLeftAlone.WithLabelValues(string(p)).Inc()
}

// Problems returns the clusters left alone and why, for tests and plan output.
func (c *Controller) Problems() map[string]Problem {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]Problem{}
	for k, v := range c.problems {
		out[k] = v
	}
	return out
}

func (c *Controller) event(u *unstructured.Unstructured, eventType, reason, msg string) {
	if c.opts.Recorder == nil || u == nil {
		return
	}
	c.opts.Recorder.Event(u, eventType, reason, msg)
}
