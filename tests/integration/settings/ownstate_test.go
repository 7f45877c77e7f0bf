package settings_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	"leasetune.io/leasetune/pkg/ownstate"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// interleaved is a ConfigMaps client whose next Update of the ConfigMap
// called name first runs other (another writer's write, between this
// writer's read and its write) and then records what the Update stored.
type interleaved struct {
	typedcorev1.ConfigMapsGetter
	name    string
	other   atomic.Pointer[func()]
	updates atomic.Int32

	mu     sync.Mutex
	stored []map[string]string // data of every successful Update of name
}

func (i *interleaved) ConfigMaps(ns string) typedcorev1.ConfigMapInterface {
	return interleavedCMs{i.ConfigMapsGetter.ConfigMaps(ns), i}
}

// arm makes the next Update of i.name run f first, and forgets what the
// Updates so far stored.
func (i *interleaved) arm(f func()) {
	i.mu.Lock()
	i.stored = nil
	i.mu.Unlock()
	i.other.Store(&f)
}

// firstStored returns the data of the first successful Update of i.name
// since arm, nil if none.
func (i *interleaved) firstStored() map[string]string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.stored) == 0 {
		return nil
	}
	return i.stored[0]
}

type interleavedCMs struct {
	typedcorev1.ConfigMapInterface
	i *interleaved
}

func (c interleavedCMs) Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	if cm.Name != c.i.name {
		return c.ConfigMapInterface.Update(ctx, cm, opts)
	}
	if f := c.i.other.Swap(nil); f != nil {
		(*f)()
	}
	c.i.updates.Add(1)
	out, err := c.ConfigMapInterface.Update(ctx, cm, opts)
	if err == nil {
		c.i.mu.Lock()
		c.i.stored = append(c.i.stored, maps.Clone(out.Data))
		c.i.mu.Unlock()
	}
	return out, err
}

// Two writers of one ConfigMap on the API server: B writes between A's
// read and A's write. A's update is refused (resourceVersion), A's mutate
// runs on B's data, and B's key survives.
func TestOwnstateInterleavedWriters(t *testing.T) {
	ctx := context.Background()
	ns := cp.Namespace(t)
	const name = "leasetune-interleaved"
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"a": "1", "b": "1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := &interleaved{ConfigMapsGetter: cp.Client.CoreV1(), name: name}
	cmA, err := ownstate.Load(ctx, a, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	cmB, err := ownstate.Load(ctx, cp.Client.CoreV1(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	set := func(k, v string) ownstate.Mutate {
		return func(cur map[string]string) (map[string]string, error) {
			out := maps.Clone(cur)
			out[k] = v
			return out, nil
		}
	}
	a.arm(func() {
		if _, err := ownstate.Save(ctx, cp.Client.CoreV1(), ns, name, cmB, set("b", "2")); err != nil {
			t.Error(err)
		}
	})
	if _, err := ownstate.Save(ctx, a, ns, name, cmA, set("a", "2")); err != nil {
		t.Fatal(err)
	}
	got, err := ownstate.Load(ctx, cp.Client.CoreV1(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "2", "b": "2"}; !maps.Equal(got.Data, want) {
		t.Errorf("stored %v, want %v", got.Data, want)
	}
	if n := a.updates.Load(); n != 2 {
		t.Errorf("A updated %d times, want 2 (a conflict, then the merge)", n)
	}
}

// A provider writes its state for a change of its own while another
// writer (the other replica, in a handover) has just stored the state with
// a value it does not know of. The provider's write keeps that value;
// then, having adopted it, the provider evaluates again and converges on
// the Setting objects.
func TestProviderStateWriteKeepsOtherWritersValue(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	cms := &interleaved{ConfigMapsGetter: cp.Client.CoreV1(), name: settings.DefaultStateName}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f, err := management.NewFactoryFromConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := settings.NewProvider(settings.ProviderOptions{
		Settings:   f.Management().V3().Setting(),
		ConfigMaps: cms,
		Namespace:  ns,
		LookupEnv:  func(string) (string, bool) { return "", false },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := p.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, 2); err != nil {
		t.Fatal(err)
	}
	values := func(data map[string]string) map[string]string {
		var v map[string]string
		_ = json.Unmarshal([]byte(data["values"]), &v)
		return v
	}
	stateValues := func() map[string]string {
		cm, err := ownstate.Load(ctx, cp.Client.CoreV1(), ns, settings.DefaultStateName)
		if err != nil || cm == nil {
			return nil
		}
		return values(cm.Data)
	}
	const agentLease = "fleet-agent-leader-election-lease-duration"
	framework.Eventually(t, "state stored", func() bool { v := stateValues(); return v != nil && v[agentLease] == "" && v[lease] == "" })

	cms.arm(func() {
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, settings.DefaultStateName, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		v := values(cm.Data)
		v[agentLease] = "45s"
		b, _ := json.Marshal(v)
		cm.Data["values"] = string(b)
		if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	})
	setValue(t, lease, "40s")
	framework.Eventually(t, "the provider's write", func() bool { return cms.firstStored() != nil })
	first := values(cms.firstStored())
	if first[lease] != "40s" || first[agentLease] != "45s" {
		t.Errorf("the provider stored %s=%q %s=%q; want its own 40s and the other writer's 45s", lease, first[lease], agentLease, first[agentLease])
	}
	// Evaluating again from what is stored, it converges on the objects.
	framework.Eventually(t, "converged on the Setting objects", func() bool {
		v := stateValues()
		return v[lease] == "40s" && v[agentLease] == ""
	})
	framework.Eventually(t, "40s in effect", func() bool {
		got, ok := p.Effective(settings.FleetController)
		return ok && got == kit.Timings("40s", "25s", "10s")
	})
}
