package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The cluster kinds of a Rancher installation.
var (
	ProvisioningClusters = schema.GroupVersionResource{Group: "provisioning.cattle.io", Version: "v1", Resource: "clusters"}
	ManagementClusters   = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "clusters"}
	FleetClusters        = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusters"}
)

// EnvRecorder watches objects of one kind and counts, per object, the
// changes of its spec.agentEnvVars (each one an agent redeploy where the
// object is a fleet Cluster: Fleet hashes the list into
// status.agentEnvVarsHash), and the changes of anything else but its
// status (spec, labels, annotations: what a write fight changes; Rancher
// updates its management Clusters' status every 15 s whatever else runs).
type EnvRecorder struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	last   map[string]string // ns/name → env JSON
	rest   map[string]string // ns/name → spec and metadata without the env
	seq    int
	log    []envChange
	broken bool // its watch ended (a 410 Gone ends a RetryWatcher): it saw no more
}

type envChange struct {
	seq       int
	key       string
	env, from string
	other     bool // a change of the rest, not of the env
}

// RecordEnv starts an EnvRecorder on gvr (all namespaces).
func RecordEnv(dyn dynamic.Interface, gvr schema.GroupVersionResource) (*EnvRecorder, error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &EnvRecorder{cancel: cancel, last: map[string]string{}, rest: map[string]string{}}
	res := dyn.Resource(gvr)
	lw := &cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) },
	}
	l, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	for i := range l.Items {
		r.observe(&l.Items[i])
	}
	w, err := watchtools.NewRetryWatcher(l.GetResourceVersion(), lw)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					r.mu.Lock()
					r.broken = ctx.Err() == nil
					r.mu.Unlock()
					return
				}
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted && ev.Type != watch.Bookmark {
					r.observe(u)
				}
			}
		}
	}()
	return r, nil
}

func (r *EnvRecorder) observe(u *unstructured.Unstructured) {
	env, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	b, _ := json.Marshal(env)
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	delete(spec, "agentEnvVars")
	restJSON, _ := json.Marshal(map[string]interface{}{"spec": spec, "labels": u.GetLabels(), "annotations": u.GetAnnotations()})
	key := u.GetNamespace() + "/" + u.GetName()
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.last[key]
	prevRest := r.rest[key]
	r.last[key], r.rest[key] = string(b), string(restJSON)
	if !seen {
		r.seq++
		return
	}
	if prev != string(b) {
		r.seq++
		r.log = append(r.log, envChange{seq: r.seq, key: key, env: string(b), from: prev})
	}
	if prevRest != string(restJSON) {
		r.seq++
		r.log = append(r.log, envChange{seq: r.seq, key: key, env: string(restJSON), from: prevRest, other: true})
	}
}

// Mark returns a point in the recorder's history.
func (r *EnvRecorder) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

// Changes returns, per object, how many times its spec.agentEnvVars
// changed after mark.
func (r *EnvRecorder) Changes(mark int) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, c := range r.log {
		if c.seq > mark && !c.other {
			out[c.key]++
		}
	}
	return out
}

// OtherChanges returns, per object, how many times its spec (the env
// aside), labels or annotations changed after mark.
func (r *EnvRecorder) OtherChanges(mark int) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, c := range r.log {
		if c.seq > mark && c.other {
			out[c.key]++
		}
	}
	return out
}

// Describe lists the changes after mark.
func (r *EnvRecorder) Describe(mark int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ""
	for _, c := range r.log {
		if c.seq > mark {
			s += fmt.Sprintf("  %s: %s → %s\n", c.key, c.from, c.env)
		}
	}
	return s
}

// Broken reports whether the recorder's watch ended before Stop: what it
// says about the time after is then incomplete.
func (r *EnvRecorder) Broken() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.broken
}

// Stop stops the recorder.
func (r *EnvRecorder) Stop() { r.cancel() }
