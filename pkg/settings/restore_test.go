package settings

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

// TestRestoreCreatesOnce: Rancher deletes the nine Settings at its start,
// nine delete events, and their syncs follow each other faster than the
// cache shows what the first created. Each object is created once: the
// next syncs await it in the cache (and look again at the deadline) instead
// of creating it again, which the API server would refuse with 409. Once
// the cache shows an object it is no longer awaited: deleted again, it is
// created again; one the cache never shows is created again after the
// deadline.
func TestRestoreCreatesOnce(t *testing.T) {
	ctrl := gomock.NewController(t)
	settingsCtrl := fake.NewMockNonNamespacedControllerInterface[*v3.Setting, *v3.SettingList](ctrl)
	cache := fake.NewMockNonNamespacedCacheInterface[*v3.Setting](ctrl)
	settingsCtrl.EXPECT().Cache().Return(cache).AnyTimes()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	p := NewProvider(ProviderOptions{Settings: settingsCtrl, Clock: clk, LookupEnv: func(string) (string, bool) { return "", false },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	inputs := func() map[string]Input {
		out := map[string]Input{}
		for _, d := range Registry {
			in, err := p.input(d)
			if err != nil {
				t.Fatal(err)
			}
			out[d.Name] = in
		}
		return out
	}
	restore := func(step string) []restored {
		t.Helper()
		got, err := p.restore(inputs())
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return got
	}
	gone := apierrors.NewNotFound(v3.Resource("settings"), "")
	created := map[string]int{}
	settingsCtrl.EXPECT().Create(gomock.Any()).DoAndReturn(func(s *v3.Setting) (*v3.Setting, error) {
		created[s.Name]++
		return s, nil
	}).AnyTimes()

	// The cache has none of them, twice in a row.
	cache.EXPECT().Get(gomock.Any()).Return(nil, gone).Times(2 * len(Registry))
	settingsCtrl.EXPECT().EnqueueAfter(gomock.Any(), createdAwait).Times(len(Registry))
	if got := restore("first sync"); len(got) != len(Registry) {
		t.Errorf("first sync: %d created, want %d", len(got), len(Registry))
	}
	if got := restore("second sync, the cache behind"); len(got) != 0 {
		t.Errorf("second sync: %d created again", len(got))
	}
	for _, d := range Registry {
		if created[d.Name] != 1 {
			t.Errorf("%s created %d times, want 1", d.Name, created[d.Name])
		}
	}

	// The cache shows the first; the others it never shows.
	first := Registry[0].Name
	shown, _ := Desired(Registry[0], Input{})
	cache.EXPECT().Get(first).Return(shown, nil).Times(1)
	cache.EXPECT().Get(gomock.Any()).Return(nil, gone).Times(len(Registry) - 1)
	settingsCtrl.EXPECT().EnqueueAfter(gomock.Any(), createdAwait).Times(len(Registry) - 1)
	restore("the first shown")
	// Deleted again: created again at once. The others: after the deadline.
	clk.SetTime(clk.Now().Add(createdAwait))
	cache.EXPECT().Get(gomock.Any()).Return(nil, gone).Times(len(Registry))
	if got := restore("after the deadline"); len(got) != len(Registry) {
		t.Errorf("after the deadline: %d created, want %d", len(got), len(Registry))
	}
	for _, d := range Registry {
		if created[d.Name] != 2 {
			t.Errorf("%s created %d times in all, want 2", d.Name, created[d.Name])
		}
	}
}
