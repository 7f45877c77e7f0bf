// Package electionstatus keeps, on leasetune's leader, the one
// ElectionStatus object (pkg/electionstatus) in step with what the leader
// knows: the settings' state, the Fleet agent channel, the Fleet and
// Rancher Deployments, rancher-config and the clusters, all read from the
// informers the other controllers already run. It recomputes at most once
// per Debounce after a change, and writes the status subresource (server-
// side apply, field manager leasetune) only when the status differs from
// the object's: at rest it writes nothing.
//
// It does not read the API itself (beyond its own object) and writes
// nothing but that object.
package electionstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/workloop"
)

// FieldManager is the field manager of the status writes.
const FieldManager = own.FieldManager

// GVR is the ElectionStatus resource (electionstatus.GVR).
var GVR = electionstatus.GVR

// Debounce is how long after a change the status is computed: a burst of
// changes (a global change writing 10,000 clusters) is one computation per
// Debounce, not one per event.
const Debounce = 2 * time.Second

// RetryMin and RetryMax bound the backoff of a failed write (a refused
// one, or its CRD gone): 1 s doubling to 30 s, as leasetune's other
// retries. Not client-go's default, which grows to 1000 s: at rest nothing
// else wakes the controller (the informer of a kind with no object sees no
// event when its CRD returns), so the status would stay missing that long.
const (
	RetryMin = time.Second
	RetryMax = 30 * time.Second
)

// Sources are where the controller reads the installation: each a read of
// an informer's cache or of a controller's memory, never of the API.
type Sources struct {
	// Settings are the Setting objects of the nine settings (others may be
	// among them: they are left out).
	Settings func() []v3.Setting
	// Status is the settings' state of a component (the Provider's).
	Status func(settings.Component) settings.ComponentStatus
	// Channel is the Fleet agent channel, what decided it, and whether it
	// is known (fleetsettings' record).
	Channel func() (fleet.AgentChannel, string, bool)
	// FleetDeployments are the Deployments in the Fleet namespace.
	FleetDeployments func() []*appsv1.Deployment
	// RancherConfig is rancher-config (nil: none).
	RancherConfig func() *corev1.ConfigMap
	// Rancher is the Rancher Deployment (nil: none, or not watched).
	Rancher func() *appsv1.Deployment
	// Clusters are the fleet, provisioning and management Clusters as the
	// agentenv controller caches them, and the Rancher version its routing
	// follows; nil before agentenv runs.
	Clusters func() (fleets, provs, mgmts []unstructured.Unstructured, rv rancher.Version)
}

// Options configure New.
type Options struct {
	// Client reads (an informer by name) and writes the ElectionStatus.
	Client dynamic.Interface
	// Sources are what the status is computed from.
	Sources Sources
	// Compute are the options of electionstatus.Compute.
	Compute electionstatus.Options
	// Inventory names the namespaces and objects the sources read, as
	// `leasetune plan` is given them (the status names objects by them:
	// "ConfigMap <RancherNamespace>/rancher-config").
	Inventory inventory.Options
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// Controller keeps the ElectionStatus object.
type Controller struct {
	opts     Options
	log      *slog.Logger
	loop     *workloop.Loop[string]
	factory  dynamicinformer.DynamicSharedInformerFactory
	informer cache.SharedIndexInformer

	mu        sync.Mutex
	written   []byte // the status last written, as JSON (nil: none yet)
	writtenRV string // the resourceVersion that write answered
	writtenOn string // the resourceVersion that write was made on
}

// key is the one work item.
const key = electionstatus.Name

// New builds the controller; call Changed from the sources' event handlers
// and Run to start it.
func New(opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Compute.Memo == nil {
		// Only sync computes with it, one at a time (one work item).
		opts.Compute.Memo = electionstatus.NewMemo()
	}
	c := &Controller{opts: opts, log: opts.Log.With("controller", "electionstatus")}
	c.loop = workloop.New(workloop.Options{Name: "electionstatus", Log: opts.Log,
		RateLimiter: workqueue.NewItemExponentialFailureRateLimiter(RetryMin, RetryMax)},
		func(ctx context.Context, _ string) error { return c.sync(ctx) })
	c.factory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Client, 0, "", func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", electionstatus.Name).String()
	})
	c.informer = c.factory.ForResource(GVR).Informer()
	_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// Someone else's edit or a delete of the object: put it back.
		AddFunc:    func(interface{}) { c.Changed() },
		UpdateFunc: func(_, _ interface{}) { c.Changed() },
		DeleteFunc: func(interface{}) { c.Changed() },
	})
	return c
}

// Changed says a source changed: the status is computed again within
// Debounce. It never blocks.
func (c *Controller) Changed() { c.loop.AddAfter(key, Debounce) }

// Handler is an informer event handler that calls Changed.
func (c *Controller) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.Changed() },
		UpdateFunc: func(_, _ interface{}) { c.Changed() },
		DeleteFunc: func(interface{}) { c.Changed() },
	}
}

// ShutDown stops a controller that will not Run (its queue's goroutine
// ends); Run does it itself when it returns.
func (c *Controller) ShutDown() { c.loop.ShutDown() }

// Run keeps the object until ctx ends. It returns an error when its
// informer does not sync (the CRD is not installed: the chart installs it).
func (c *Controller) Run(ctx context.Context) error {
	defer c.loop.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return fmt.Errorf("the ElectionStatus informer did not sync (is the CRD electionstatuses.leasetune.io installed?)")
	}
	c.loop.Add(key)
	return c.loop.Run(ctx)
}

// Snapshot is the installation as the sources have it now.
func (c *Controller) Snapshot() (*inventory.Snapshot, map[settings.Component]settings.ComponentStatus) {
	s := c.opts.Sources
	snap := &inventory.Snapshot{Options: c.opts.Inventory}
	if s.Settings != nil {
		for _, o := range s.Settings() {
			if _, ok := settings.Lookup(o.Name); ok {
				snap.Settings = append(snap.Settings, o)
			}
		}
	}
	if s.Channel != nil {
		if ch, ev, ok := s.Channel(); ok {
			snap.Channel, snap.Evidence = ch, ev
		}
	}
	if s.FleetDeployments != nil {
		for _, d := range s.FleetDeployments() {
			snap.FleetDeployments = append(snap.FleetDeployments, *d)
		}
	}
	if s.RancherConfig != nil {
		snap.RancherConfig = s.RancherConfig()
	}
	var rv rancher.Version
	if s.Rancher != nil {
		if d := s.Rancher(); d != nil {
			snap.Rancher, snap.RancherReplicas = d, inventory.Replicas(d)
			rv, _ = rancher.Detect(d)
		}
	}
	if s.Clusters != nil {
		fleets, provs, mgmts, crv := s.Clusters()
		if crv.Known {
			rv = crv
		}
		snap.FleetClusters, snap.ProvisioningClusters, snap.ManagementClusters = fleets, provs, mgmts
		snap.FleetClusterCount = len(fleets)
		snap.Clusters = inventory.Route(fleets, provs, mgmts, rv)
	}
	snap.RancherVersion = rv
	triples := map[settings.Component]settings.ComponentStatus{}
	for _, comp := range settings.Components {
		if s.Status != nil {
			triples[comp] = s.Status(comp)
		}
	}
	return snap, triples
}

// sync gathers the installation from the caches (Snapshot, current),
// computes the status (electionstatus.Compute, pure) and writes it with
// one JSON patch that puts the whole status in place on the cached
// object's resourceVersion (a write in between fails the test, and the
// next sync looks again). Where the object is missing it is created first
// (the status subresource drops a status given on create): the one sync
// with two writes. The status is compared as JSON, as
// the API server stores it; a status equal to the one last written, on an
// object nobody changed since (the resourceVersion that write answered),
// is not written again, so that a field the API server dropped can never
// make a write loop. Then it reports once.
func (c *Controller) sync(ctx context.Context) error {
	snap, triples := c.Snapshot()
	want, err := json.Marshal(electionstatus.Compute(snap, triples, c.opts.Compute))
	if err != nil {
		return err
	}
	have, rv, exists, err := c.current()
	if err != nil {
		return err
	}
	c.mu.Lock()
	// The cache still at the object the last write was made on has not
	// shown that write yet: the object is at the rv that write answered.
	behind := exists && c.writtenOn != "" && rv == c.writtenOn
	if behind {
		rv = c.writtenRV
	}
	same := exists && (string(have) == string(want) || (string(c.written) == string(want) && c.writtenRV == rv))
	c.mu.Unlock()
	if same {
		return nil
	}
	if !exists {
		if rv, err = c.create(ctx); err != nil {
			return err
		}
	}
	got, err := c.replaceStatus(ctx, rv, want)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.written, c.writtenRV, c.writtenOn = want, got.GetResourceVersion(), rv
	c.mu.Unlock()
	metrics.Writes.WithLabelValues("electionstatus").Inc()
	c.log.Info("status written", "channel", snap.Channel, "clusters", len(snap.FleetClusters))
	return nil
}

// create makes the ElectionStatus object, without a status, and returns
// its resourceVersion: the created object's, or, where it exists already
// (the informer has not seen it yet), the one read.
func (c *Controller) create(ctx context.Context) (string, error) {
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": GVR.GroupVersion().String(), "kind": electionstatus.Kind,
		"metadata": map[string]interface{}{"name": electionstatus.Name,
			"labels": map[string]interface{}{own.ManagedByLabel: own.FieldManager}},
		"spec": map[string]interface{}{},
	}}
	got, err := c.opts.Client.Resource(GVR).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		got, err = c.opts.Client.Resource(GVR).Get(ctx, electionstatus.Name, metav1.GetOptions{})
	} else if err == nil {
		metrics.Writes.WithLabelValues("electionstatus").Inc()
	}
	if err != nil {
		return "", fmt.Errorf("create ElectionStatus %s: %w", electionstatus.Name, err)
	}
	return got.GetResourceVersion(), nil
}

// replaceStatus puts want in place of the whole status (a field another
// writer added is removed too: a server-side apply would prune only its
// own), if the object is still at resourceVersion rv.
func (c *Controller) replaceStatus(ctx context.Context, rv string, want []byte) (*unstructured.Unstructured, error) {
	ops, err := json.Marshal([]map[string]interface{}{
		{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
		// "add" replaces a member that exists and adds one that does not.
		{"op": "add", "path": "/status", "value": json.RawMessage(want)},
	})
	if err != nil {
		return nil, err
	}
	got, err := c.opts.Client.Resource(GVR).Patch(ctx, electionstatus.Name, types.JSONPatchType, ops,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		return nil, fmt.Errorf("write the status of ElectionStatus %s: %w", electionstatus.Name, err)
	}
	return got, nil
}

// current is the object's status as the informer has it, as JSON (nil
// when it has none), and its resourceVersion.
func (c *Controller) current() ([]byte, string, bool, error) {
	obj, exists, err := c.informer.GetStore().GetByKey(electionstatus.Name)
	if err != nil || !exists {
		return nil, "", exists, err
	}
	u := obj.(*unstructured.Unstructured)
	out, err := statusOf(u)
	if err != nil {
		return nil, "", true, err
	}
	return out, u.GetResourceVersion(), true, nil
}

// statusOf is u's status as JSON through the Go type, so that it is in the
// same form as the computed one's (field order, omitted empty fields); nil
// when it has none or one not of this shape (written anew).
func statusOf(u *unstructured.Unstructured) ([]byte, error) {
	raw, found := u.Object["status"]
	if !found {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var st electionstatus.Status
	if json.Unmarshal(b, &st) != nil {
		return nil, nil
	}
	return json.Marshal(st)
}

// Written is the status last written, as JSON (nil: none yet), for tests.
func (c *Controller) Written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written
}
