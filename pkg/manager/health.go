package manager

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// What /healthz and /readyz name, each followed by ": " and the reason.
const (
	// healthWebhookServer: the HTTPS server of the admission webhook and
	// the /v3/settings API stopped (/healthz fails).
	healthWebhookServer = "webhook server"
	// healthMetricsServer: the /metrics server stopped (/healthz fails).
	healthMetricsServer = "metrics server"
	// readyWebhookCert: no serving certificate yet, because the webhook
	// Secret or configuration could not be read or written (/readyz fails).
	readyWebhookCert = "webhook certificate"
	// readySettingCRD: the Setting CRD is not served (/readyz fails).
	readySettingCRD = "Setting CRD"
)

// health is what /healthz and /readyz answer from. A server of the process
// that stopped (the webhook's TLS server, the metrics server) makes both
// fail, /healthz with 500 so that the kubelet restarts the pod; something
// awaited from outside (a missing CRD, a certificate not made yet) makes
// only /readyz fail, with 503, so the pod takes no traffic but is not
// restarted in a loop. Each failing answer lists one line "<what>: <why>"
// per cause, sorted.
type health struct {
	ready    atomic.Bool // the components are running (or this replica follows)
	mu       sync.Mutex
	failed   map[string]string // server → why it stopped (/healthz fails)
	notReady map[string]string // what is awaited → why (/readyz fails)
}

func newHealth() *health {
	return &health{failed: map[string]string{}, notReady: map[string]string{}}
}

// fail records that a server the process runs has stopped, and why (the
// error it stopped with). It is never cleared: the process must restart.
func (h *health) fail(what, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed[what] = why
}

// wait records (why != "") or clears (why == "") something awaited.
func (h *health) wait(what, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if why == "" {
		delete(h.notReady, what)
	} else {
		h.notReady[what] = why
	}
}

func list(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// healthz answers 200 "ok", or 500 with the servers that stopped.
func (h *health) healthz(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	msg := list(h.failed)
	h.mu.Unlock()
	if msg != "" {
		http.Error(w, msg, http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// readyz answers 200 "ok", or 503 with the servers that stopped and what
// is awaited, or "starting" before the components (on the leader) or the
// elector (on a follower) run.
func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	msg := list(h.failed)
	if w2 := list(h.notReady); w2 != "" {
		msg = strings.TrimSpace(msg + "\n" + w2)
	}
	h.mu.Unlock()
	if msg == "" && !h.ready.Load() {
		msg = "starting"
	}
	if msg != "" {
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}
