// Package rancher is a test double of the Rancher handlers that generate
// clusters.management.cattle.io, clusters.provisioning.cattle.io and
// clusters.fleet.cattle.io objects from one another, and of what Rancher
// does to unknown Setting objects when it starts. It is written from
// rancher/rancher's source (each behaviour cites the tag, file and function
// it follows) for integration tests on a real kube-apiserver; it handles
// only the fields those tests need (env, annotations, labels, the
// management name and workspace) and leaves every other field alone.
//
// What it leaves out, on purpose: the owner references, objectset labels and
// prune of wrangler's apply; the fleet Cluster's kubeconfig Secret, agent
// customization and the gates on status.clientSecretName and the management
// Cluster's Ready condition; cluster registration tokens, CAPI and rke
// objects; the externally-managed annotation (v2.10+).
package rancher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The resources the double reads and writes.
var (
	ProvisioningClusters = schema.GroupVersionResource{Group: "provisioning.cattle.io", Version: "v1", Resource: "clusters"}
	ManagementClusters   = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "clusters"}
	FleetClusters        = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusters"}
	Settings             = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "settings"}
)

// DefaultResync is how often every object is handled again without a
// change: rancher/lasso v0.2.x pkg/cache/cache.go resyncDefault (600s,
// CATTLE_RESYNC_DEFAULT overrides it), which Rancher's shared factory uses.
const DefaultResync = 600 * time.Second

// Options configures the double.
type Options struct {
	// Config reaches the API server.
	Config *rest.Config
	// Version is the Rancher release to behave as, e.g. "v2.8.5", "v2.10.3".
	Version string
	// Resync is the informers' resync period: 0 is DefaultResync. A direct
	// edit of a fleet Cluster (or of a provisioning Cluster generated from a
	// legacy management Cluster) is put back only when its source is
	// handled again, as in Rancher, which does not watch those objects.
	Resync time.Duration
	// FleetDefaultWorkspace is the fleet-default-workspace-name setting:
	// "" is its default, "fleet-default".
	FleetDefaultWorkspace string
}

// Double is a running double. Its methods are safe for concurrent use.
type Double struct {
	opts    Options
	version version
	dyn     dynamic.Interface

	prov, mgmt, fleet cache.SharedIndexInformer
	queue             workqueue.RateLimitingInterface

	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	writes     map[objectKey]int
	reconciles int
	// planRuns and planApplied: Plan runs by management Cluster name and
	// the hash last applied (systemagent.go).
	planRuns    map[string]int
	planApplied map[string]string
	errs        []error
}

type objectKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// queueKey names a handler run: a provisioning Cluster (namespace/name) or
// a management Cluster (name).
type queueKey struct {
	mgmt            bool
	namespace, name string
}

const byClusterName = "by-cluster"

// Start starts the double's informers and its worker, waits for the caches
// and returns. It runs until ctx ends or Stop is called.
func Start(ctx context.Context, opts Options) (*Double, error) {
	v, err := parseVersion(opts.Version)
	if err != nil {
		return nil, err
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.FleetDefaultWorkspace == "" {
		// rancher/rancher v2.10.3 pkg/settings/setting.go: FleetDefaultWorkspaceName
		opts.FleetDefaultWorkspace = "fleet-default"
	}
	dyn, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &Double{
		opts: opts, version: v, dyn: dyn,
		queue:  workqueue.NewRateLimitingQueue(workqueue.NewItemExponentialFailureRateLimiter(20*time.Millisecond, 2*time.Second)),
		cancel: cancel,
		done:   make(chan struct{}),
		writes: map[objectKey]int{}, planRuns: map[string]int{}, planApplied: map[string]string{},
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, opts.Resync)
	d.prov = f.ForResource(ProvisioningClusters).Informer()
	d.mgmt = f.ForResource(ManagementClusters).Informer()
	d.fleet = f.ForResource(FleetClusters).Informer()

	// rancher/rancher v2.10.3 pkg/controllers/provisioningv2/cluster/controller.go:
	// RegisterIndexers, byClusterIndex (provisioning Clusters by status.clusterName).
	if err := d.prov.AddIndexers(cache.Indexers{byClusterName: func(obj interface{}) ([]string, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, nil
		}
		if n, _, _ := unstructured.NestedString(u.Object, "status", "clusterName"); n != "" {
			return []string{n}, nil
		}
		return nil, nil
	}}); err != nil {
		cancel()
		return nil, err
	}
	provHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { d.enqueueProv(obj) },
		UpdateFunc: func(_, obj interface{}) { d.enqueueProv(obj) },
	}
	mgmtHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { d.enqueueMgmt(obj) },
		UpdateFunc: func(_, obj interface{}) { d.enqueueMgmt(obj) },
		DeleteFunc: func(obj interface{}) { d.enqueueMgmt(obj) },
	}
	if _, err := d.prov.AddEventHandler(provHandler); err != nil {
		cancel()
		return nil, err
	}
	if _, err := d.mgmt.AddEventHandler(mgmtHandler); err != nil {
		cancel()
		return nil, err
	}
	// The fleet informer is only a cache, as wrangler's apply WithCacheTypes
	// (rancher/rancher v2.10.3 pkg/controllers/provisioningv2/fleetcluster/fleetcluster.go:
	// Register): no handler of Rancher's enqueues a provisioning Cluster
	// when its fleet Cluster changes.

	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), d.prov.HasSynced, d.mgmt.HasSynced, d.fleet.HasSynced) {
		cancel()
		return nil, fmt.Errorf("rancher double: caches did not sync")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for d.processNext(ctx) {
		}
	}()
	go func() {
		<-ctx.Done()
		d.queue.ShutDown()
		wg.Wait()
		f.Shutdown()
		close(d.done)
	}()
	return d, nil
}

// Stop stops the double and waits until its worker and informers ended.
func (d *Double) Stop() {
	d.cancel()
	<-d.done
}

// Done is closed when the double has stopped.
func (d *Double) Done() <-chan struct{} { return d.done }

// Version is the Rancher release the double behaves as.
func (d *Double) Version() string { return d.version.String() }

// Writes is how many write requests (create, patch, status patch, update,
// delete) the double sent for one object (namespace "" for cluster-scoped).
func (d *Double) Writes(gvr schema.GroupVersionResource, namespace, name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes[objectKey{gvr, namespace, name}]
}

// TotalWrites is how many write requests the double sent in all.
func (d *Double) TotalWrites() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.writes {
		n += c
	}
	return n
}

// Reconciles is how many times a handler ran (with or without writing).
func (d *Double) Reconciles() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reconciles
}

// Errors returns the handler errors so far (each was retried).
func (d *Double) Errors() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.errs...)
}

func (d *Double) count(gvr schema.GroupVersionResource, namespace, name string) {
	d.mu.Lock()
	d.writes[objectKey{gvr, namespace, name}]++
	d.mu.Unlock()
}

func (d *Double) enqueueProv(obj interface{}) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		d.queue.Add(queueKey{namespace: u.GetNamespace(), name: u.GetName()})
	}
}

// enqueueMgmt handles a management Cluster and, as Rancher's
// relatedresource.Watch "cluster-watch" does, the provisioning Cluster
// whose status.clusterName names it.
//
// rancher/rancher v2.8.5, v2.10.3 pkg/controllers/provisioningv2/cluster/controller.go:
// Register (relatedresource.Watch), clusterWatch.
func (d *Double) enqueueMgmt(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	d.queue.Add(queueKey{mgmt: true, name: u.GetName()})
	provs, _ := d.prov.GetIndexer().ByIndex(byClusterName, u.GetName())
	if len(provs) > 0 {
		d.enqueueProv(provs[0])
	}
}

func (d *Double) processNext(ctx context.Context) bool {
	item, shutdown := d.queue.Get()
	if shutdown {
		return false
	}
	defer d.queue.Done(item)
	k := item.(queueKey)
	var err error
	if k.mgmt {
		err = d.syncMgmt(ctx, k.name)
	} else {
		err = d.syncProv(ctx, k.namespace, k.name)
	}
	d.mu.Lock()
	d.reconciles++
	if err != nil && ctx.Err() == nil {
		d.errs = append(d.errs, err)
	}
	d.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		d.queue.AddRateLimited(item)
		return true
	}
	d.queue.Forget(item)
	return true
}

func (d *Double) get(inf cache.SharedIndexInformer, namespace, name string) *unstructured.Unstructured {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, _ := inf.GetIndexer().GetByKey(key)
	if !ok {
		return nil
	}
	return obj.(*unstructured.Unstructured).DeepCopy()
}
