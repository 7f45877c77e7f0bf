package manager

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"leasetune.io/leasetune/pkg/metrics"
)

// What /healthz and /readyz name, each followed by ": " and the reason.
const (
	// healthWebhookServer: the HTTPS server of the admission webhook and
	// the /v3/settings API stopped (/healthz fails).
	healthWebhookServer = "webhook server"
	// healthMetricsServer: the /metrics server stopped (/healthz fails).
	healthMetricsServer = "metrics server"
	// healthUIServer: the UI extension's bundle server stopped (/healthz
	// fails).
	healthUIServer = "UI extension server"
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
//
// It also keeps metrics.ServerUp of the servers in serverLabels: 1 from
// listening until stopped, and, for a server that needs something awaited
// to answer (serverNeeds), only while that is in place.
type health struct {
	ready     atomic.Bool // the components are running (or this replica follows)
	mu        sync.Mutex
	failed    map[string]string // server → why it stopped (/healthz fails)
	notReady  map[string]string // what is awaited → why (/readyz fails)
	listening map[string]bool   // servers that have started listening
}

// serverLabels are the servers metrics.ServerUp reports, by the name
// /healthz gives them, with their label value. The metrics server is not
// among them: when it is down there is nothing to scrape (Prometheus's own
// up metric tells).
var serverLabels = map[string]string{healthWebhookServer: "webhook", healthUIServer: "ui"}

// serverNeeds is what a server needs, besides listening, to answer: the
// webhook its certificate (without it every TLS handshake fails, and the
// apiserver cannot call the webhook).
var serverNeeds = map[string]string{healthWebhookServer: readyWebhookCert}

func newHealth() *health {
	return &health{failed: map[string]string{}, notReady: map[string]string{}, listening: map[string]bool{}}
}

// fail records that a server the process runs has stopped, and why (the
// error it stopped with). It is never cleared: the process must restart.
func (h *health) fail(what, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed[what] = why
	h.publish()
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
	h.publish()
}

// serving records that a server listens now.
func (h *health) serving(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listening[what] = true
	h.publish()
}

// publish sets metrics.ServerUp of every server in serverLabels that has
// started listening. Call with h.mu held.
func (h *health) publish() {
	for what, label := range serverLabels {
		if !h.listening[what] {
			continue
		}
		up := 1.0
		if _, stopped := h.failed[what]; stopped {
			up = 0
		}
		if need, ok := serverNeeds[what]; ok {
			if _, awaited := h.notReady[need]; awaited {
				up = 0
			}
		}
		metrics.ServerUp.WithLabelValues(label).Set(up)
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
