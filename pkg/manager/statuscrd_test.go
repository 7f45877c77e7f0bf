package manager

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	clienttesting "k8s.io/client-go/testing"

	statuscontroller "leasetune.io/leasetune/pkg/controllers/electionstatus"
)

// countingDiscovery serves the ElectionStatus kind once serve is set, and
// counts the requests for its group version.
type countingDiscovery struct {
	discovery.DiscoveryInterface
	mu    sync.Mutex
	serve bool
	asked int
}

func (d *countingDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gv == statuscontroller.GVR.GroupVersion().String() {
		d.asked++
	}
	if !d.serve || gv != statuscontroller.GVR.GroupVersion().String() {
		return nil, apierrors.NewNotFound(statuscontroller.GVR.GroupResource(), "")
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: statuscontroller.GVR.Resource}}}, nil
}

func (d *countingDiscovery) set(serve bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serve = serve
}

func (d *countingDiscovery) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

// statusCRD is the ElectionStatus CRD serving leasetune.io/v1alpha1,
// Established or not.
func statusCRD(established bool) *apiextv1.CustomResourceDefinition {
	crd := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: statuscontroller.GVR.GroupResource().String()},
		Spec: apiextv1.CustomResourceDefinitionSpec{Versions: []apiextv1.CustomResourceDefinitionVersion{{Name: statuscontroller.GVR.Version, Served: true, Storage: true}}}}
	if established {
		crd.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
	}
	return crd
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// wait runs waitForStatusCRD in the background; its error comes on the
// channel.
func waitInBackground(ctx context.Context, dc discovery.DiscoveryInterface, cs *apiextfake.Clientset, poll time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- waitForStatusCRD(ctx, dc, cs.ApiextensionsV1().CustomResourceDefinitions(), poll, quietLog())
	}()
	return done
}

// expectPolled fails t unless discovery is asked at least 5 times within
// 10 s (a poll, at the tests' 20ms period), and then, once it serves the
// kind, the wait (done) ends without an error.
func expectPolled(t *testing.T, dc *countingDiscovery, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for dc.count() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := dc.count(); n < 5 {
		t.Fatalf("discovery asked %d times in 10 s at a 20ms poll, want it polled", n)
	}
	dc.set(true)
	if err := <-done; err != nil {
		t.Fatalf("once served: %v", err)
	}
}

// TestStatusCRDWatchedNotPolled: while the CRD is missing, discovery is
// asked once (the first look), however long it takes and however short
// the poll period; a CRD that is not Established yet wakes nothing; once
// it is Established, discovery is asked again and the wait ends when the
// kind is served.
func TestStatusCRDWatchedNotPolled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc := &countingDiscovery{}
	cs := apiextfake.NewSimpleClientset()
	done := waitInBackground(ctx, dc, cs, 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	defs := cs.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := defs.Create(ctx, statusCRD(false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := dc.count(); n != 1 {
		t.Fatalf("discovery asked %d times before the CRD was Established, want 1 (the first look)", n)
	}
	select {
	case err := <-done:
		t.Fatalf("returned %v before the CRD was Established", err)
	default:
	}
	dc.set(true)
	if _, err := defs.Update(ctx, statusCRD(true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("once Established and served: %v", err)
	}
	var watches int
	for _, a := range cs.Actions() {
		if a.GetVerb() == "watch" {
			watches++
			if fs := a.(clienttesting.WatchActionImpl).WatchRestrictions.Fields.String(); fs != "metadata.name="+statuscontroller.GVR.GroupResource().String() {
				t.Errorf("watch with field selector %q, want the CRD by name", fs)
			}
		}
	}
	if watches == 0 {
		t.Error("no watch of the CRD")
	}
}

// TestStatusCRDPolledWhereWatchForbidden: where the List of the CRD by
// name is Forbidden (a ClusterRole older than the binary), discovery is
// asked every poll period, and the wait ends once the kind is served.
func TestStatusCRDPolledWhereWatchForbidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc := &countingDiscovery{}
	cs := apiextfake.NewSimpleClientset()
	cs.PrependReactor("list", "customresourcedefinitions", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(apiextv1.Resource("customresourcedefinitions"), "", errors.New("no right"))
	})
	expectPolled(t, dc, waitInBackground(ctx, dc, cs, 20*time.Millisecond))
	for _, a := range cs.Actions() {
		if a.GetVerb() == "watch" {
			t.Errorf("watched after a Forbidden list: %v", a)
		}
	}
}

// TestStatusCRDWaitEndsWithItsContext: the wait returns ctx's error when
// ctx ends while the CRD is missing, and nil at once where the kind is
// already served (no request but discovery's).
func TestStatusCRDWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	dc := &countingDiscovery{}
	cs := apiextfake.NewSimpleClientset()
	done := waitInBackground(ctx, dc, cs, time.Hour)
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not return within 10 s of its context's end")
	}
	served := &countingDiscovery{serve: true}
	fresh := apiextfake.NewSimpleClientset()
	quick, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := waitForStatusCRD(quick, served, fresh.ApiextensionsV1().CustomResourceDefinitions(), time.Hour, quietLog()); err != nil {
		t.Fatalf("already served: %v", err)
	}
	if n := len(fresh.Actions()); n != 0 {
		t.Errorf("%d requests of the CRD where the kind was served already, want none", n)
	}
}

// TestStatusCRDPolledWhereOnlyWatchForbidden: where the List is allowed
// but the Watch is Forbidden, discovery is asked every poll period (not a
// reflector re-listing for ever), and the wait ends once the kind is
// served. (Found by a reviewer: the first version probed the List only.)
func TestStatusCRDPolledWhereOnlyWatchForbidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc := &countingDiscovery{}
	cs := apiextfake.NewSimpleClientset()
	var lists atomic.Int32
	cs.PrependReactor("list", "customresourcedefinitions", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	cs.PrependWatchReactor("customresourcedefinitions", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(apiextv1.Resource("customresourcedefinitions"), "", errors.New("no watch right"))
	})
	expectPolled(t, dc, waitInBackground(ctx, dc, cs, 20*time.Millisecond))
	if n := lists.Load(); n != 1 {
		t.Errorf("%d lists of the CRD, want 1 (the probe; no reflector)", n)
	}
}

// TestStatusCRDWatchedAgainWhenGone: a CRD Established and deleted before
// discovery lists the kind sends the wait back to its watch (not to a
// discovery poll for ever): once discovery has not listed it for
// statusCRDServed, the CRD is looked at, found gone, and watched again;
// re-created and served, it ends the wait at once although the poll period
// is an hour. (Found by a reviewer: the first version polled discovery
// for the rest of the leadership.)
func TestStatusCRDWatchedAgainWhenGone(t *testing.T) {
	prev := statusCRDServed
	statusCRDServed = time.Second
	t.Cleanup(func() { statusCRDServed = prev })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dc := &countingDiscovery{}
	cs := apiextfake.NewSimpleClientset()
	defs := cs.ApiextensionsV1().CustomResourceDefinitions()
	done := waitInBackground(ctx, dc, cs, time.Hour)
	time.Sleep(300 * time.Millisecond)
	if _, err := defs.Create(ctx, statusCRD(true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := defs.Delete(ctx, statusCRD(true).Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(statusCRDServed + 2*time.Second)
	asked := dc.count()
	time.Sleep(2 * time.Second)
	if n := dc.count(); n != asked {
		t.Fatalf("discovery asked %d more times in 2 s after the CRD was found gone, want none (watched again)", n-asked)
	}
	dc.set(true)
	if _, err := defs.Create(ctx, statusCRD(true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the CRD installed again (Established, served) not noticed within 5 s")
	}
}

// TestStatusCRDOfAnotherVersionNotPolled: a CRD of that name that is
// Established but does not serve leasetune.io/v1alpha1, or is being
// deleted, or whose Established condition flips to False, makes no
// discovery request and no spin: the first look only.
func TestStatusCRDOfAnotherVersionNotPolled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := statusCRD(true)
	other.Spec.Versions = []apiextv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}
	dc := &countingDiscovery{}
	cs := apiextfake.NewSimpleClientset(other)
	done := waitInBackground(ctx, dc, cs, 10*time.Millisecond)
	time.Sleep(time.Second)
	defs := cs.ApiextensionsV1().CustomResourceDefinitions()
	deleting := statusCRD(true)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	if _, err := defs.Update(ctx, deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		c := statusCRD(false)
		c.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionFalse}}
		if _, err := defs.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	if n := dc.count(); n != 1 {
		t.Errorf("discovery asked %d times, want 1 (the first look)", n)
	}
	if n := len(cs.Actions()); n > 12 {
		t.Errorf("%d requests of the CRD (a spin?): %v", n, cs.Actions())
	}
	select {
	case err := <-done:
		t.Fatalf("returned %v for a CRD that does not serve the kind", err)
	default:
	}
}

// TestStatusCRDWaitLeavesNoGoroutine: cancelled while the CRD is missing,
// not Established, or Established but not listed by discovery, the wait
// returns context.Canceled within 5 s and leaves no goroutine behind.
func TestStatusCRDWaitLeavesNoGoroutine(t *testing.T) {
	base := runtime.NumGoroutine()
	for name, stage := range map[string]func(*apiextfake.Clientset){
		"missing": func(*apiextfake.Clientset) {},
		"not established": func(cs *apiextfake.Clientset) {
			_, _ = cs.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), statusCRD(false), metav1.CreateOptions{})
		},
		"established, not served": func(cs *apiextfake.Clientset) {
			_, _ = cs.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), statusCRD(true), metav1.CreateOptions{})
		},
	} {
		for i := 0; i < 3; i++ {
			ctx, cancel := context.WithCancel(context.Background())
			cs := apiextfake.NewSimpleClientset()
			done := waitInBackground(ctx, &countingDiscovery{}, cs, time.Hour)
			time.Sleep(100 * time.Millisecond)
			stage(cs)
			time.Sleep(time.Duration(100+100*i) * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s: %v, want context.Canceled", name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: no return within 5 s of the context's end", name)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}
