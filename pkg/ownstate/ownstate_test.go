package ownstate

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/ownstate/ownstatetest"
)

const (
	testNS   = "leasetune-system"
	testName = "leasetune-test"
)

var (
	cmGVR      = ownstatetest.GVR
	newTracker = ownstatetest.NewTracker
	newWriter  = ownstatetest.NewWriter
	before     = ownstatetest.Before
	countVerb  = ownstatetest.Count
)

// setKeys is a mutate that sets changes, a writer's own keys, on the
// fresh data and keeps every other key as stored.
func setKeys(changes map[string]string, calls *[]map[string]string) Mutate {
	return func(current map[string]string) (map[string]string, error) {
		if calls != nil {
			*calls = append(*calls, maps.Clone(current))
		}
		out := maps.Clone(current)
		if out == nil {
			out = map[string]string{}
		}
		maps.Copy(out, changes)
		return out, nil
	}
}

func mustLoad(t *testing.T, cs *fake.Clientset) *corev1.ConfigMap {
	t.Helper()
	cm, err := Load(context.Background(), cs.CoreV1(), testNS, testName)
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func seed(t *testing.T, tracker k8stesting.ObjectTracker, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNS, ResourceVersion: "1"}, Data: data}
	if err := tracker.Add(cm); err != nil {
		t.Fatal(err)
	}
}

// Two writers read the same object; B writes while A is between its read
// and its write. A's update conflicts, A's mutate runs again on B's data,
// and B's key survives A's write.
func TestSaveInterleavedWritersKeepOthersKeys(t *testing.T) {
	ctx := context.Background()
	tracker := newTracker()
	seed(t, tracker, map[string]string{"a": "1", "b": "1"})
	csA, csB := newWriter(tracker), newWriter(tracker)
	cmA, cmB := mustLoad(t, csA), mustLoad(t, csB)

	var bErr error
	before(csA, "update", func() {
		_, bErr = Save(ctx, csB.CoreV1(), testNS, testName, cmB, setKeys(map[string]string{"b": "2"}, nil))
	})
	var calls []map[string]string
	out, err := Save(ctx, csA.CoreV1(), testNS, testName, cmA, setKeys(map[string]string{"a": "2"}, &calls))
	if err != nil || bErr != nil {
		t.Fatalf("Save: A %v, B %v", err, bErr)
	}
	want := map[string]string{"a": "2", "b": "2"}
	if !maps.Equal(out.Data, want) {
		t.Errorf("returned data %v, want %v", out.Data, want)
	}
	if got := mustLoad(t, csA).Data; !maps.Equal(got, want) {
		t.Errorf("stored data %v, want %v: one writer's key was lost", got, want)
	}
	if len(calls) != 2 || calls[1]["b"] != "2" {
		t.Errorf("A's mutate saw %v; want a second call on B's data", calls)
	}
	if n := countVerb(csA, "update"); n != 2 {
		t.Errorf("A updated %d times, want 2 (a conflict, then the merge)", n)
	}
}

// B creates the ConfigMap while A, which knew none, creates it too: A's
// create fails with AlreadyExists and A's mutate runs on B's data.
func TestSaveInterleavedCreate(t *testing.T) {
	ctx := context.Background()
	tracker := newTracker()
	csA, csB := newWriter(tracker), newWriter(tracker)
	before(csA, "create", func() {
		if _, err := Save(ctx, csB.CoreV1(), testNS, testName, nil, setKeys(map[string]string{"b": "1"}, nil)); err != nil {
			t.Error(err)
		}
	})
	var calls []map[string]string
	if _, err := Save(ctx, csA.CoreV1(), testNS, testName, nil, setKeys(map[string]string{"a": "1"}, &calls)); err != nil {
		t.Fatal(err)
	}
	if got, want := mustLoad(t, csA).Data, map[string]string{"a": "1", "b": "1"}; !maps.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	if len(calls) != 2 || calls[0] != nil {
		t.Errorf("mutate calls %v: want nil (none exists), then B's data", calls)
	}
}

// The ConfigMap is deleted between A's read and its write: A recreates it
// from mutate(nil).
func TestSaveDeletedMeanwhile(t *testing.T) {
	ctx := context.Background()
	tracker := newTracker()
	seed(t, tracker, map[string]string{"a": "1"})
	cs := newWriter(tracker)
	cm := mustLoad(t, cs)
	before(cs, "update", func() {
		if err := tracker.Delete(cmGVR, testNS, testName); err != nil {
			t.Error(err)
		}
	})
	var calls []map[string]string
	out, err := Save(ctx, cs.CoreV1(), testNS, testName, cm, setKeys(map[string]string{"a": "2"}, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(out.Data, map[string]string{"a": "2"}) || out.Labels["app.kubernetes.io/managed-by"] != "leasetune" {
		t.Errorf("recreated %v labels %v", out.Data, out.Labels)
	}
	if len(calls) != 2 || calls[1] != nil {
		t.Errorf("mutate calls %v: want the stored data, then nil", calls)
	}
}

// Data equal to what is stored is not written.
func TestSaveUnchangedWritesNothing(t *testing.T) {
	tracker := newTracker()
	seed(t, tracker, map[string]string{"a": "1"})
	cs := newWriter(tracker)
	cm := mustLoad(t, cs)
	out, err := Save(context.Background(), cs.CoreV1(), testNS, testName, cm, setKeys(map[string]string{"a": "1"}, nil))
	if err != nil || out != cm {
		t.Fatalf("Save = %v, %v; want the object read, no error", out, err)
	}
	if n := countVerb(cs, "update"); n != 0 {
		t.Errorf("%d updates, want none", n)
	}
}

// A writer that keeps losing gives up after MaxAttempts writes with a
// conflict, for its work queue to retry.
func TestSaveBoundedAttempts(t *testing.T) {
	tracker := newTracker()
	seed(t, tracker, map[string]string{"a": "1"})
	cs := newWriter(tracker)
	cm := mustLoad(t, cs)
	cs.ClearActions()
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(cmGVR.GroupResource(), testName, nil)
	})
	_, err := Save(context.Background(), cs.CoreV1(), testNS, testName, cm, setKeys(map[string]string{"a": "2"}, nil))
	if !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	if n := countVerb(cs, "update"); n != MaxAttempts {
		t.Errorf("%d updates, want %d", n, MaxAttempts)
	}
	if n := countVerb(cs, "get"); n != MaxAttempts-1 {
		t.Errorf("%d reads, want %d", n, MaxAttempts-1)
	}
}

// An outgoing leader's context has ended: Save writes nothing.
func TestSaveEndedContextWritesNothing(t *testing.T) {
	tracker := newTracker()
	seed(t, tracker, map[string]string{"a": "1"})
	cs := newWriter(tracker)
	cm := mustLoad(t, cs)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := Save(ctx, cs.CoreV1(), testNS, testName, cm, func(map[string]string) (map[string]string, error) {
		called = true
		return map[string]string{"a": "2"}, nil
	})
	if err == nil || called {
		t.Fatalf("err = %v, mutate called %v; want an error and no call", err, called)
	}
	if n := countVerb(cs, "update") + countVerb(cs, "create"); n != 0 {
		t.Errorf("%d writes, want none", n)
	}
}

// mutate gets a copy: changing it in place leaves cm as it was.
func TestSaveMutateGetsCopy(t *testing.T) {
	tracker := newTracker()
	seed(t, tracker, map[string]string{"a": "1"})
	cs := newWriter(tracker)
	cm := mustLoad(t, cs)
	if _, err := Save(context.Background(), cs.CoreV1(), testNS, testName, cm, func(cur map[string]string) (map[string]string, error) {
		cur["a"] = "2"
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if cm.Data["a"] != "1" {
		t.Errorf("cm changed in place: %v", cm.Data)
	}
	if got := mustLoad(t, cs).Data["a"]; got != "2" {
		t.Errorf("stored a=%q, want 2", got)
	}
}
