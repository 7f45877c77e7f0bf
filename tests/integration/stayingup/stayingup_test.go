// Package stayingup_test checks that the controller waits, not ready and
// saying why, for what it needs from outside, instead of exiting into a
// crash loop: here the Setting CRD, absent from this control plane.
package stayingup_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/tests/integration/framework"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) { os.Exit(framework.Main(m, &cp, framework.Options{})) }

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWaitsForTheSettingCRD: without Rancher and with --install-crds=false
// there is no Setting CRD. The leader neither exits ("leadership lost",
// a crash loop in a pod) nor spins: /readyz answers 503 naming what is
// missing and how to fix it, /healthz stays ok; once the CRD is there it
// gets ready.
func TestWaitsForTheSettingCRD(t *testing.T) {
	health := freeAddr(t)
	ns := cp.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, cp.Config, manager.Config{
			Namespace: ns, FleetNamespace: cp.Namespace(t), RancherNamespace: cp.Namespace(t), QPS: 100, Burst: 200, Workers: 1,
			LeaderElection: true, LeaseName: "leasetune", Identity: "stayingup", Timings: manager.DefaultTimings,
			HealthAddr: health,
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	t.Cleanup(func() { cancel(); <-done })

	var body string
	framework.Eventually(t, "not ready, saying why", func() bool {
		code, b := get("http://" + health + "/readyz")
		body = b
		return code == http.StatusServiceUnavailable && strings.Contains(b, "Setting CRD settings.management.cattle.io is not installed")
	})
	if !strings.Contains(body, "--install-crds") {
		t.Errorf("readyz does not say how to fix it: %q", body)
	}
	if code, b := get("http://" + health + "/healthz"); code != http.StatusOK {
		t.Errorf("healthz %d %q while only waiting", code, b)
	}
	select {
	case err := <-done:
		t.Fatalf("the controller exited while waiting for the CRD: %v", err)
	case <-time.After(3 * time.Second):
	}

	if _, err := crds.EnsureSetting(context.Background(), apiextclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second) // polled every 10s, then the components start
	for {
		if code, _ := get("http://" + health + "/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			_, b := get("http://" + health + "/readyz")
			t.Fatalf("not ready after the CRD came: %q", b)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
