package stayingup_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/tests/integration/framework"
)

// listeners is a manager.Config.Listen that keeps what it opened, by the
// address asked for, so that a test can close one under its server.
type listeners struct {
	mu sync.Mutex
	by map[string]net.Listener
}

func (l *listeners) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]net.Listener{}
	}
	l.by[addr] = ln
	return ln, nil
}

// close closes the listener opened for addr, as a failing socket would
// end it: the server's Accept fails, and its Serve returns that error.
func (l *listeners) close(t *testing.T, addr string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	ln, ok := l.by[addr]
	if !ok {
		t.Fatalf("nothing listens on %s", addr)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHealthzFailsWhenAServerDies: the controller runs the webhook's TLS
// server and the metrics server beside /healthz. When one of them stops by
// itself (here its listener is closed under it, as a failing socket would
// end it), /healthz answers 500 naming that server and its error, so the
// kubelet restarts the pod, and /readyz answers 503 with the same line
// (the replica cannot serve what it is there for); the process itself does
// not exit, and the other servers still answer.
func TestHealthzFailsWhenAServerDies(t *testing.T) {
	installSettingCRD(t)
	var ls listeners
	webhook, metrics := framework.FreeAddr(t), framework.FreeAddr(t)
	r := start(t, cp.Config, manager.Config{
		InstallCRDs: true, MetricsAddr: metrics,
		WebhookAddr: webhook, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"},
		Listen: ls.listen,
	})
	r.waitFor(t, time.Minute, "/readyz", http.StatusOK)
	if code, b := get("http://" + r.health + "/healthz"); code != http.StatusOK || b != "ok" {
		t.Fatalf("healthz %d %q before any server died", code, b)
	}
	tlsUp := func() error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", webhook, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it answers
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := tlsUp(); err != nil {
		t.Fatalf("the webhook server does not answer before the test: %v", err)
	}

	ls.close(t, webhook)
	body := r.waitFor(t, 30*time.Second, "/healthz", http.StatusInternalServerError, "webhook server: ", "use of closed network connection")
	if code, b := get("http://" + r.health + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(b, "webhook server: ") {
		t.Errorf("readyz %d %q once the webhook server died; want 503 naming it", code, b)
	}
	if err := tlsUp(); err == nil {
		t.Errorf("the webhook server still answers: the test proves nothing")
	}
	if code, _ := get("http://" + metrics + "/metrics"); code != http.StatusOK {
		t.Errorf("metrics %d: the other servers must go on", code)
	}
	if !strings.Contains(r.logs.String(), "webhook server stopped") {
		t.Errorf("no log line says the webhook server stopped")
	}
	t.Logf("healthz: %q", body)

	// A second server: both are listed, one line each.
	ls.close(t, metrics)
	r.waitFor(t, 30*time.Second, "/healthz", http.StatusInternalServerError, "metrics server: ", "webhook server: ")
	time.Sleep(2 * time.Second)
	r.alive(t)
}
