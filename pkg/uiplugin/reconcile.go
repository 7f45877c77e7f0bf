package uiplugin

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Options configures a Reconciler.
type Options struct {
	// Client reads (watches, by name) and writes the CRD and the UIPlugin.
	Client dynamic.Interface
	// Bundle is the extension served at Endpoint.
	Bundle *Bundle
	// Endpoint is the base URL Rancher fetches the bundle from, e.g.
	// http://leasetune-ui.leasetune-system.svc/uiplugin/leasetune/0.1.0.
	Endpoint string
	// Metadata are more spec.plugin.metadata keys (Desired's extra).
	Metadata map[string]string
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// Reconciler keeps leasetune's UIPlugin in place while the UIPlugin CRD
// exists. At rest it makes no request: it watches the CRD by name and,
// while that exists, the UIPlugin by name, and writes only when a field it
// owns differs (Differs), so a resync or a restart writes nothing.
type Reconciler struct {
	opts  Options
	log   *slog.Logger
	queue workqueue.RateLimitingInterface
	crd   cache.SharedIndexInformer

	mu         sync.Mutex
	plugin     cache.SharedIndexInformer // nil while the CRD is absent
	stopPlugin context.CancelFunc
	lastStatus string
}

// NewReconciler returns a Reconciler; Run starts it.
func NewReconciler(opts Options) *Reconciler {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	r := &Reconciler{opts: opts, log: log.With("controller", "uiplugin"),
		queue: workqueue.NewRateLimitingQueueWithConfig(
			workqueue.NewItemExponentialFailureRateLimiter(time.Second, 5*time.Minute), workqueue.RateLimitingQueueConfig{Name: "uiplugin"})}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Client, 0, metav1.NamespaceAll, byName(CRDName))
	r.crd = f.ForResource(CRDGVR).Informer()
	_, _ = r.crd.AddEventHandler(r.handler())
	return r
}

const key = "uiplugin"

func byName(name string) dynamicinformer.TweakListOptionsFunc {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
}

func (r *Reconciler) handler() cache.ResourceEventHandler {
	add := func(interface{}) { r.queue.Add(key) }
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, n interface{}) { add(n) }, DeleteFunc: add}
}

// Run reconciles until ctx ends; it returns nil then. The CRD watch is
// started here; the UIPlugin watch whenever the CRD is established, and
// stopped when it goes.
func (r *Reconciler) Run(ctx context.Context) error {
	defer r.queue.ShutDown()
	go r.crd.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), r.crd.HasSynced) {
		return nil
	}
	r.queue.Add(key)
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		item, quit := r.queue.Get()
		if quit {
			r.mu.Lock()
			if r.stopPlugin != nil {
				r.stopPlugin()
			}
			r.mu.Unlock()
			return nil
		}
		if err := r.sync(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("UIPlugin not in place; trying again with backoff", "error", err.Error())
			r.queue.AddRateLimited(item)
		} else {
			r.queue.Forget(item)
		}
		r.queue.Done(item)
	}
}

// established reports whether the UIPlugin CRD exists and is served.
func (r *Reconciler) established() bool {
	obj, exists, _ := r.crd.GetStore().GetByKey(CRDName)
	if !exists {
		return false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// pluginInformer starts the watch of the UIPlugin (by name, in Namespace)
// once and returns it synced; ok is false when ctx ended first.
func (r *Reconciler) pluginInformer(ctx context.Context) (cache.SharedIndexInformer, bool) {
	r.mu.Lock()
	inf := r.plugin
	if inf == nil {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.opts.Client, 0, Namespace, byName(r.opts.Bundle.Name))
		inf = f.ForResource(UIPluginGVR).Informer()
		_, _ = inf.AddEventHandler(r.handler())
		pctx, cancel := context.WithCancel(ctx)
		r.plugin, r.stopPlugin = inf, cancel
		go inf.Run(pctx.Done())
	}
	r.mu.Unlock()
	return inf, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
}

// sync makes the UIPlugin what Desired says, when the CRD is there.
func (r *Reconciler) sync(ctx context.Context) error {
	if !r.established() {
		r.mu.Lock()
		if r.plugin != nil {
			r.stopPlugin()
			r.plugin, r.stopPlugin = nil, nil
			r.log.Info("the UIPlugin CRD is gone: no Rancher to register the UI with")
		}
		r.mu.Unlock()
		return nil
	}
	inf, ok := r.pluginInformer(ctx)
	if !ok {
		return nil
	}
	var live *unstructured.Unstructured
	if obj, exists, _ := inf.GetStore().GetByKey(Namespace + "/" + r.opts.Bundle.Name); exists {
		live, _ = obj.(*unstructured.Unstructured)
	}
	r.reportStatus(live)
	desired := Desired(r.opts.Bundle, r.opts.Endpoint, r.opts.Metadata)
	field, differs := Differs(live, desired)
	if !differs {
		return nil
	}
	// The watch may lag behind a write of our own; one live read keeps a
	// stale cache from causing a needless write.
	if live != nil {
		fresh, err := r.opts.Client.Resource(UIPluginGVR).Namespace(Namespace).Get(ctx, desired.GetName(), metav1.GetOptions{})
		if err == nil {
			if field, differs = Differs(fresh, desired); !differs {
				return nil
			}
		}
	}
	if err := Apply(ctx, r.opts.Client, desired); err != nil {
		return err
	}
	r.log.Info("UIPlugin written", "uiplugin", Namespace+"/"+desired.GetName(), "because", field,
		"version", r.opts.Bundle.Version, "endpoint", r.opts.Endpoint)
	return nil
}

// reportStatus logs Rancher's view of the extension (status.cacheState,
// status.error) when it changes, so a Rancher that cannot fetch the
// bundle is visible in leasetune's log.
func (r *Reconciler) reportStatus(live *unstructured.Unstructured) {
	if live == nil {
		return
	}
	state, _, _ := unstructured.NestedString(live.Object, "status", "cacheState")
	msg, _, _ := unstructured.NestedString(live.Object, "status", "error")
	s := fmt.Sprintf("%s|%s", state, msg)
	if s == r.lastStatus {
		return
	}
	r.lastStatus = s
	if msg != "" {
		r.log.Warn("Rancher reports the UI extension not ready", "cacheState", state, "error", msg, "endpoint", r.opts.Endpoint)
	} else if state != "" {
		r.log.Info("Rancher's UI extension cache", "cacheState", state)
	}
}
