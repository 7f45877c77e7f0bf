package audit

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/hack/auditgen"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// line builds one event line.
type line struct {
	id, stage, level, verb, uri, user, ua, ip string
	resource, group, ns, name, sub            string
	at                                        time.Time
	received                                  time.Time // requestReceivedTimestamp, when not at
	respAnnotation                            bool      // a response object with the leader annotation
	respObject                                bool      // a response object without it
}

func (l line) String() string {
	if l.stage == "" {
		l.stage = "ResponseComplete"
	}
	if l.level == "" {
		l.level = "Metadata"
	}
	if l.ip == "" {
		l.ip = "10.0.0.1"
	}
	if l.uri == "" {
		l.uri = "/api/v1/namespaces/" + l.ns + "/" + l.resource + "/" + l.name
	}
	s := fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":%q,"auditID":%q,"stage":%q,"requestURI":%q,"verb":%q,"user":{"username":%q},"sourceIPs":[%q],"userAgent":%q`,
		l.level, l.id, l.stage, l.uri, l.verb, l.user, l.ip, l.ua)
	if l.resource != "" {
		s += fmt.Sprintf(`,"objectRef":{"resource":%q,"namespace":%q,"name":%q,"apiGroup":%q,"subresource":%q}`, l.resource, l.ns, l.name, l.group, l.sub)
	}
	if l.respAnnotation {
		s += `,"responseObject":{"kind":"ConfigMap","metadata":{"annotations":{"control-plane.alpha.kubernetes.io/leader":"{\"holderIdentity\":\"x\"}"}}}`
	} else if l.respObject {
		s += `,"responseObject":{"kind":"ConfigMap","metadata":{"name":"` + l.name + `"},"data":{"a":"b"}}`
	}
	ts := l.at.UTC().Format(time.RFC3339Nano)
	rcv := ts
	if !l.received.IsZero() {
		rcv = l.received.UTC().Format(time.RFC3339Nano)
	}
	return s + fmt.Sprintf(`,"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, rcv, ts) + "\n"
}

func analyze(t *testing.T, files ...string) *Report {
	t.Helper()
	a := NewAnalyzer()
	for i, f := range files {
		if err := a.Read(fmt.Sprintf("file%d", i+1), strings.NewReader(f)); err != nil {
			t.Fatal(err)
		}
	}
	return a.Report(10)
}

func lockNamed(r *Report, resource, name string) (Lock, bool) {
	for _, l := range r.Locks {
		if l.Resource == resource && l.Name == name {
			return l, true
		}
	}
	return Lock{}, false
}

func TestStages(t *testing.T) {
	var b strings.Builder
	get := line{verb: "get", uri: "/a", user: "u"}
	// RequestReceived then ResponseComplete: one request.
	for _, st := range []string{"RequestReceived", "ResponseComplete"} {
		l := get
		l.id, l.stage, l.at = "1", st, t0
		b.WriteString(l.String())
	}
	// A watch: RequestReceived, ResponseStarted, ResponseComplete.
	for _, st := range []string{"RequestReceived", "ResponseStarted"} {
		l := get
		l.id, l.stage, l.uri, l.verb, l.at = "2", st, "/watch", "watch", t0.Add(time.Second)
		b.WriteString(l.String())
	}
	// Only RequestReceived (the final stage never came): counted at the end.
	l := get
	l.id, l.stage, l.uri, l.at = "3", "RequestReceived", "/lost", t0.Add(2*time.Second)
	b.WriteString(l.String())
	// A Panic is final.
	l.id, l.stage, l.uri, l.at = "4", "Panic", "/panic", t0.Add(3*time.Second)
	b.WriteString(l.String())
	watchEnd := get
	watchEnd.id, watchEnd.stage, watchEnd.uri, watchEnd.verb, watchEnd.at = "2", "ResponseComplete", "/watch", "watch", t0.Add(time.Hour)

	r := analyze(t, b.String(), watchEnd.String()) // the watch ends in the next (rotated) file
	if r.Requests != 4 || r.Events != 7 || r.Lines != 7 {
		t.Fatalf("requests %d, events %d, lines %d; want 4, 7, 7", r.Requests, r.Events, r.Lines)
	}
	got := map[string]int{}
	for _, u := range r.Top {
		got[u.RequestURI] = u.Count
	}
	if got["/a"] != 1 || got["/watch"] != 1 || got["/lost"] != 1 || got["/panic"] != 1 {
		t.Errorf("top %v", r.Top)
	}
	if !r.From.Equal(t0) || !r.To.Equal(t0.Add(time.Hour)) {
		t.Errorf("span %s to %s", r.From, r.To)
	}
}

func TestBadLines(t *testing.T) {
	good := line{id: "1", verb: "get", uri: "/a", at: t0}.String()
	in := good + "garbage\n\n" + `{"kind":"Status"}` + "\n" + good[:40] + "\n"
	for i := 0; i < 10; i++ {
		in += "x\n"
	}
	g2 := line{id: "2", verb: "get", uri: "/a", at: t0.Add(time.Minute)}.String()
	in += strings.TrimSuffix(g2, "\n") + "\r\n" // CRLF and a last line without newline
	in += line{id: "3", verb: "get", uri: "/b", at: t0.Add(2 * time.Minute)}.String()
	in = strings.TrimSuffix(in, "\n")
	r := analyze(t, in)
	if r.Requests != 3 || r.BadLines != 13 || len(r.BadLineSamples) != maxBadSamples {
		t.Fatalf("requests %d, bad %d, samples %+v", r.Requests, r.BadLines, r.BadLineSamples)
	}
	if s := r.BadLineSamples; s[0].Line != 2 || s[1].Line != 4 || s[2].Line != 5 || s[3].Line != 6 || s[0].File != "file1" {
		t.Errorf("line numbers: %+v (the empty line 3 is not counted as bad)", s)
	}
}

func TestEmptyAndGzip(t *testing.T) {
	if r := analyze(t, ""); r.Requests != 0 || !r.From.IsZero() || len(r.Locks) != 0 {
		t.Errorf("empty: %+v", r)
	}
	var plain bytes.Buffer
	for i := 0; i < 1000; i++ {
		plain.WriteString(line{id: fmt.Sprint(i), verb: "get", uri: "/a", at: t0.Add(time.Duration(i) * time.Second)}.String())
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(plain.Bytes()[:plain.Len()/2])
	_ = zw.Close()
	// A second gzip member, as concatenated rotated files are.
	zw = gzip.NewWriter(&gz)
	_, _ = zw.Write(plain.Bytes()[plain.Len()/2:])
	_ = zw.Close()
	if r := analyze(t, gz.String()); r.Requests != 1000 || r.BadLines != 0 {
		t.Errorf("gzip: %d requests, %d bad", r.Requests, r.BadLines)
	}
	err := NewAnalyzer().Read("audit.log.gz", bytes.NewReader(gz.Bytes()[:gz.Len()-100]))
	if err == nil || !strings.Contains(err.Error(), "audit.log.gz") || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated gzip: %v", err)
	}
	err = NewAnalyzer().Read("empty.gz", bytes.NewReader(gz.Bytes()[:5]))
	if err == nil || !strings.Contains(err.Error(), "empty.gz") {
		t.Errorf("gzip header only: %v", err)
	}
}

// TestMixedLevels: locks by each kind of evidence, and objects that are
// not locks, in one log with Metadata, Request and RequestResponse lines.
func TestMixedLevels(t *testing.T) {
	var b strings.Builder
	id := 0
	add := func(l line) {
		id++
		l.id = fmt.Sprint(id)
		b.WriteString(l.String())
	}
	for i := 0; i < 60; i++ {
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		// A ConfigMap lock at RequestResponse level: annotated.
		cm := line{level: "RequestResponse", resource: "configmaps", ns: "kube-system", name: "rr-lock", user: "ccm", ua: "ccm/v1", respAnnotation: true}
		cm.verb, cm.at = "get", at
		add(cm)
		cm.verb, cm.at = "update", at.Add(10*time.Millisecond)
		add(cm)
		// An Endpoints lock at Metadata level, steady: inferred.
		ep := line{resource: "endpoints", ns: "kube-system", name: "md-lock", user: "sched", ua: "sched/v1"}
		ep.verb, ep.at = "get", at
		add(ep)
		ep.verb, ep.at = "update", at.Add(5*time.Millisecond)
		add(ep)
		// An autoscaler's ConfigMap, read every 5s, never written.
		add(line{verb: "get", resource: "configmaps", ns: "kube-system", name: "autoscaler", user: "ca", ua: "ca/v1", at: at})
		// A ConfigMap read and written steadily, but logged at
		// RequestResponse without the annotation: not a lock.
		w := line{level: "RequestResponse", resource: "configmaps", ns: "app", name: "state", user: "app", ua: "app/v1", respObject: true}
		w.verb, w.at = "get", at
		add(w)
		w.verb, w.at = "update", at.Add(time.Millisecond)
		add(w)
		// Writes at an irregular cadence without reads: not a lock.
		if i%3 == 0 || i%7 == 0 {
			add(line{verb: "update", resource: "endpoints", ns: "default", name: "kubernetes", user: "apiserver", ua: "kube-apiserver", at: at})
		}
		// A Lease at Request level, and a node heartbeat.
		add(line{level: "Request", verb: "update", resource: "leases", group: "coordination.k8s.io", ns: "kube-system", name: "kube-scheduler", user: "sched", ua: "sched/v1", at: at})
		add(line{verb: "update", resource: "leases", group: "coordination.k8s.io", ns: "kube-node-lease", name: "node1", user: "system:node:node1", ua: "kubelet", at: at})
		// A Lease's status-like subresource does not count; nor a list.
		add(line{verb: "list", resource: "leases", group: "coordination.k8s.io", ns: "kube-system", user: "x", ua: "x", at: at})
	}
	r := analyze(t, b.String())
	want := map[string]Evidence{"configmaps/rr-lock": EvidenceAnnotation, "endpoints/md-lock": EvidenceCadence, "leases/kube-scheduler": EvidenceLease}
	if len(r.Locks) != len(want) {
		t.Errorf("locks: %+v", r.Locks)
	}
	for _, l := range r.Locks {
		ev, ok := want[l.Resource+"/"+l.Name]
		if !ok || ev != l.Evidence || l.Inferred != (ev == EvidenceCadence) {
			t.Errorf("lock %s/%s: evidence %s, inferred %v", l.Resource, l.Name, l.Evidence, l.Inferred)
		}
		if l.RetryPeriod != 5*time.Second {
			t.Errorf("lock %s/%s: retry period %s, want 5s", l.Resource, l.Name, l.RetryPeriod)
		}
	}
	ep, _ := lockNamed(r, "endpoints", "md-lock")
	if ep.Requests != 120 || len(ep.Holders) != 1 || ep.Holders[0].User != "sched" || ep.Behaviour() != election.LeaderGetsAndUpdates {
		t.Errorf("md-lock: %+v", ep)
	}
	l, _ := lockNamed(r, "leases", "kube-scheduler")
	if l.Behaviour() != election.LeaderOnlyUpdates {
		t.Errorf("kube-scheduler only updates: behaviour %s", l.Behaviour())
	}
	if math.Abs(r.LockShare-float64(120+120+60)/float64(r.Requests)) > 1e-9 {
		t.Errorf("lock share %v", r.LockShare)
	}
}

// TestGenerated checks the analysis against what the generator wrote.
func TestGenerated(t *testing.T) {
	o := auditgen.SURE3805(t0)
	o.Duration = 20 * time.Minute
	o.RequestReceived = true
	var buf bytes.Buffer
	st, err := auditgen.Write(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	r := analyze(t, buf.String())
	if r.Requests != st.Requests || r.Lines != st.Lines || r.BadLines != 0 {
		t.Fatalf("requests %d, lines %d; the generator wrote %d, %d", r.Requests, r.Lines, st.Requests, st.Lines)
	}
	for _, u := range r.Top {
		if st.ByURI[u.RequestURI] != u.Count {
			t.Errorf("%s: %d, wrote %d", u.RequestURI, u.Count, st.ByURI[u.RequestURI])
		}
	}
	if len(r.Locks) != len(o.Locks) {
		t.Errorf("%d locks, the generator wrote %d: %+v", len(r.Locks), len(o.Locks), r.Locks)
	}
	for _, gl := range o.Locks {
		l, ok := lockNamed(r, gl.Resource, gl.Name)
		if !ok {
			continue
		}
		if l.Namespace == gl.Namespace && l.Requests != st.ByLock[gl.Resource+"/"+gl.Namespace+"/"+gl.Name] {
			t.Errorf("%s: %d requests, wrote %d", gl.Name, l.Requests, st.ByLock[gl.Resource+"/"+gl.Namespace+"/"+gl.Name])
		}
		if l.RetryPeriod != gl.RetryPeriod {
			t.Errorf("%s: retry period %s, wrote %s", gl.Name, l.RetryPeriod, gl.RetryPeriod)
		}
		if l.Followers() != gl.Followers {
			t.Errorf("%s: %d followers, wrote %d", gl.Name, l.Followers(), gl.Followers)
		}
		if l.Inferred != (gl.Resource == "configmaps") {
			t.Errorf("%s: inferred %v", gl.Name, l.Inferred)
		}
	}
	if _, ok := lockNamed(r, "configmaps", "cluster-autoscaler-status"); ok {
		t.Error("the autoscaler's ConfigMap, only read, counted as a lock")
	}

	// The projection: Fleet's three locks at 2s, projected to 30s/25s/10s
	// with no followers, client-go < v0.30: 720 an hour each.
	p := r.Project(map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults, settings.FleetAgent: election.FleetDefaults}, "defaults")
	if len(p.Locks) != 3 || math.Abs(p.ProjectedPerHour-3*720) > 1e-9 {
		t.Errorf("projection: %+v", p)
	}
	if p.ProjectedShare >= p.Share || p.Share < 0.3 {
		t.Errorf("share %v → %v", p.Share, p.ProjectedShare)
	}
}

func TestManagedComponent(t *testing.T) {
	cases := map[string]settings.Component{
		"fleet-agent-lock": settings.FleetAgent, "fleet-agent": settings.FleetAgent,
		"fleet-controller-lock": settings.FleetController, "gitjob": settings.FleetController,
		"fleet-agentmanagement-lock": settings.FleetController, "fleet-cleanup-lock": settings.FleetController,
		"fleet-controller-leader-election-shard": settings.FleetController, "fleet-gitops-leader-election-shard-s1": settings.FleetController,
		"fleet-helmops-leader-election-shard": settings.FleetController,
		"fleet-agent-clusterstatus":           "", "cattle-controllers": "", "fleet-controller-leader-election-shardx": "",
	}
	for name, want := range cases {
		if got := ManagedComponent("leases", "cattle-fleet-system", name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got := ManagedComponent("configmaps", "cattle-fleet-system", "fleet-agent-lock"); got != "" {
		t.Errorf("a ConfigMap fleet-agent-lock: %q", got)
	}
	// Rancher's own lock: the Lease in kube-system only (wrangler v1's
	// ConfigMap of Rancher 2.8.0-2.8.2 reads no env).
	if got := ManagedComponent("leases", "kube-system", "cattle-controllers"); got != settings.Rancher {
		t.Errorf("Lease kube-system/cattle-controllers: %q, want rancher", got)
	}
	if got := ManagedComponent("configmaps", "kube-system", "cattle-controllers"); got != "" {
		t.Errorf("ConfigMap kube-system/cattle-controllers: %q, want none", got)
	}
}

func TestTopCounterApproximate(t *testing.T) {
	c := newTopCounter(10)
	// Two heavy hitters among many distinct URIs.
	for i := 0; i < 10000; i++ {
		c.add([]byte("/heavy"))
		if i%2 == 0 {
			c.add([]byte("/second"))
		}
		c.add([]byte(fmt.Sprintf("/rare/%d", i)))
	}
	top := c.top(2)
	if !c.approx || top[0].RequestURI != "/heavy" || top[1].RequestURI != "/second" {
		t.Fatalf("top %+v", top)
	}
	if top[0].Count < 10000 || top[0].Count-top[0].MaxOvercount > 10000 {
		t.Errorf("/heavy: %d (±%d), true 10000", top[0].Count, top[0].MaxOvercount)
	}
	if len(c.m) > 10 {
		t.Errorf("%d counters, limit 10", len(c.m))
	}
}

// TestLongWatch: a watch whose completion comes after more requests than
// the ring of pending stages holds is counted once.
func TestLongWatch(t *testing.T) {
	var b strings.Builder
	b.WriteString(line{id: "w", stage: "ResponseStarted", verb: "watch", uri: "/watch", at: t0}.String())
	for i := 0; i < 2*maxPending; i++ {
		id := fmt.Sprint(i)
		b.WriteString(line{id: id, stage: "RequestReceived", verb: "get", uri: "/a", at: t0.Add(time.Second)}.String())
		b.WriteString(line{id: id, verb: "get", uri: "/a", at: t0.Add(time.Second)}.String())
	}
	b.WriteString(line{id: "w", verb: "watch", uri: "/watch", at: t0.Add(time.Hour)}.String())
	r := analyze(t, b.String())
	if r.Requests != 2*maxPending+1 || r.Top[1].RequestURI != "/watch" || r.Top[1].Count != 1 {
		t.Errorf("requests %d, top %+v", r.Requests, r.Top)
	}
}

// TestSpanIsWhenLogged: a rotated log begins with the end of watches
// received long before it (kube-apiserver ends them after 30 to 60
// minutes); the span, and so every per-hour figure, is the time the log's
// events were written in, not stretched back to those watches' start.
// Seen beside the real Rancher v2.12.12 (tests/upstream): a 60 s window of
// its audit log held watches received minutes earlier, and the lock
// renewed every 2s showed 306 requests an hour instead of 1,800.
func TestSpanIsWhenLogged(t *testing.T) {
	var b strings.Builder
	b.WriteString(line{id: "w", verb: "watch", uri: "/watch", at: t0, received: t0.Add(-45 * time.Minute)}.String())
	for i := 0; i < 60; i++ {
		b.WriteString(line{id: fmt.Sprint("u", i), verb: "update", resource: "leases", group: "coordination.k8s.io",
			ns: "kube-system", name: "cattle-controllers", user: "rancher", ua: "rancher", at: t0.Add(time.Duration(i) * 10 * time.Second)}.String())
	}
	r := analyze(t, b.String())
	if want := 590.0; r.SpanSeconds != want {
		t.Errorf("span %vs, want %vs (from the first event logged to the last)", r.SpanSeconds, want)
	}
	if len(r.Locks) != 1 || r.Locks[0].PerHour < 360 || r.Locks[0].PerHour > 370 {
		t.Errorf("locks %+v, want cattle-controllers at about 360 an hour", r.Locks)
	}
}

// TestLeftAloneAttributed: rancher-turtles' and Cluster API's Leases (Rancher
// v2.13+) are attributed to their components and listed as left alone,
// with their defaults; Fleet's are attributed and managed.
func TestLeftAloneAttributed(t *testing.T) {
	o := auditgen.SURE3805(t0)
	o.Duration = 10 * time.Minute
	o.Locks = append(o.Locks,
		auditgen.Lock{Resource: "leases", Namespace: "cattle-turtles-system", Name: "controller-leader-election-rancher-turtles",
			User: "system:serviceaccount:cattle-turtles-system:rancher-turtles-manager", UserAgent: "manager/v0.0.0", RetryPeriod: 2 * time.Second},
		auditgen.Lock{Resource: "leases", Namespace: "cattle-capi-system", Name: "controller-leader-election-capi",
			User: "system:serviceaccount:cattle-capi-system:capi-manager", UserAgent: "manager/v0.0.0", RetryPeriod: 2 * time.Second})
	var buf bytes.Buffer
	if _, err := auditgen.Write(&buf, o); err != nil {
		t.Fatal(err)
	}
	r := analyze(t, buf.String())
	want := map[string]string{
		"controller-leader-election-rancher-turtles": "rancher-turtles",
		"controller-leader-election-capi":            "cluster-api (installed by rancher-turtles)",
		"fleet-controller-lock":                      "fleet-controller",
	}
	for name, comp := range want {
		l, ok := lockNamed(r, "leases", name)
		if !ok || l.Component != comp {
			t.Errorf("%s: found %v, component %q, want %q", name, ok, l.Component, comp)
		}
	}
	if len(r.LeftAlone) != 2 {
		t.Fatalf("left alone %+v, want the two", r.LeftAlone)
	}
	for _, l := range r.LeftAlone {
		if l.Defaults != "leaseDuration=15s renewDeadline=10s retryPeriod=2s" || l.Change == "" || l.PerHour < 1000 {
			t.Errorf("%+v", l)
		}
	}
	for _, l := range r.Locks {
		if strings.HasPrefix(l.Name, "controller-leader-election-") && l.Managed != "" {
			t.Errorf("%s managed by %q", l.Name, l.Managed)
		}
	}
	if r.Managed != nil {
		t.Fatal("projected before Project")
	}
	r.Project(map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults}, "defaults")
	for _, pl := range r.Managed.Locks {
		if strings.HasPrefix(pl.Name, "controller-leader-election-") {
			t.Errorf("%s projected with leasetune's triple", pl.Name)
		}
	}
}
