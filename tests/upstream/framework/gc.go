package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// GarbageCollector is a double of kube-controller-manager's garbage
// collector, which the test control plane does not run, for the objects of
// the resources it is given: an object all of whose owners are gone (no
// object of the owner reference's kind and name, or one with another UID)
// is deleted, in the background. Written from k8s.io/kubernetes v1.32.13
// pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteItem
// (solid owners keep the object; with only absent ones it is deleted;
// with some absent and some solid the real collector removes the dangling
// references, which this double leaves alone). It looks every interval
// instead of following the owners' events.
type GarbageCollector struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	gvrs   []schema.GroupVersionResource
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	deleted []string
	errs    []string
}

// StartGarbageCollector starts the double for the objects of gvrs.
func StartGarbageCollector(cfg *rest.Config, interval time.Duration, gvrs ...schema.GroupVersionResource) (*GarbageCollector, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &GarbageCollector{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		gvrs: gvrs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			g.collect(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return g, nil
}

// Stop stops the double.
func (g *GarbageCollector) Stop() {
	g.cancel()
	<-g.done
}

// Deleted returns the objects the double deleted ("resource namespace/name").
func (g *GarbageCollector) Deleted() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.deleted...)
}

// Errors returns what the double could not do.
func (g *GarbageCollector) Errors() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.errs...)
}

func (g *GarbageCollector) fail(format string, args ...interface{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) < 20 {
		g.errs = append(g.errs, fmt.Sprintf(format, args...))
	}
}

// collect deletes the objects of g.gvrs whose owners are all gone.
func (g *GarbageCollector) collect(ctx context.Context) {
	for _, gvr := range g.gvrs {
		l, err := g.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil && !apierrors.IsNotFound(err) {
				g.fail("list %s: %v", gvr.Resource, err)
			}
			continue
		}
		for _, o := range l.Items {
			refs := o.GetOwnerReferences()
			if len(refs) == 0 || o.GetDeletionTimestamp() != nil {
				continue
			}
			gone := 0
			for _, r := range refs {
				absent, err := g.absent(ctx, o.GetNamespace(), r)
				if err != nil {
					if ctx.Err() == nil {
						g.fail("owner %s %s of %s %s/%s: %v", r.Kind, r.Name, gvr.Resource, o.GetNamespace(), o.GetName(), err)
					}
					break
				}
				if absent {
					gone++
				}
			}
			if gone != len(refs) {
				continue
			}
			bg := metav1.DeletePropagationBackground
			uid := o.GetUID()
			err := g.dyn.Resource(gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(),
				metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
			switch {
			case err == nil:
				g.mu.Lock()
				g.deleted = append(g.deleted, gvr.Resource+" "+o.GetNamespace()+"/"+o.GetName())
				g.mu.Unlock()
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil:
			default:
				g.fail("delete %s %s/%s: %v", gvr.Resource, o.GetNamespace(), o.GetName(), err)
			}
		}
	}
}

// absent reports whether owner r of an object in namespace ns is gone: no
// object of its kind and name there (cluster-scoped kinds: anywhere), or
// one with another UID.
func (g *GarbageCollector) absent(ctx context.Context, ns string, r metav1.OwnerReference) (bool, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return false, err
	}
	m, err := g.mapper.RESTMapping(gv.WithKind(r.Kind).GroupKind(), gv.Version)
	if err != nil {
		return false, err
	}
	ri := dynamic.ResourceInterface(g.dyn.Resource(m.Resource))
	if m.Scope.Name() == "namespace" {
		ri = g.dyn.Resource(m.Resource).Namespace(ns)
	}
	owner, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return owner.GetUID() != r.UID, nil
}
