package agentenv

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// fleetHandler enqueues a fleet Cluster when it is added, deleted, or
// updated in a field the controller reads (sameApartFromResourceVersion).
func (c *Controller) fleetHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueFleet,
		UpdateFunc: func(old, new interface{}) {
			if !sameApartFromResourceVersion(old, new) {
				c.enqueueFleet(new)
			}
		},
		DeleteFunc: c.enqueueFleet,
	}
}

func (c *Controller) enqueueFleet(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		c.loop.Add(key)
	}
}

// relatedHandler enqueues the fleet Clusters whose management Cluster name
// mgmtName gives, for the old and the new object, when a provisioning or
// management Cluster changes in a field the controller reads.
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
		objs, _ := c.fleet.GetIndexer().ByIndex(index.ByManagementName, name)
		for _, o := range objs {
			c.enqueueFleet(o)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, new interface{}) {
			if sameApartFromResourceVersion(old, new) {
				return
			}
			enqueue(old)
			enqueue(new)
		},
		DeleteFunc: enqueue,
	}
}

// watchSettings re-enqueues every fleet Cluster when the global agent
// triple or the channel changes. Only the agent triple decides a cluster's
// env: a change of the Fleet controllers' or Rancher's triple re-syncs no
// cluster. A change of the agent triple also starts its propagation's
// summary (propagation.go).
func (c *Controller) watchSettings() {
	c.prop.last, c.prop.lastOK = c.opts.Triples.Effective(settings.FleetAgent)
	c.opts.Triples.OnChange(func() {
		t, ok := c.opts.Triples.Effective(settings.FleetAgent)
		if c.prop.tripleChanged(t, ok, c.clock.Now(), c.fleet.GetStore().ListKeys) {
			c.EnqueueAll()
		}
	})
	c.opts.Channels.OnChannelChange(c.EnqueueAll)
}

// watchRancherDeployment follows the Rancher version the Rancher
// Deployment's image shows (rancher.Detect) and re-enqueues every cluster
// when it changes: on opts.RancherDeployments when given, else on an
// informer of its own, by name.
func (c *Controller) watchRancherDeployment() {
	update := func(obj interface{}) {
		var v rancher.Version
		if d := asDeployment(obj); d != nil {
			v, _ = rancher.Detect(d)
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
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, new interface{}) { update(new) },
		DeleteFunc: func(interface{}) { update(nil) },
	}
	if c.opts.RancherDeployments != nil {
		c.rancherDep = c.opts.RancherDeployments
		c.handle(c.rancherDep, h, true)
		return
	}
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
	c.handle(c.rancherDep, h, false)
}

// asDeployment returns obj as a Deployment (typed, or converted from
// unstructured); nil for anything else.
func asDeployment(obj interface{}) *appsv1.Deployment {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o
	case *unstructured.Unstructured:
		var d appsv1.Deployment
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d) == nil {
			return &d
		}
	}
	return nil
}
