// Package stayingup_test checks, on a real kube-apiserver, that the
// controller stays up and says what is wrong instead of exiting into a
// crash loop: /healthz fails, naming it, when one of its servers has died;
// /readyz fails, with the reason, while it waits for something outside (the
// webhook certificate it may not read yet, the Setting CRD that is missing
// or was deleted), and everything resumes once that is fixed.
//
// This package's control plane starts without the Setting CRD, and its
// tests delete and make it: they run one after another, each setting up the
// CRD as it needs it, and no other package shares this control plane.
package stayingup_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) { os.Exit(framework.Main(m, &cp, framework.Options{})) }

func get(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// running is a manager.Run in this process.
type running struct {
	health string          // host:port of /healthz and /readyz
	done   chan error      // Run's result
	logs   *kit.SyncBuffer // its log (level info)
	cancel func()          // stops it
	cfg    manager.Config  // as run
}

// start runs manager.Run with rc and cfg (the namespaces, the client
// settings, leader election, env and HealthAddr filled in when unset) until
// the test ends; the test fails if Run returned an error by then, and the
// log is printed when the test failed.
func start(t *testing.T, rc *rest.Config, cfg manager.Config) *running {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = cp.Namespace(t)
	}
	cfg.FleetNamespace, cfg.RancherNamespace = cp.Namespace(t), cp.Namespace(t)
	cfg.QPS, cfg.Burst, cfg.Workers = 100, 200, 1
	cfg.LeaderElection, cfg.LeaseName, cfg.Identity, cfg.Timings = true, "leasetune", "stayingup", manager.DefaultTimings
	if cfg.HealthAddr == "" {
		cfg.HealthAddr = framework.FreeAddr(t)
	}
	cfg.LookupEnv = func(string) (string, bool) { return "", false }
	r := &running{health: cfg.HealthAddr, done: make(chan error, 1), logs: &kit.SyncBuffer{}, cfg: cfg}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		r.done <- manager.Run(ctx, rc, cfg, slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("Run did not return within a minute of its context ending")
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", r.logs.String())
		}
	})
	return r
}

// alive fails t when Run has returned.
func (r *running) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		t.Fatalf("the controller exited: %v", err)
	default:
	}
}

// waitFor polls the endpoint path until its status is code and its body
// holds every one of want, for up to d; it fails t with the last answer.
func (r *running) waitFor(t *testing.T, d time.Duration, path string, code int, want ...string) string {
	t.Helper()
	var gotCode int
	var body string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		gotCode, body = get("http://" + r.health + path)
		if gotCode != code {
			return false, nil
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: want %d with %q within %s; last %d %q", path, code, want, d, gotCode, body)
	}
	return body
}

// settingCRDServed reports whether discovery serves the Setting resource.
func settingCRDServed() bool {
	l, err := discovery.NewDiscoveryClientForConfigOrDie(cp.Config).ServerResourcesForGroupVersion(v3.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range l.APIResources {
		if r.Name == "settings" {
			return true
		}
	}
	return false
}

// installSettingCRD installs the Setting CRD (if missing) and waits until it is served.
func installSettingCRD(t *testing.T) {
	t.Helper()
	if _, err := crds.EnsureSetting(context.Background(), apiextclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Setting CRD served", settingCRDServed)
}

// deleteSettingCRD deletes the Setting CRD (with its Settings) and waits
// until it is gone and no longer served.
func deleteSettingCRD(t *testing.T) {
	t.Helper()
	c := apiextclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	if err := c.Delete(context.Background(), "settings.management.cattle.io", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Setting CRD gone", func() bool {
		_, err := c.Get(context.Background(), "settings.management.cattle.io", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && !settingCRDServed()
	})
}

// settingCRDUID is the uid of the Setting CRD, "" when there is none.
func settingCRDUID() types.UID {
	crd, err := apiextclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "settings.management.cattle.io", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return crd.UID
}

// settingValue is the stored value of the Setting called name, and whether it exists.
func settingValue(name string) (string, bool) {
	u, err := dynamic.NewForConfigOrDie(cp.Config).Resource(framework.SettingsGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	v, _, _ := unstructured.NestedString(u.Object, "value")
	return v, true
}

func allSettingsExist() bool {
	for _, d := range settings.Registry {
		if _, ok := settingValue(d.Name); !ok {
			return false
		}
	}
	return true
}

// remembered reports whether the provider's state ConfigMap in ns holds
// value as the user's value of the setting called name.
func remembered(ns, name, value string) bool {
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), settings.DefaultStateName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	var values map[string]string
	if json.Unmarshal([]byte(cm.Data["values"]), &values) != nil {
		return false
	}
	return values[name] == value
}

// TestWaitsForTheSettingCRD: without Rancher and with --install-crds=false
// there is no Setting CRD. The leader neither exits ("leadership lost",
// a crash loop in a pod) nor spins: /readyz answers 503 naming what is
// missing and how to fix it, /healthz stays ok; once the CRD is there it
// gets ready.
func TestWaitsForTheSettingCRD(t *testing.T) {
	deleteSettingCRD(t)
	r := start(t, cp.Config, manager.Config{})

	body := r.waitFor(t, time.Minute, "/readyz", http.StatusServiceUnavailable, "Setting CRD: settings.management.cattle.io is not installed")
	if !strings.Contains(body, "--install-crds") {
		t.Errorf("readyz does not say how to fix it: %q", body)
	}
	if code, b := get("http://" + r.health + "/healthz"); code != http.StatusOK {
		t.Errorf("healthz %d %q while only waiting", code, b)
	}
	time.Sleep(3 * time.Second)
	r.alive(t)
	if !strings.Contains(r.logs.String(), "waiting for the Setting CRD") {
		t.Errorf("no log line says what it waits for:\n%s", r.logs.String())
	}

	installSettingCRD(t)
	r.waitFor(t, 90*time.Second, "/readyz", http.StatusOK) // polled every 10s, then the components start
	framework.Eventually(t, "the Settings created", allSettingsExist)
}
