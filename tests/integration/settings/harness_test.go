package settings_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	mgmtcontrollers "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

const (
	lease = "fleet-leader-election-lease-duration"
	renew = "fleet-leader-election-renew-deadline"
	retry = "fleet-leader-election-retry-period"
)

// running is a Provider started against the control plane.
type running struct {
	*settings.Provider
	cancel context.CancelFunc

	mu       sync.Mutex
	notified []election.Timings // every triple published to OnChange listeners
}

// clientFor returns a wrangler Setting client not tied to any provider.
func settingClient(t *testing.T) mgmtcontrollers.SettingClient {
	t.Helper()
	f, err := management.NewFactoryFromConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return f.Management().V3().Setting()
}

// startProvider starts a provider whose state lives in namespace ns and
// whose env is env, and waits until it has synced once.
func startProvider(t *testing.T, ns string, env map[string]string) *running {
	t.Helper()
	return startProviderWith(t, ns, env, 0)
}

// startProviderWith is startProvider with a settle time (batching).
func startProviderWith(t *testing.T, ns string, env map[string]string, settle time.Duration) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f, err := management.NewFactoryFromConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Client.CoreV1().Events("")})
	p := settings.NewProvider(settings.ProviderOptions{
		Settings:   f.Management().V3().Setting(),
		ConfigMaps: cp.Client.CoreV1(),
		Namespace:  ns,
		Recorder:   b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"}),
		LookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
		Log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Settle: settle,
	})
	r := &running{Provider: p}
	p.OnChange(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		// The two Fleet components, which the batching tests change
		// (Rancher's triple stays at its default there).
		for _, c := range []settings.Component{settings.FleetController, settings.FleetAgent} {
			if tm, ok := p.Effective(c); ok {
				r.notified = append(r.notified, tm)
			}
		}
	})
	if err := p.Register(ctx); err != nil {
		cancel()
		t.Fatalf("Register: %v", err)
	}
	if err := f.Start(ctx, 2); err != nil {
		cancel()
		t.Fatalf("start factory: %v", err)
	}
	r.cancel = func() { cancel(); b.Shutdown() }
	t.Cleanup(r.cancel)
	// The first sync fills Status.Inputs.
	framework.Eventually(t, "first sync", func() bool { return r.Status(settings.FleetController).Inputs[0].Value != "" })
	return r
}

// stop stops the provider, as a restart of the project would.
func (r *running) stop() { r.cancel() }

// setValue writes value on the Setting called name, as Rancher's API does
// (a merge patch of value), creating the object if needed.
func setValue(t *testing.T, name, value string) {
	t.Helper()
	c := settingClient(t)
	body, _ := json.Marshal(map[string]string{"value": value})
	if _, err := c.Patch(name, types.MergePatchType, body); err != nil {
		t.Fatalf("set %s=%q: %v", name, value, err)
	}
}

func getSetting(t *testing.T, name string) *v3.Setting {
	t.Helper()
	s, err := settingClient(t).Get(name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get setting %s: %v", name, err)
	}
	return s
}

// effectiveIs reports whether the provider's effective controller triple is want.
func (r *running) effectiveIs(c settings.Component, want election.Timings) bool {
	got, ok := r.Effective(c)
	return ok && got == want
}

// inputsAre reports whether the provider last evaluated these values.
func (r *running) inputsAre(c settings.Component, vals ...string) bool {
	in := r.Status(c).Inputs
	for i, v := range vals {
		if in[i].Value != v {
			return false
		}
	}
	return true
}

// assertNotifiedValid checks that every triple ever published validated.
func (r *running) assertNotifiedValid(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notified {
		if err := n.Validate(); err != nil {
			t.Errorf("an invalid triple was published: %v", err)
		}
	}
}

// events returns the messages of Events with reason on the Setting name.
func events(t *testing.T, name, reason string) []string {
	t.Helper()
	return cp.Events(t, "", name, reason)
}

// waitEvent waits for an Event with reason on name whose message contains every part.
func waitEvent(t *testing.T, name, reason string, parts ...string) string {
	t.Helper()
	var found string
	framework.Eventually(t, fmt.Sprintf("event %s on %s containing %q", reason, name, parts), func() bool {
		for _, m := range events(t, name, reason) {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(m, p)
			}
			if ok {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// clearEvents deletes all Events in the default namespace, where Events
// on cluster-scoped objects go.
func clearEvents(t *testing.T) {
	t.Helper()
	if err := cp.Client.CoreV1().Events("default").DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

// stateConfigMap returns the provider's durable state in ns.
func stateConfigMap(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "leasetune-state", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}
