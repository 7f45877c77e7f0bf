package settings

import (
	"io"
	"log/slog"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

// restoreHarness is a Provider over a mocked Settings controller whose
// API server and cache are two maps: the cache shows only what the test
// puts there, as an informer that lags behind.
type restoreHarness struct {
	p              *Provider
	api, cached    map[string]*v3.Setting
	creates, reads map[string]int
}

func newRestoreHarness(t *testing.T) *restoreHarness {
	ctrl := gomock.NewController(t)
	sc := fake.NewMockNonNamespacedControllerInterface[*v3.Setting, *v3.SettingList](ctrl)
	cache := fake.NewMockNonNamespacedCacheInterface[*v3.Setting](ctrl)
	h := &restoreHarness{api: map[string]*v3.Setting{}, cached: map[string]*v3.Setting{}, creates: map[string]int{}, reads: map[string]int{}}
	gone := func(n string) error { return apierrors.NewNotFound(v3.Resource("settings"), n) }
	sc.EXPECT().Cache().Return(cache).AnyTimes()
	cache.EXPECT().Get(gomock.Any()).DoAndReturn(func(n string) (*v3.Setting, error) {
		if s, ok := h.cached[n]; ok {
			return s, nil
		}
		return nil, gone(n)
	}).AnyTimes()
	sc.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(n string, _ metav1.GetOptions) (*v3.Setting, error) {
		h.reads[n]++
		if s, ok := h.api[n]; ok {
			return s, nil
		}
		return nil, gone(n)
	}).AnyTimes()
	sc.EXPECT().Create(gomock.Any()).DoAndReturn(func(s *v3.Setting) (*v3.Setting, error) {
		h.creates[s.Name]++
		if _, ok := h.api[s.Name]; ok {
			return nil, apierrors.NewAlreadyExists(v3.Resource("settings"), s.Name)
		}
		h.api[s.Name] = s
		return s, nil
	}).AnyTimes()
	h.p = NewProvider(ProviderOptions{Settings: sc, LookupEnv: func(string) (string, bool) { return "", false },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return h
}

// restore runs one sync's restore from what the cache shows.
func (h *restoreHarness) restore(t *testing.T) []restored {
	t.Helper()
	in := map[string]Input{}
	for _, d := range Registry {
		i, err := h.p.input(d)
		if err != nil {
			t.Fatal(err)
		}
		in[d.Name] = i
	}
	got, err := h.p.restore(in)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRestoreCreatesOnce: Rancher deletes the nine Settings at its start,
// nine delete events, and their syncs follow each other faster than the
// cache shows what the first created. Each object is created once: a sync
// that does not see it in the cache reads the API server instead of
// creating it again (which the API server would refuse with 409); once
// the cache shows an object nothing is read for it.
func TestRestoreCreatesOnce(t *testing.T) {
	h := newRestoreHarness(t)
	if got := h.restore(t); len(got) != len(Registry) {
		t.Fatalf("first sync: %d created, want %d", len(got), len(Registry))
	}
	if got := h.restore(t); len(got) != 0 {
		t.Errorf("second sync, the cache behind: %d created again", len(got))
	}
	for _, d := range Registry {
		if h.creates[d.Name] != 1 || h.reads[d.Name] != 1 {
			t.Errorf("%s: %d creates and %d reads, want 1 and 1", d.Name, h.creates[d.Name], h.reads[d.Name])
		}
		h.cached[d.Name] = h.api[d.Name]
	}
	h.restore(t)
	for _, d := range Registry {
		if h.reads[d.Name] != 1 {
			t.Errorf("%s read again once the cache shows it", d.Name)
		}
	}
}

// TestRestoreCreatesAgainWhatIsGone: an object the provider created and
// another writer deleted before the cache showed it (its add and delete
// events merged, or a relist) is created again by the next sync, not left
// missing.
func TestRestoreCreatesAgainWhatIsGone(t *testing.T) {
	h := newRestoreHarness(t)
	h.restore(t)
	x := Registry[0].Name
	delete(h.api, x)
	if got := h.restore(t); len(got) != 1 || got[0].name != x {
		t.Fatalf("after %s's deletion: created %v, want it alone", x, got)
	}
	if _, ok := h.api[x]; !ok || h.creates[x] != 2 {
		t.Errorf("%s: in the API server %v, %d creates", x, ok, h.creates[x])
	}
}
