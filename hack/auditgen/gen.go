// Package auditgen writes synthetic kube-apiserver audit logs (one
// audit.k8s.io/v1 Event per line, as the apiserver's JSON log backend
// writes them) with leader-election traffic of known timings, for the
// benchmark of pkg/audit, its tests and the example in docs/audit.md.
//
// The log mimics the installation of SURE-3805 (docs/design.md, "Why: the lock traffic"): Fleet
// locks at wrangler's 2s retry period beside ordinary traffic (lists,
// watches, gets and updates of other objects, a ConfigMap only read
// periodically). It is deterministic for a given Options.Seed. It provides
// no analysis; pkg/audit reads what it writes.
package auditgen

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"math/rand"
	"strconv"
	"time"
)

// Lock is one leader-election lock the generator simulates: one leader
// that renews every RetryPeriod (a get and an update, client-go before
// v0.30) and Followers candidates that read it every 1× to 2.2×
// RetryPeriod (wait.JitterUntil with JitterFactor 1.2).
type Lock struct {
	// Resource is "leases" (coordination.k8s.io) or "configmaps" (the
	// control-plane.alpha.kubernetes.io/leader annotation, as older
	// clients wrote it).
	Resource, Namespace, Name string
	// User and UserAgent identify the candidates; followers get the
	// suffixes "-follower-<n>" on their source IP only (same
	// ServiceAccount, same binary, other pods).
	User, UserAgent string
	RetryPeriod     time.Duration
	Followers       int
}

// Options says what to write.
type Options struct {
	// Start is the time of the first event; Duration the span.
	Start    time.Time
	Duration time.Duration
	// Locks are the simulated locks.
	Locks []Lock
	// BackgroundPerHour is the rate of other requests (Poisson).
	BackgroundPerHour float64
	// Level is "Metadata" or "RequestResponse" (response objects of
	// ConfigMap locks then carry the leader annotation).
	Level string
	// RequestReceived also writes the RequestReceived stage of every
	// request, as a policy without omitStages does.
	RequestReceived bool
	// Seed makes the output reproducible.
	Seed int64
}

// SURE3805 returns options that resemble the report behind this project:
// a small installation over 4.4 hours whose Fleet locks (fleet-agent-lock
// in two namespaces, fleet-controller-lock) renew at wrangler's 2s, and
// other traffic, so that the three Fleet locks are a third of all requests.
func SURE3805(start time.Time) Options {
	wr := func(ns, name, user, ua string, followers int) Lock {
		return Lock{Resource: "leases", Namespace: ns, Name: name, User: user, UserAgent: ua, RetryPeriod: 2 * time.Second, Followers: followers}
	}
	return Options{
		Start:    start,
		Duration: 4*time.Hour + 24*time.Minute,
		Locks: []Lock{
			wr("cattle-fleet-system", "fleet-controller-lock", "system:serviceaccount:cattle-fleet-system:fleet-controller", "fleetcontroller/v0.0.0 (linux/amd64) kubernetes/$Format", 0),
			wr("cattle-fleet-local-system", "fleet-agent-lock", "system:serviceaccount:cattle-fleet-local-system:fleet-agent", "fleetagent/v0.0.0 (linux/amd64) kubernetes/$Format", 0),
			wr("cattle-fleet-system", "fleet-agent-lock", "system:serviceaccount:cattle-fleet-system:fleet-agent", "fleetagent/v0.0.0 (linux/amd64) kubernetes/$Format", 0),
			{Resource: "leases", Namespace: "kube-system", Name: "cattle-controllers", User: "system:serviceaccount:cattle-system:rancher", UserAgent: "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", RetryPeriod: 2 * time.Second, Followers: 2},
			{Resource: "configmaps", Namespace: "kube-system", Name: "cloud-controller-manager", User: "system:serviceaccount:kube-system:cloud-controller-manager", UserAgent: "cloud-controller-manager/v1.26.0 (linux/amd64) kubernetes/abc/leader-election", RetryPeriod: 5 * time.Second},
		},
		BackgroundPerHour: 11700,
		Level:             "Metadata",
		Seed:              1,
	}
}

// ForSize returns o with its Duration scaled so that the log is about size
// bytes (at about 934 bytes a ResponseComplete line and 889 a
// RequestReceived one, as Write writes SURE3805's mix at Metadata level);
// rates, cadences and shares stay.
func ForSize(o Options, size int64) Options {
	perHour := o.BackgroundPerHour + 360 // the autoscaler's reads
	for _, l := range o.Locks {
		perHour += float64(time.Hour) / float64(l.RetryPeriod) * (2 + float64(l.Followers)/1.6)
	}
	perRequest := 934.0
	if o.RequestReceived {
		perRequest += 889
	}
	o.Duration = time.Duration(float64(size) / perRequest / perHour * float64(time.Hour)).Round(time.Second)
	return o
}

// stream is a source of periodic or random requests.
type stream struct {
	next time.Time
	emit func(w *writer, at time.Time) time.Time // writes the request(s) at at, returns the next time
}

type streams []*stream

func (s streams) Len() int            { return len(s) }
func (s streams) Less(i, j int) bool  { return s[i].next.Before(s[j].next) }
func (s streams) Swap(i, j int)       { s[i], s[j] = s[j], s[i] }
func (s *streams) Push(x interface{}) { *s = append(*s, x.(*stream)) }
func (s *streams) Pop() interface{} {
	old := *s
	x := old[len(old)-1]
	*s = old[:len(old)-1]
	return x
}

// Stats counts what Write wrote, for tests that check the analysis.
type Stats struct {
	// Requests is the number of requests (ResponseComplete events).
	Requests int
	// Lines is the number of lines (events of every stage).
	Lines int
	// ByLock counts requests per "resource/namespace/name".
	ByLock map[string]int
	// ByURI counts requests per request URI.
	ByURI map[string]int
}

// Write writes the log to out and returns what it wrote.
func Write(out io.Writer, o Options) (Stats, error) {
	w := &writer{bw: bufio.NewWriterSize(out, 1<<20), o: o, rnd: rand.New(rand.NewSource(o.Seed)), //nolint:gosec // G404: synthetic test data, reproducible from its seed
		stats: Stats{ByLock: map[string]int{}, ByURI: map[string]int{}}}
	end := o.Start.Add(o.Duration)
	var hs streams
	for i := range o.Locks {
		l := o.Locks[i]
		leaderIP := fmt.Sprintf("10.42.%d.10", i)
		hs = append(hs, &stream{next: o.Start.Add(time.Duration(w.rnd.Int63n(int64(l.RetryPeriod)))), emit: func(w *writer, at time.Time) time.Time {
			d := w.lockRequest(l, "get", leaderIP, at)
			d += w.lockRequest(l, "update", leaderIP, at.Add(d))
			// client-go's renew: wait.Until with sliding=true, so the
			// period starts after the renewal returns.
			return at.Add(d + l.RetryPeriod)
		}})
		for f := 0; f < l.Followers; f++ {
			ip := fmt.Sprintf("10.42.%d.%d", i, 20+f)
			hs = append(hs, &stream{next: o.Start.Add(time.Duration(w.rnd.Int63n(int64(l.RetryPeriod)))), emit: func(w *writer, at time.Time) time.Time {
				d := w.lockRequest(l, "get", ip, at)
				return at.Add(d + time.Duration(float64(l.RetryPeriod)*(1+1.2*w.rnd.Float64())))
			}})
		}
	}
	// An autoscaler reads its ConfigMap every 10s and never writes it:
	// not a lock.
	hs = append(hs, &stream{next: o.Start, emit: func(w *writer, at time.Time) time.Time {
		d := w.request("get", "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status", "configmaps", "", "kube-system", "cluster-autoscaler-status",
			"system:serviceaccount:kube-system:cluster-autoscaler", "cluster-autoscaler/v1.26.0", "10.42.9.9", at, "")
		return at.Add(d + 10*time.Second)
	}})
	if o.BackgroundPerHour > 0 {
		mean := float64(time.Hour) / o.BackgroundPerHour
		hs = append(hs, &stream{next: o.Start, emit: func(w *writer, at time.Time) time.Time {
			w.background(at)
			return at.Add(time.Duration(w.rnd.ExpFloat64() * mean))
		}})
	}
	heap.Init(&hs)
	for hs.Len() > 0 && w.err == nil {
		s := hs[0]
		if !s.next.Before(end) {
			heap.Pop(&hs)
			continue
		}
		s.next = s.emit(w, s.next)
		heap.Fix(&hs, 0)
	}
	if w.err != nil {
		return w.stats, w.err
	}
	return w.stats, w.bw.Flush()
}

type writer struct {
	bw    *bufio.Writer
	o     Options
	rnd   *rand.Rand
	buf   []byte
	id    uint64
	stats Stats
	err   error
}

// lockRequest writes one request of a lock candidate and returns its
// latency.
func (w *writer) lockRequest(l Lock, verb, ip string, at time.Time) time.Duration {
	group, prefix := "coordination.k8s.io", "/apis/coordination.k8s.io/v1"
	if l.Resource != "leases" {
		group, prefix = "", "/api/v1"
	}
	uri := prefix + "/namespaces/" + l.Namespace + "/" + l.Resource + "/" + l.Name
	if verb == "get" {
		uri += "?timeout=10s"
	} else {
		uri += "?timeout=10s"
	}
	ann := ""
	if l.Resource != "leases" {
		ann = `{"holderIdentity":"` + l.Name + `-` + ip + `","leaseDurationSeconds":15,"acquireTime":"2024-01-01T00:00:00Z","renewTime":"` + at.UTC().Format(time.RFC3339) + `","leaderTransitions":0}`
	}
	w.stats.ByLock[l.Resource+"/"+l.Namespace+"/"+l.Name]++
	return w.request(verb, uri, l.Resource, group, l.Namespace, l.Name, l.User, l.UserAgent, ip, at, ann)
}

var backgroundURIs = []struct {
	verb, uri, resource, group, ns, name, user, ua string
	weight                                         int
}{
	{"list", "/api/v1/namespaces/cattle-system/pods?limit=500", "pods", "", "cattle-system", "", "system:serviceaccount:cattle-system:rancher", "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", 5},
	{"get", "/api/v1/namespaces/kube-system/pods/kube-apiserver-node1", "pods", "", "kube-system", "kube-apiserver-node1", "system:node:node1", "kubelet/v1.26.8 (linux/amd64) kubernetes/395f0a2", 8},
	{"patch", "/api/v1/namespaces/kube-system/pods/kube-apiserver-node1/status", "pods", "", "kube-system", "kube-apiserver-node1", "system:node:node1", "kubelet/v1.26.8 (linux/amd64) kubernetes/395f0a2", 3},
	{"get", "/api/v1/nodes/node1?resourceVersion=0&timeout=10s", "nodes", "", "", "node1", "system:node:node1", "kubelet/v1.26.8 (linux/amd64) kubernetes/395f0a2", 6},
	{"update", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1?timeout=10s", "leases", "coordination.k8s.io", "kube-node-lease", "node1", "system:node:node1", "kubelet/v1.26.8 (linux/amd64) kubernetes/395f0a2", 6},
	{"watch", "/apis/management.cattle.io/v3/settings?allowWatchBookmarks=true&resourceVersion=%d&timeout=7m40s&watch=true", "settings", "management.cattle.io", "", "", "system:serviceaccount:cattle-system:rancher", "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", 2},
	{"get", "/apis/management.cattle.io/v3/clusters/local", "clusters", "management.cattle.io", "", "local", "system:serviceaccount:cattle-system:rancher", "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", 6},
	{"update", "/apis/management.cattle.io/v3/clusters/local/status", "clusters", "management.cattle.io", "", "local", "system:serviceaccount:cattle-system:rancher", "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", 2},
	{"get", "/apis/fleet.cattle.io/v1alpha1/namespaces/fleet-local/clusters/local", "clusters", "fleet.cattle.io", "fleet-local", "local", "system:serviceaccount:cattle-fleet-local-system:fleet-agent", "fleetagent/v0.0.0 (linux/amd64) kubernetes/$Format", 4},
	{"patch", "/apis/fleet.cattle.io/v1alpha1/namespaces/fleet-local/clusters/local/status", "clusters", "fleet.cattle.io", "fleet-local", "local", "system:serviceaccount:cattle-fleet-local-system:fleet-agent", "fleetagent/v0.0.0 (linux/amd64) kubernetes/$Format", 2},
	{"create", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "subjectaccessreviews", "authorization.k8s.io", "", "", "system:serviceaccount:cattle-system:rancher", "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", 4},
	{"get", "/api/v1/namespaces/cattle-system/secrets/tls-rancher-internal", "secrets", "", "cattle-system", "tls-rancher-internal", "system:serviceaccount:cattle-system:rancher", "rancher/v2.8.5 (linux/amd64) kubernetes/$Format", 3},
	{"update", "/api/v1/namespaces/default/endpoints/kubernetes", "endpoints", "", "default", "kubernetes", "system:apiserver", "kube-apiserver/v1.26.8 (linux/amd64) kubernetes/395f0a2", 1},
	{"get", "/readyz", "", "", "", "", "system:anonymous", "kube-probe/1.26", 4},
}

var backgroundWeight = func() int {
	n := 0
	for _, b := range backgroundURIs {
		n += b.weight
	}
	return n
}()

func (w *writer) background(at time.Time) {
	r := w.rnd.Intn(backgroundWeight)
	for _, b := range backgroundURIs {
		if r -= b.weight; r < 0 {
			uri := b.uri
			if b.verb == "watch" {
				uri = fmt.Sprintf(uri, 1000000+w.rnd.Intn(50000))
			}
			w.request(b.verb, uri, b.resource, b.group, b.ns, b.name, b.user, b.ua, "10.42.100.1", at, "")
			return
		}
	}
}

// request writes one request (its RequestReceived stage too when asked)
// and returns its latency.
func (w *writer) request(verb, uri, resource, group, ns, name, user, ua, ip string, at time.Time, leaderAnnotation string) time.Duration {
	if w.err != nil {
		return time.Millisecond
	}
	lat := time.Duration(1+w.rnd.Intn(8)) * time.Millisecond
	w.id++
	if w.o.RequestReceived {
		w.line("RequestReceived", verb, uri, resource, group, ns, name, user, ua, ip, at, at, "")
	}
	w.line("ResponseComplete", verb, uri, resource, group, ns, name, user, ua, ip, at, at.Add(lat), leaderAnnotation)
	w.stats.Requests++
	w.stats.ByURI[uri]++
	return lat
}

func (w *writer) line(stage, verb, uri, resource, group, ns, name, user, ua, ip string, received, stageAt time.Time, leaderAnnotation string) {
	b := w.buf[:0]
	b = append(b, `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"`...)
	b = append(b, w.o.Level...)
	b = append(b, `","auditID":"`...)
	b = appendUUID(b, w.o.Seed, w.id)
	b = append(b, `","stage":"`...)
	b = append(b, stage...)
	b = append(b, `","requestURI":`...)
	b = strconv.AppendQuote(b, uri)
	b = append(b, `,"verb":"`...)
	b = append(b, verb...)
	b = append(b, `","user":{"username":`...)
	b = strconv.AppendQuote(b, user)
	b = append(b, `,"groups":["system:serviceaccounts","system:authenticated"]},"sourceIPs":["`...)
	b = append(b, ip...)
	b = append(b, `"],"userAgent":`...)
	b = strconv.AppendQuote(b, ua)
	if resource != "" {
		b = append(b, `,"objectRef":{"resource":"`...)
		b = append(b, resource...)
		b = append(b, '"')
		if ns != "" {
			b = append(b, `,"namespace":"`...)
			b = append(b, ns...)
			b = append(b, '"')
		}
		if name != "" {
			b = append(b, `,"name":"`...)
			b = append(b, name...)
			b = append(b, '"')
		}
		if group != "" {
			b = append(b, `,"apiGroup":"`...)
			b = append(b, group...)
			b = append(b, '"')
		}
		b = append(b, `,"apiVersion":"v1"}`...)
	}
	if stage == "ResponseComplete" {
		b = append(b, `,"responseStatus":{"metadata":{},"code":200}`...)
		if w.o.Level == "RequestResponse" && leaderAnnotation != "" {
			b = append(b, `,"responseObject":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"`...)
			b = append(b, name...)
			b = append(b, `","namespace":"`...)
			b = append(b, ns...)
			b = append(b, `","annotations":{"control-plane.alpha.kubernetes.io/leader":`...)
			b = strconv.AppendQuote(b, leaderAnnotation)
			b = append(b, `}}}`...)
		}
	}
	b = append(b, `,"requestReceivedTimestamp":"`...)
	b = received.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
	b = append(b, `","stageTimestamp":"`...)
	b = stageAt.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
	b = append(b, `","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"cattle-admin\" of ClusterRole \"cluster-admin\" to ServiceAccount"}}`...)
	b = append(b, '\n')
	w.buf = b
	if _, err := w.bw.Write(b); err != nil {
		w.err = err
	}
	w.stats.Lines++
}

func appendUUID(b []byte, seed int64, id uint64) []byte {
	const hex = "0123456789abcdef"
	var raw [16]byte
	x := uint64(seed)*0x9e3779b97f4a7c15 ^ id
	y := id*0xbf58476d1ce4e5b9 + uint64(seed)
	for i := 0; i < 8; i++ {
		raw[i], raw[8+i] = byte(x>>(8*i)), byte(y>>(8*i))
	}
	for i, c := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return b
}
