package agentenv

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/agentenv/patch"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/workloop"
)

// FieldManager is the field manager of every write this controller makes
// (own.FieldManager: the revert guard tells its own writes from
// others' by it).
const FieldManager = own.FieldManager

// byClusterName indexes provisioning Clusters by status.clusterName.
const byClusterName = "byClusterName"

// maxConflicts is how many times a sync decides again from a fresh read
// after the write met a conflict (someone else wrote the object since the
// cache saw it) before it gives up and is retried from the queue.
const maxConflicts = 4

// Options configures New.
type Options struct {
	// Patcher writes the cluster objects; patch.DynamicPatcher{Client}
	// when nil.
	Patcher patch.Patcher
	// Client reads (through informers) and writes the cluster objects.
	// Give it a QPS and burst fit for thousands of clusters.
	Client dynamic.Interface
	// Stream, when set (slim.NewRESTClient), is what the informers list and
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
	// RancherDeployments, when set, is a running informer that watches the
	// Rancher Deployment (by name; typed *appsv1.Deployment or
	// unstructured objects), shared with the rancherenv controller; nil:
	// the controller watches it itself when it needs the version.
	RancherDeployments cache.SharedIndexInformer
	// Triples gives the global agent triple; Channels the Fleet agent channel.
	Triples  settings.Triples
	Channels fleet.ChannelSource
	// Recorder records Events on the cluster objects; may be nil.
	Recorder record.EventRecorder
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
	// Fleet, when set, is a running informer of fleet Clusters made by
	// slim.NewInformer with index.FleetIndexers (the judgement index's, shared on
	// the leader); nil: the controller makes and runs its own.
	Fleet cache.SharedIndexInformer
	// Workers is the number of concurrent syncs (default 4).
	Workers int
	// ClustersPerMinute paces the writes, to spread agent restarts over
	// time; 0 means unpaced.
	ClustersPerMinute float64
	// Clock is the revert guard's and the propagation's clock (tests);
	// the real clock when nil.
	Clock clock.Clock
}

// Controller converges each downstream cluster's agent env. Its files are
// one concern each: handlers.go (informers' handlers feeding the work
// queue, pkg/workloop), gather.go (one cluster's state from the caches), outcome.go
// (the pure decision of a sync: at most one write), apply.go (that write),
// report.go (Events, metrics and logs, after the write), propagation.go (a
// global change summed up), ledger.go (what is remembered per cluster).
type Controller struct {
	opts    Options
	patcher patch.Patcher
	log     *slog.Logger
	clock   clock.Clock
	loop    *workloop.Loop[string]
	pace    *rate.Limiter
	own     []cache.SharedIndexInformer // the informers this controller runs
	shared  []handlerOn                 // handlers on informers it shares
	fleet   cache.SharedIndexInformer
	prov    cache.SharedIndexInformer
	mgmt    cache.SharedIndexInformer
	// rancherFactory, when the controller watches the Rancher Deployment
	// itself; rancherDep is the informer that watches it (own or shared).
	rancherFactory dynamicinformer.DynamicSharedInformerFactory
	rancherDep     cache.SharedIndexInformer

	ledger *ledger
	prop   *propagation

	mu       sync.Mutex
	rancherV rancher.Version // the Rancher version in effect
}

// handlerOn is an event handler registered on a shared informer, removed
// when the controller stops.
type handlerOn struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration
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
		opts.Patcher = patch.DynamicPatcher{Client: opts.Client}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		patcher: opts.Patcher,
		opts:    opts,
		log:     opts.Log.With("controller", "agentenv"),
		clock:   opts.Clock,
		ledger:  newLedger(),
		prop:    newPropagation(opts.ClustersPerMinute),
	}
	// The propagation of a change ends when the queue is empty: later
	// writes (an override edited by hand) are not part of it.
	c.loop = workloop.New(workloop.Options{Name: controllerName, Workers: opts.Workers, Log: opts.Log, Idle: c.prop.idle}, c.syncAndSettle)
	if opts.ClustersPerMinute > 0 {
		c.pace = rate.NewLimiter(rate.Limit(opts.ClustersPerMinute/60), 1)
	}
	c.fleet = opts.Fleet
	if c.fleet == nil {
		c.fleet = slim.NewInformer(opts.Client, opts.Stream, fleet.ClusterGVR, index.FleetIndexers())
		c.own = append(c.own, c.fleet)
	}
	c.handle(c.fleet, c.fleetHandler(), opts.Fleet != nil)
	if opts.Rancher {
		c.prov = slim.NewInformer(opts.Client, opts.Stream, rancher.ProvisioningClusterGVR, cache.Indexers{byClusterName: func(obj interface{}) ([]string, error) {
			if n := rancher.ManagementNameOf(obj.(*unstructured.Unstructured)); n != "" {
				return []string{n}, nil
			}
			return nil, nil
		}})
		c.handle(c.prov, c.relatedHandler(rancher.ManagementNameOf), false)
		c.mgmt = slim.NewInformer(opts.Client, opts.Stream, rancher.ManagementClusterGVR, cache.Indexers{})
		c.handle(c.mgmt, c.relatedHandler(func(u *unstructured.Unstructured) string { return u.GetName() }), false)
		c.own = append(c.own, c.prov, c.mgmt)
		c.rancherV = opts.RancherVersion
		if !opts.RancherVersion.Known {
			c.watchRancherDeployment()
		}
	}
	c.watchSettings()
	return c
}

// handle registers h on inf; shared says that inf outlives the controller
// (the handler is then removed when Run returns).
func (c *Controller) handle(inf cache.SharedIndexInformer, h cache.ResourceEventHandler, shared bool) {
	reg, _ := inf.AddEventHandler(h)
	if shared {
		c.shared = append(c.shared, handlerOn{inf, reg})
	}
}

// RancherVersion is the Rancher version the routing follows.
func (c *Controller) RancherVersion() rancher.Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rancherV
}

// Run starts the informers and workers and blocks until ctx ends. It
// returns an error when the caches do not sync before ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.loop.ShutDown()
	ictx, stopInformers := context.WithCancel(ctx)
	var informers sync.WaitGroup
	defer func() { stopInformers(); informers.Wait() }()
	for _, inf := range c.own {
		informers.Add(1)
		go func(inf cache.SharedIndexInformer) { defer informers.Done(); inf.Run(ictx.Done()) }(inf)
	}
	defer func() {
		for _, h := range c.shared {
			_ = h.informer.RemoveEventHandler(h.handle) // a shared informer outlives this controller
		}
	}()
	if c.rancherFactory != nil {
		c.rancherFactory.Start(ctx.Done())
		defer c.rancherFactory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		return fmt.Errorf("caches of the cluster objects did not sync")
	}
	c.log.Info("caches synced", "fleetClusters", len(c.fleet.GetStore().ListKeys()))
	c.sumUpFirstPass()
	err := c.loop.Run(ctx)
	c.ledger.clearProblems()
	return err
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
func (c *Controller) QueueLen() int { return c.loop.Len() }

// EnqueueAll enqueues every fleet Cluster.
func (c *Controller) EnqueueAll() {
	for _, key := range c.fleet.GetStore().ListKeys() {
		c.loop.Add(key)
	}
}

// Problems returns the clusters left alone and why, by fleet Cluster key.
func (c *Controller) Problems() map[string]agentenv.Problem { return c.ledger.snapshot() }

// syncAndSettle is a sync that, when it succeeds, tells the propagation
// of a triple change that the cluster has settled (report.go settled).
func (c *Controller) syncAndSettle(ctx context.Context, key string) error {
	seq := c.prop.syncSeq()
	err := c.sync(ctx, key)
	if err == nil {
		c.settled(key, seq)
	}
	return err
}

// sync converges one fleet Cluster: gather from the caches, decide
// (planSync), make at most one write (apply; after a conflict, decide
// again from a fresh read), then report what was done, once, on every
// exit path.
func (c *Controller) sync(ctx context.Context, key string) (err error) {
	st, err := c.gather(key)
	if err != nil {
		return err
	}
	var out outcome
	var done applied
	defer func() { c.report(st, out, done) }()
	for attempt := 0; ; attempt++ {
		out = planSync(st)
		done, err = c.apply(ctx, st, out)
		if err == nil || !apierrors.IsConflict(err) || attempt >= maxConflicts {
			if err != nil {
				return fmt.Errorf("write %s: %w", st.route.TargetRef, err)
			}
			return nil
		}
		// agentenv.Decide again from the fresh object, so that the other
		// writer's edit is kept.
		fresh, gerr := c.resource(st.route.TargetRef).Get(ctx, st.route.TargetRef.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		st.route.Target = fresh
	}
}

func (c *Controller) resource(r agentenv.Ref) dynamic.ResourceInterface {
	if r.Namespace == "" {
		return c.opts.Client.Resource(r.GVR)
	}
	return c.opts.Client.Resource(r.GVR).Namespace(r.Namespace)
}

// Clusters are the fleet, provisioning and management Clusters as the
// caches hold them (slim copies: what the controller reads), and the
// Rancher version the routing follows: for the ElectionStatus, which
// routes them the same way (agentenv.Route).
func (c *Controller) Clusters() (fleets, provs, mgmts []unstructured.Unstructured, rv rancher.Version) {
	list := func(inf cache.SharedIndexInformer) []unstructured.Unstructured {
		if inf == nil {
			return nil
		}
		objs := inf.GetStore().List()
		out := make([]unstructured.Unstructured, 0, len(objs))
		for _, o := range objs {
			out = append(out, *o.(*unstructured.Unstructured))
		}
		return out
	}
	return list(c.fleet), list(c.prov), list(c.mgmt), c.RancherVersion()
}

// OnClusterChange registers h on the informers of the three cluster kinds
// (removed with the controller's own handlers where the informer is
// shared).
func (c *Controller) OnClusterChange(h cache.ResourceEventHandler) {
	c.handle(c.fleet, h, c.opts.Fleet != nil)
	for _, inf := range []cache.SharedIndexInformer{c.prov, c.mgmt} {
		if inf != nil {
			c.handle(inf, h, false)
		}
	}
}
