package settings

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
)

// syncHarness is a Provider over a mocked Settings controller whose cache
// holds the objects the test puts there, and a fake clientset for the
// state ConfigMap. Every call that would reach the API server is recorded
// in order ("create settings <name>", "update configmaps", ...), as
// sample-controller's tests list a sync's actions.
type syncHarness struct {
	p        *Provider
	cached   map[string]*v3.Setting
	cs       *k8sfake.Clientset
	settings []string // the Settings client's calls
	created  map[string]*v3.Setting
	notified int             // listener calls (a triple took effect)
	queue    *recordingQueue // what a sync enqueued (asked to run again)
}

func newSyncHarness(t *testing.T) *syncHarness {
	ctrl := gomock.NewController(t)
	sc := fake.NewMockNonNamespacedControllerInterface[*v3.Setting, *v3.SettingList](ctrl)
	cache := fake.NewMockNonNamespacedCacheInterface[*v3.Setting](ctrl)
	h := &syncHarness{cached: map[string]*v3.Setting{}, created: map[string]*v3.Setting{}, cs: k8sfake.NewSimpleClientset()}
	for _, d := range Registry {
		s := &v3.Setting{Default: d.Default}
		s.Name, s.ResourceVersion = d.Name, "1"
		h.cached[d.Name] = s
	}
	sc.EXPECT().Cache().Return(cache).AnyTimes()
	cache.EXPECT().Get(gomock.Any()).DoAndReturn(func(n string) (*v3.Setting, error) {
		if s, ok := h.cached[n]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(v3.Resource("settings"), n)
	}).AnyTimes()
	sc.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(n string, _ metav1.GetOptions) (*v3.Setting, error) {
		h.settings = append(h.settings, "get settings "+n)
		return nil, apierrors.NewNotFound(v3.Resource("settings"), n)
	}).AnyTimes()
	sc.EXPECT().Create(gomock.Any()).DoAndReturn(func(s *v3.Setting) (*v3.Setting, error) {
		h.settings = append(h.settings, "create settings "+s.Name)
		h.created[s.Name] = s
		return s, nil
	}).AnyTimes()
	h.p = NewProvider(ProviderOptions{Settings: sc, ConfigMaps: h.cs.CoreV1(), Namespace: "leasetune-system",
		LookupEnv: func(string) (string, bool) { return "", false }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(h.p.loop.ShutDown)
	h.queue = &recordingQueue{}
	h.p.queue = h.queue
	h.p.OnChange(func() { h.notified++ })
	if err := h.p.loadState(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// sync runs one sync and returns the calls it made that reach the API
// server, and the listener calls.
func (h *syncHarness) sync(t *testing.T) (actions []string, notified int) {
	t.Helper()
	h.cs.ClearActions()
	h.settings, h.notified, h.queue.added = nil, 0, nil
	if err := h.p.sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	actions = append(actions, h.settings...)
	for _, a := range h.cs.Actions() {
		actions = append(actions, verbResource(a))
	}
	return actions, h.notified
}

// recordingQueue records what the provider enqueues ("add K after D").
// (tests/kit/fakes.Queue imports this package.)
type recordingQueue struct{ added []string }

func (q *recordingQueue) Add(k string) { q.added = append(q.added, "add "+k) }
func (q *recordingQueue) AddAfter(k string, d time.Duration) {
	q.added = append(q.added, "add "+k+" after "+d.String())
}

func verbResource(a k8stesting.Action) string {
	return a.GetVerb() + " " + a.GetResource().Resource
}

func (h *syncHarness) set(name, value string) {
	s := h.cached[name].DeepCopy()
	s.Value = value
	s.ResourceVersion += "1"
	h.cached[name] = s
}

// TestProviderDoNothing: once the state is stored and every object is in
// place, a sync makes no call, tells no listener and asks for no rerun.
func TestProviderDoNothing(t *testing.T) {
	h := newSyncHarness(t)
	if got, n := h.sync(t); !reflect.DeepEqual(got, []string{"create configmaps"}) || n != 1 {
		t.Fatalf("first sync: %v and %d listener calls; want the state's create, and one call (the three triples take effect together)", got, n)
	}
	if got, n := h.sync(t); len(got) != 0 || n != 0 || len(h.queue.added) != 0 {
		t.Errorf("converged sync: %v, %d listener calls, enqueued %q; want none", got, n, h.queue.added)
	}
}

// TestProviderOneChangeOneWrite: a user's value, in a triple that
// validates, is one update of the state (the value remembered and the
// triple in effect together), and the listeners are told once.
func TestProviderOneChangeOneWrite(t *testing.T) {
	h := newSyncHarness(t)
	h.sync(t)
	h.set("fleet-leader-election-retry-period", "5s")
	if got, n := h.sync(t); !reflect.DeepEqual(got, []string{"update configmaps"}) || n != 1 {
		t.Errorf("sync after one change: %v and %d listener calls; want one update and one call", got, n)
	}
	if tm, _ := h.p.Effective(FleetController); tm.RetryPeriod != 5e9 || tm.LeaseDuration != election.FleetDefaults.LeaseDuration {
		t.Errorf("fleet-controller in effect: %s, want Fleet's defaults with retryPeriod 5s", tm)
	}
	if got, n := h.sync(t); len(got) != 0 || n != 0 {
		t.Errorf("sync again: %v and %d listener calls; want none", got, n)
	}
}

// TestProviderRestoresOnce: a Setting deleted (Rancher's start deletes
// them) is created once, with its remembered value, without a read (the
// cache showed it before: it is not one the provider created and awaits);
// nothing else is written.
func TestProviderRestoresOnce(t *testing.T) {
	h := newSyncHarness(t)
	h.set("fleet-leader-election-retry-period", "5s")
	h.sync(t)
	delete(h.cached, "fleet-leader-election-retry-period")
	got, n := h.sync(t)
	want := []string{"create settings fleet-leader-election-retry-period"}
	if !reflect.DeepEqual(got, want) || n != 0 {
		t.Errorf("sync after the deletion: %v and %d listener calls; want %v and none", got, n, want)
	}
	if c := h.created["fleet-leader-election-retry-period"]; c == nil || c.Value != "5s" {
		t.Errorf("created %+v, want the user's value 5s", c)
	}
}

// TestProviderPendingLooksAgain: a change within the settle time takes no
// effect yet (no listener call) and asks for one sync just after the
// settle time; that sync puts it in effect and asks for nothing more.
func TestProviderPendingLooksAgain(t *testing.T) {
	h := newSyncHarness(t)
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	h.p.opts.Settle, h.p.opts.Clock = 10*time.Second, clk
	h.sync(t)
	h.set("fleet-leader-election-retry-period", "5s")
	if _, n := h.sync(t); n != 0 {
		t.Errorf("a pending change told %d listeners, want none", n)
	}
	if got := h.queue.added; len(got) != 1 || !strings.HasPrefix(got[0], "add settings after 1") {
		t.Errorf("enqueued %q, want the one work item once the 10s settle time has passed", got)
	}
	clk.SetTime(clk.Now().Add(11 * time.Second))
	if _, n := h.sync(t); n != 1 || len(h.queue.added) != 0 {
		t.Errorf("after the settle time: %d listener calls, enqueued %q; want one call and nothing", n, h.queue.added)
	}
	if tm, _ := h.p.Effective(FleetController); tm.RetryPeriod != 5*time.Second {
		t.Errorf("fleet-controller in effect: %s, want retryPeriod 5s", tm)
	}
}

// TestSettingKeys: a change of one of the nine Settings is the one work
// item; another Setting is none.
func TestSettingKeys(t *testing.T) {
	s := func(name string) *v3.Setting {
		o := &v3.Setting{}
		o.Name = name
		return o
	}
	if got := settingKeys(s("fleet-leader-election-retry-period")); !reflect.DeepEqual(got, []string{syncKey}) {
		t.Errorf("keys of one of the nine: %v, want [%s]", got, syncKey)
	}
	if got := settingKeys(s("server-url")); got != nil {
		t.Errorf("keys of Rancher's server-url: %v, want none", got)
	}
}
