package manager

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// health is what /healthz and /readyz answer from. A failure of a server
// the process runs (the webhook's TLS server) makes /healthz fail, so the
// kubelet restarts the pod; a condition that waits for something outside
// (a missing CRD, a certificate not yet made) makes only /readyz fail,
// with the reason, so the pod takes no traffic but is not restarted in a
// loop.
type health struct {
	ready    atomic.Bool // the components are running (or this replica follows)
	mu       sync.Mutex
	failed   map[string]string // server → why it stopped (/healthz fails)
	notReady map[string]string // what is awaited → why (/readyz fails)
}

func newHealth() *health {
	return &health{failed: map[string]string{}, notReady: map[string]string{}}
}

// fail records that a server the process runs has stopped.
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

func (h *health) readyz(w http.ResponseWriter, r *http.Request) {
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
