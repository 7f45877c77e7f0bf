package framework

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Request is one request a client sent, as a Recorder saw it.
type Request struct {
	// At is when the request was sent.
	At time.Time
	// Method is the HTTP method; Path the URL path (e.g.
	// /apis/apps/v1/namespaces/ns/deployments/name); Query its query.
	Method, Path string
	Query        url.Values
	// Body is the request body ("" for none).
	Body string
	// Status is the response's status code: 0 while the request is in
	// flight or when no response came (then Err says why).
	Status int
	Err    error
}

// IsWrite reports whether the request asks for a change: any method but
// GET and HEAD.
func (q Request) IsWrite() bool { return q.Method != http.MethodGet && q.Method != http.MethodHead }

// Accepted reports whether the API server answered with a 2xx status.
func (q Request) Accepted() bool { return q.Status >= 200 && q.Status < 300 }

// Answered reports whether a response came, of any status.
func (q Request) Answered() bool { return q.Status != 0 }

// Refused reports whether the request ended without being accepted: an
// error status or no response.
func (q Request) Refused() bool { return (q.Status != 0 && !q.Accepted()) || q.Err != nil }

// String is "15:04:05.000 PATCH /path: 409" (the status, the error, or
// "in flight").
func (q Request) String() string {
	res := "in flight"
	switch {
	case q.Err != nil:
		res = q.Err.Error()
	case q.Status != 0:
		res = fmt.Sprint(q.Status)
	}
	return fmt.Sprintf("%s %s %s: %s", q.At.Format("15:04:05.000"), q.Method, q.Path, res)
}

// Recorder records the requests of the clients built from a rest.Config
// (Record): by default every write, with its body and the answer; reads
// too with WithReads. It is safe for concurrent use.
type Recorder struct {
	reads  bool
	before func(Request)

	mu   sync.Mutex
	reqs []Request
}

// RecordOption changes what a Recorder records or does.
type RecordOption func(*Recorder)

// WithReads makes the Recorder record reads (GET and HEAD, lists and
// watches included) as well as writes.
func WithReads() RecordOption { return func(r *Recorder) { r.reads = true } }

// Before makes the Recorder call f with each request it records, on the
// client's goroutine, once it is recorded and just before it is sent: a
// hook that puts another writer's edit, or a change the test makes,
// between a client's read and its write. (A test that sees the hook's
// effect therefore finds the request already counted.)
func Before(f func(Request)) RecordOption { return func(r *Recorder) { r.before = f } }

// Record installs a Recorder on cfg (its WrapTransport, after any wrapper
// cfg already has) and returns it: every client built from cfg afterwards
// reports to it. Requests to Events (a path ending in /events or under
// /events/) are not recorded: they report a write, they are not the
// writes a test counts.
func Record(cfg *rest.Config, opts ...RecordOption) *Recorder {
	r := &Recorder{}
	for _, o := range opts {
		o(r)
	}
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &recordingTransport{rec: r, next: rt}
	}
	return r
}

type recordingTransport struct {
	rec  *Recorder
	next http.RoundTripper
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	q := Request{At: time.Now(), Method: req.Method, Path: req.URL.Path, Query: req.URL.Query()}
	if (!q.IsWrite() && !rt.rec.reads) || strings.HasSuffix(q.Path, "/events") || strings.Contains(q.Path, "/events/") {
		return rt.next.RoundTrip(req)
	}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("record the request body: %w", err)
		}
		q.Body = string(b)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	rt.rec.mu.Lock()
	i := len(rt.rec.reqs)
	rt.rec.reqs = append(rt.rec.reqs, q)
	rt.rec.mu.Unlock()
	if rt.rec.before != nil {
		rt.rec.before(q)
	}
	resp, err := rt.next.RoundTrip(req)
	rt.rec.mu.Lock()
	if err != nil {
		rt.rec.reqs[i].Err = err
	} else {
		rt.rec.reqs[i].Status = resp.StatusCode
	}
	rt.rec.mu.Unlock()
	return resp, err
}

// Requests returns every request recorded so far, in the order sent.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

func (r *Recorder) count(keep func(Request) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.reqs {
		if keep(q) {
			n++
		}
	}
	return n
}

// Writes is the number of writes sent so far, whatever their answer.
func (r *Recorder) Writes() int { return r.count(Request.IsWrite) }

// Reads is the number of reads sent so far (recorded WithReads only).
func (r *Recorder) Reads() int { return r.count(func(q Request) bool { return !q.IsWrite() }) }

// Answered is the number of requests, of any method, that got a response.
func (r *Recorder) Answered() int { return r.count(Request.Answered) }

// Accepted is the number of writes the API server accepted (2xx).
func (r *Recorder) Accepted() int {
	return r.count(func(q Request) bool { return q.IsWrite() && q.Accepted() })
}

// WritesTo is the number of writes sent to path, whatever their answer.
func (r *Recorder) WritesTo(path string) int {
	return r.count(func(q Request) bool { return q.IsWrite() && q.Path == path })
}

// AcceptedByPath is the number of accepted writes by URL path.
func (r *Recorder) AcceptedByPath() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, q := range r.reqs {
		if q.IsWrite() && q.Accepted() {
			out[q.Path]++
		}
	}
	return out
}

// Refused returns the writes the API server refused (a 409 on a stale
// resourceVersion, a failed test op) or that got no response, in order.
func (r *Recorder) Refused() []Request {
	var out []Request
	for _, q := range r.Requests() {
		if q.IsWrite() && q.Refused() {
			out = append(out, q)
		}
	}
	return out
}

// WritesSince describes the writes sent at or after since, one a line.
func (r *Recorder) WritesSince(since time.Time) string {
	var b strings.Builder
	for _, q := range r.Requests() {
		if q.IsWrite() && !q.At.Before(since) {
			fmt.Fprintf(&b, "\n  %s %.300s", q, q.Body)
		}
	}
	return b.String()
}

// Settle waits until the recorder has recorded no write for QuietWindow
// while idle (when not nil: the controller's queue is empty, say) holds,
// and returns the number of writes then. It fails t when that has not
// happened within QuietDeadline (a write loop, a fight with another
// writer, a controller that never gets idle), listing the writes it saw
// in the last window.
func (r *Recorder) Settle(t testing.TB, idle func() bool) int {
	t.Helper()
	return WaitQuiet(t, "no write for "+QuietWindow.String(), QuietWindow, QuietDeadline,
		func() (int, bool) { return r.Writes(), idle == nil || idle() },
		func(since time.Time) string { return "writes:" + r.WritesSince(since) })
}

// NoWrites is the claim that nothing more is written from now: it checks
// with Consistently over d (at least ConsistentlyMin) that the recorder
// records no write, and then, when idle is not nil, that none comes
// before the controller is idle and quiet (Settle). It reports the writes
// it saw with t.Errorf and returns false when the claim fails.
func (r *Recorder) NoWrites(t testing.TB, what string, d time.Duration, idle func() bool) bool {
	t.Helper()
	start, n := time.Now(), r.Writes()
	ok := Consistently(t, what+": no write", d, func() bool { return r.Writes() == n })
	if ok && idle != nil {
		ok = r.Settle(t, idle) == n
	}
	if !ok {
		t.Errorf("%s: written after all:%s", what, r.WritesSince(start))
	}
	return ok
}
