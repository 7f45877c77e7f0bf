package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

var (
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	configMapGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// target is what an observer watches: every object of a resource in a
// namespace, or the one named.
type target struct {
	kind string // "Deployment", "Cluster" or "ConfigMap": decides what counts
	gvr  schema.GroupVersionResource
	ns   string
	name string // "" for all
}

// observer counts, from watches (never polls, so no change between two
// looks is missed), what the controller's writes restart:
//   - a Deployment: each increase of metadata.generation (a spec change: one
//     rollout);
//   - a fleet Cluster: each change of spec.agentEnvVars (one fleet-agent
//     redeploy); other writes of a Cluster (annotations) are logged apart;
//   - a ConfigMap: each change of its data.
type observer struct {
	mu     sync.Mutex
	last   map[string]*unstructured.Unstructured
	counts map[string]int
	other  map[string]int // writes that restart nothing (a Cluster's metadata)
	log    []string
}

// mark is a point in an observer's record.
type mark struct {
	counts, other map[string]int
	log           int
}

func observe(t *testing.T, targets ...target) *observer {
	t.Helper()
	o := &observer{last: map[string]*unstructured.Unstructured{}, counts: map[string]int{}, other: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, tg := range targets {
		tg := tg
		opts := metav1.ListOptions{}
		if tg.name != "" {
			opts.FieldSelector = "metadata.name=" + tg.name
		}
		ri := dyn(tg.gvr, tg.ns)
		l, err := ri.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			o.last[tg.kind+" "+l.Items[i].GetName()] = &l.Items[i]
		}
		rw, err := watchtools.NewRetryWatcher(l.GetResourceVersion(), &cache.ListWatch{WatchFunc: func(lo metav1.ListOptions) (watch.Interface, error) {
			lo.FieldSelector = opts.FieldSelector
			return ri.Watch(ctx, lo)
		}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rw.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-rw.ResultChan():
					if !ok {
						return
					}
					if u, isObj := ev.Object.(*unstructured.Unstructured); isObj {
						o.record(tg.kind, ev.Type, u)
					}
				}
			}
		}()
	}
	return o
}

func (o *observer) record(kind string, typ watch.EventType, u *unstructured.Unstructured) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := kind + " " + u.GetName()
	prev := o.last[key]
	switch typ {
	case watch.Added:
		o.last[key] = u
		o.log = append(o.log, fmt.Sprintf("%s: created (generation %d)", key, u.GetGeneration()))
		return
	case watch.Deleted:
		delete(o.last, key)
		o.log = append(o.log, key+": deleted")
		return
	case watch.Modified:
	default:
		return
	}
	o.last[key] = u
	if prev == nil {
		o.log = append(o.log, key+": modified, not seen before")
		return
	}
	switch kind {
	case "Deployment":
		if d := u.GetGeneration() - prev.GetGeneration(); d > 0 {
			o.counts[key] += int(d)
			o.log = append(o.log, fmt.Sprintf("%s: generation %d → %d: %s (manager %s)", key, prev.GetGeneration(), u.GetGeneration(),
				strings.Join(deploymentEnvDiff(prev, u), "; "), lastManager(u)))
		}
	case "Cluster":
		a, b := objEnv(prev), objEnv(u)
		if a != b {
			o.counts[key]++
			o.log = append(o.log, fmt.Sprintf("%s: spec.agentEnvVars %s → %s", key, a, b))
		} else {
			o.other[key]++
			o.log = append(o.log, fmt.Sprintf("%s: written, env unchanged (annotations %v)", key, u.GetAnnotations()))
		}
	case "ConfigMap":
		if !reflect.DeepEqual(prev.Object["data"], u.Object["data"]) {
			o.counts[key]++
			o.log = append(o.log, key+": data changed")
		}
	}
}

func (o *observer) mark() mark {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := mark{counts: map[string]int{}, other: map[string]int{}, log: len(o.log)}
	for k, v := range o.counts {
		m.counts[k] = v
	}
	for k, v := range o.other {
		m.other[k] = v
	}
	return m
}

// since returns, per object, the counted changes since m, the writes that
// restart nothing since m, and the log lines since m.
func (o *observer) since(m mark) (counts, other map[string]int, log []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	counts, other = map[string]int{}, map[string]int{}
	for k, v := range o.counts {
		if d := v - m.counts[k]; d != 0 {
			counts[k] = d
		}
	}
	for k, v := range o.other {
		if d := v - m.other[k]; d != 0 {
			other[k] = d
		}
	}
	return counts, other, append([]string{}, o.log[m.log:]...)
}

// lastManager names the field manager of the newest managedFields entry.
func lastManager(u *unstructured.Unstructured) string {
	var name string
	var newest metav1.Time
	for _, mf := range u.GetManagedFields() {
		if mf.Time != nil && !mf.Time.Before(&newest) {
			newest, name = *mf.Time, mf.Manager
		}
	}
	return name
}

// change is one field an observed write changed, in plan's vocabulary
// (plan.Change without restarts).
type change struct{ Object, Field, Old, New string }

func (c change) String() string {
	return fmt.Sprintf("%s | %s: %q → %q", c.Object, c.Field, c.Old, c.New)
}

// containerEnv returns, per container, each env name's value as a
// container runs it (the last entry of a name; "(valueFrom)" when it takes
// its value from a source).
func containerEnv(u *unstructured.Unstructured) map[string]map[string]string {
	out := map[string]map[string]string{}
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		cm, _ := c.(map[string]interface{})
		name, _ := cm["name"].(string)
		env := map[string]string{}
		l, _ := cm["env"].([]interface{})
		for _, e := range l {
			em, _ := e.(map[string]interface{})
			n, _ := em["name"].(string)
			v, _ := em["value"].(string)
			if _, from := em["valueFrom"]; from {
				v = "(valueFrom)"
			}
			env[n] = v
		}
		out[name] = env
	}
	return out
}

// deploymentChanges returns the env entries that differ between two
// versions of a Deployment, in plan's words ("container C env NAME").
func deploymentChanges(before, after *unstructured.Unstructured) []change {
	object := "Deployment " + after.GetNamespace() + "/" + after.GetName()
	b, a := containerEnv(before), containerEnv(after)
	var out []change
	for c, env := range a {
		for n, v := range env {
			if old, ok := b[c][n]; !ok || old != v {
				out = append(out, change{object, "container " + c + " env " + n, old, v})
			}
		}
		for n, old := range b[c] {
			if _, ok := env[n]; !ok {
				out = append(out, change{object, "container " + c + " env " + n, old, "(removed)"})
			}
		}
	}
	sortChanges(out)
	return out
}

func deploymentEnvDiff(before, after *unstructured.Unstructured) []string {
	var out []string
	for _, c := range deploymentChanges(before, after) {
		out = append(out, fmt.Sprintf("%s %s→%s", strings.TrimPrefix(c.Field, "container "), c.Old, c.New))
	}
	if len(out) == 0 {
		out = append(out, "no env change")
	}
	return out
}

func sortChanges(cs []change) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Object != cs[j].Object {
			return cs[i].Object < cs[j].Object
		}
		return cs[i].Field < cs[j].Field
	})
}

// planEnv is a cluster's spec.agentEnvVars as plan prints it:
// "NAME=value NAME=value", "(none)" when empty.
func planEnv(u *unstructured.Unstructured) string {
	if s := objEnv(u); s != "" {
		return strings.ReplaceAll(s, ",", " ")
	}
	return "(none)"
}

// jsonString is a compact rendering for failure messages.
func jsonString(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}
