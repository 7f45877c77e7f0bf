package electionstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/rancher"
)

// fixture is a controller over a fake dynamic client whose informer is
// never started: the test puts the object into its store as the informer
// would, calls sync once and reads the client's actions (as
// sample-controller's tests do). The fake client answers a status patch
// with the object answer gives (the tracker does not do server-side
// apply).
type fixture struct {
	t        *testing.T
	c        *Controller
	client   *dynamicfake.FakeDynamicClient
	clusters []unstructured.Unstructured
	answer   func(status json.RawMessage) *unstructured.Unstructured
	rv       int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t}
	f.client = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: electionstatus.Kind + "List"})
	// The apiserver's answer to a status write: the object with that status
	// at the next resourceVersion, unless the test says otherwise.
	f.answer = func(status json.RawMessage) *unstructured.Unstructured { return f.object(status) }
	f.client.PrependReactor("patch", electionstatus.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var status json.RawMessage
		switch p.GetPatchType() {
		case types.ApplyPatchType:
			var body struct {
				Status json.RawMessage `json:"status"`
			}
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				return true, nil, err
			}
			status = body.Status
		case types.JSONPatchType:
			var ops []struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(p.GetPatch(), &ops); err != nil {
				return true, nil, err
			}
			status = ops[len(ops)-1].Value
		}
		return true, f.answer(status), nil
	})
	f.client.PrependReactor("create", electionstatus.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, f.object(nil), nil
	})
	f.c = New(Options{Client: f.client, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sources: Sources{Clusters: func() ([]unstructured.Unstructured, []unstructured.Unstructured, []unstructured.Unstructured, rancher.Version) {
			return f.clusters, nil, nil, rancher.Version{}
		}}})
	return f
}

// object is the ElectionStatus at the next resourceVersion with status
// (nil: none).
func (f *fixture) object(status json.RawMessage) *unstructured.Unstructured {
	f.rv++
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": GVR.GroupVersion().String(), "kind": electionstatus.Kind,
		"metadata": map[string]interface{}{"name": electionstatus.Name, "resourceVersion": fmt.Sprint(f.rv)},
	}}
	if status != nil {
		var st map[string]interface{}
		if err := json.Unmarshal(status, &st); err != nil {
			f.t.Fatal(err)
		}
		u.Object["status"] = st
	}
	return u
}

// cached puts u into the informer's store, as its watch would.
func (f *fixture) cached(u *unstructured.Unstructured) {
	f.t.Helper()
	if err := f.c.informer.GetStore().Add(u); err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one sync and returns the client's actions, as "verb
// resource[/subresource] patchtype".
func (f *fixture) sync() []string {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(context.Background()); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	var out []string
	for _, a := range f.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		if p, ok := a.(k8stesting.PatchAction); ok {
			s += " " + string(p.GetPatchType())
		}
		out = append(out, s)
	}
	return out
}

func expect(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: actions %q, want %q", step, got, want)
	}
}

func (f *fixture) computed() json.RawMessage {
	snap, triples := f.c.Snapshot()
	b, err := json.Marshal(electionstatus.Compute(snap, triples, electionstatus.Options{}))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func cluster(name, rv string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": name, "namespace": "fleet-default", "resourceVersion": rv}}}
	return u
}

// TestDoNothing: the object's status is the one computed: no request.
func TestDoNothing(t *testing.T) {
	f := newFixture(t)
	f.cached(f.object(f.computed()))
	expect(t, "status current", f.sync())
}

// TestCreateThenStatus: no object: one create, then one JSON patch of the
// status, guarded by the created object's resourceVersion; once the
// informer has the answer, nothing more.
func TestCreateThenStatus(t *testing.T) {
	f := newFixture(t)
	expect(t, "no object", f.sync(), "create electionstatuses", replace)
	guarded(t, f.client.Actions()[1], fmt.Sprint(f.rv-1))
	f.cached(f.object(f.computed()))
	expect(t, "the answer cached", f.sync())
}

// replace is a write of the whole status.
var replace = "patch electionstatuses/status " + string(types.JSONPatchType)

// guarded checks that a is the JSON patch that tests the resourceVersion
// rv, then puts the status in place.
func guarded(t *testing.T, a k8stesting.Action, rv string) {
	t.Helper()
	body := a.(k8stesting.PatchAction).GetPatch()
	var ops []map[string]interface{}
	if err := json.Unmarshal(body, &ops); err != nil || len(ops) != 2 || ops[0]["op"] != "test" || ops[0]["path"] != "/metadata/resourceVersion" ||
		ops[0]["value"] != rv || ops[1]["op"] != "add" || ops[1]["path"] != "/status" {
		t.Errorf("the JSON patch %s: want a test of resourceVersion %s, then the status put in place", body, rv)
	}
}

// TestWriteOnChange: a cluster more than the object's status counts: one
// write; once the informer has the answer, nothing more.
func TestWriteOnChange(t *testing.T) {
	f := newFixture(t)
	f.clusters = []unstructured.Unstructured{cluster("a", "1")}
	f.cached(f.object(f.computed()))
	expect(t, "status current", f.sync())
	f.clusters = append(f.clusters, cluster("b", "1"))
	expect(t, "a cluster added", f.sync(), replace)
	f.cached(f.object(f.computed()))
	expect(t, "the answer cached", f.sync())
	f.clusters[0] = cluster("a", "2")
	expect(t, "a cluster's new resourceVersion, the status unchanged", f.sync())
}

// TestForeignFieldReplaced: a field another writer added to the status is
// gone after the one write (the whole status is put in place: a
// server-side apply would remove only its own fields).
func TestForeignFieldReplaced(t *testing.T) {
	f := newFixture(t)
	foreign := f.object(json.RawMessage(`{"clustersNotListed":7}`))
	f.cached(foreign)
	expect(t, "a foreign field", f.sync(), replace)
	guarded(t, f.client.Actions()[0], foreign.GetResourceVersion())
}

// TestNoWriteLoop: a status the apiserver answers without one of its
// fields (a schema that prunes it) is not written again while nobody else
// changed the object (the status last written, on the resourceVersion that
// write answered, counts as current); another's edit of the object (a new
// resourceVersion) makes it written again.
func TestNoWriteLoop(t *testing.T) {
	f := newFixture(t)
	f.clusters = []unstructured.Unstructured{cluster("a", "1")}
	f.answer = func(json.RawMessage) *unstructured.Unstructured { return f.object(json.RawMessage(`{}`)) }
	f.cached(f.object(nil))
	expect(t, "first", f.sync(), replace)
	answered := f.object(json.RawMessage(`{}`))
	answered.SetResourceVersion(f.c.writtenRV)
	f.cached(answered)
	expect(t, "the pruned answer cached", f.sync())
	expect(t, "again", f.sync())
	f.cached(f.object(json.RawMessage(`{}`)))
	expect(t, "another's edit", f.sync(), replace)
}

// TestCreatedMeanwhile: the object exists but the informer has not seen it
// yet (its kind just served again): the create answers AlreadyExists, the
// object is read, and its status written on that resourceVersion.
func TestCreatedMeanwhile(t *testing.T) {
	f := newFixture(t)
	existing := f.object(nil)
	f.client.PrependReactor("create", electionstatus.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewAlreadyExists(GVR.GroupResource(), electionstatus.Name)
	})
	f.client.PrependReactor("get", electionstatus.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, existing, nil
	})
	expect(t, "not cached, created meanwhile", f.sync(), "create electionstatuses", "get electionstatuses", replace)
	guarded(t, f.client.Actions()[2], existing.GetResourceVersion())
}

// TestCacheBehindItsOwnWrite: a sync before the informer has shown the
// controller's last write tests the resourceVersion that write answered
// (testing the cached one would fail, 422, and be retried as an error),
// and writes nothing when the status is the one it wrote.
func TestCacheBehindItsOwnWrite(t *testing.T) {
	f := newFixture(t)
	f.clusters = []unstructured.Unstructured{cluster("a", "1")}
	cached := f.object(nil)
	f.cached(cached)
	expect(t, "first", f.sync(), replace)
	answered := f.c.writtenRV
	expect(t, "the cache behind, the status the one written", f.sync())
	f.clusters = append(f.clusters, cluster("b", "1"))
	expect(t, "the cache behind, a cluster added", f.sync(), replace)
	guarded(t, f.client.Actions()[0], answered)
}
