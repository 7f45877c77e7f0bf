package prometheus_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"leasetune.io/leasetune/pkg/audit"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/dashboard"
	"leasetune.io/leasetune/tests/integration/framework"
)

// window is how long each lock traffic is measured over; the two triples
// the electors run, before and after the retry-period change (valid by
// client-go's rules: renewDeadline > 1.2 × retryPeriod).
var (
	window = 25 * time.Second
	fast   = election.Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	slow   = election.Timings{LeaseDuration: 9 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: 3 * time.Second}
	// locks are the Leases the electors contend for, each with a leader
	// and a follower.
	locks = []string{"fleet-agent", "fleet-controller-lock"}
)

// runElectors runs a leader and a follower with timings on each of locks
// in ns until ctx ends, and returns once every lock has its leader. The
// identities are the same at every call, so a new leader takes over its
// Lease at once.
func runElectors(t *testing.T, ctx context.Context, wg *sync.WaitGroup, ns string, timings election.Timings) {
	t.Helper()
	for _, lock := range locks {
		for _, id := range []string{"a", "b"} {
			cfg := rest.CopyConfig(cp.Config)
			cfg.UserAgent = "prom-test-" + lock + "-" + id
			cs := kubernetes.NewForConfigOrDie(cfg)
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: lock},
					Client: cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: lock + "-" + id}},
				LeaseDuration: timings.LeaseDuration, RenewDeadline: timings.RenewDeadline, RetryPeriod: timings.RetryPeriod,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
					OnStoppedLeading: func() {},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); le.Run(ctx) }()
			if id == "a" {
				framework.Eventually(t, lock+" has its leader", le.IsLeader)
			}
		}
	}
}

// runConfigMapLock keeps a leader record in a ConfigMap's annotation,
// getting and updating it every second as client-go's old ConfigMap lock
// did, until ctx ends (tests/integration/audit does the same: client-go
// v0.28 has no ConfigMap lock).
func runConfigMapLock(t *testing.T, ctx context.Context, wg *sync.WaitGroup, ns string) {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = "prom-test-configmap-lock"
	cms := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old-style-lock"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if cm, err := cms.Get(ctx, "old-style-lock", metav1.GetOptions{}); err == nil {
				rec, _ := json.Marshal(resourcelock.LeaderElectionRecord{HolderIdentity: "old-style", LeaseDurationSeconds: 15,
					AcquireTime: metav1.Now(), RenewTime: metav1.Now()})
				cm.Annotations = map[string]string{audit.LeaderAnnotation: string(rec)}
				_, _ = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

// measured is one window's lock traffic, per hour.
type measured struct {
	end                         time.Time
	prometheus, promByVerb      float64 // the dashboard's Lease queries
	audit                       float64 // leasetune audit: the Lease locks' requests over the window
	promConfigMaps, auditCMLock float64
}

// auditWindow writes the audit log's events of the requests received in
// (end-window, end] to a file and runs `leasetune audit --output json` on
// it.
func auditWindow(t *testing.T, end time.Time) auditReport {
	t.Helper()
	in, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(t.TempDir(), "window-"+end.Format("150405")+".log")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	begin := end.Add(-window)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	lines := 0
	for sc.Scan() {
		var ev struct {
			Received time.Time `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || !ev.Received.After(begin) || ev.Received.After(end) {
			continue
		}
		lines++
		if _, err := out.Write(append(sc.Bytes(), '\n')); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(binary, "audit", "--output", "json", path).Output()
	if err != nil {
		t.Fatalf("leasetune audit %s (%d lines): %v", path, lines, err)
	}
	var r auditReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("leasetune audit --output json: %v\n%s", err, b)
	}
	return r
}

// auditReport is the part of `leasetune audit --output json` read here
// (docs/audit.md).
type auditReport struct {
	Requests    int     `json:"requests"`
	SpanSeconds float64 `json:"spanSeconds"`
	Locks       []struct {
		Resource  string  `json:"resource"`
		Namespace string  `json:"namespace"`
		Name      string  `json:"name"`
		Requests  int     `json:"requests"`
		PerHour   float64 `json:"perHour"`
		Inferred  bool    `json:"inferred"`
	} `json:"locks"`
}

// perHour sums the requests of the locks of resource over the window, per
// hour (name: only that lock).
func (r auditReport) perHour(resource, name string) float64 {
	n := 0
	for _, l := range r.Locks {
		if l.Resource == resource && (name == "" || l.Name == name) {
			n += l.Requests
		}
	}
	return float64(n) / window.Seconds() * 3600
}

// measure evaluates, for the window that ended at end, the dashboard's
// Lease and ConfigMap queries (the range variables set to the window) and
// `leasetune audit` on the audit log of the same window.
func (e *env) measure(t *testing.T, ns string, end time.Time) measured {
	t.Helper()
	m := measured{end: end}
	stat := e.dashboardQueryTitled(t, "Lease gets and updates per hour, over the time range")
	byVerb := e.dashboardQueryTitled(t, "Lease gets and updates per hour, by verb")
	cms := e.dashboardQueryTitled(t, "ConfigMap gets and updates per hour, by verb")
	var err error
	if m.prometheus, err = e.prom.total(expand(t, stat, window), end); err != nil {
		t.Fatal(err)
	}
	if m.promByVerb, err = e.prom.total(expand(t, byVerb, window), end); err != nil {
		t.Fatal(err)
	}
	if m.promConfigMaps, err = e.prom.total(expand(t, cms, window), end); err != nil {
		t.Fatal(err)
	}
	r := auditWindow(t, end)
	m.audit = r.perHour("leases", "")
	m.auditCMLock = r.perHour("configmaps", "old-style-lock")
	t.Logf("window ending %s: %d requests in the audit log, locks %+v", end.Format(time.RFC3339), r.Requests, r.Locks)
	return m
}

// dashboardQueryTitled returns the (first) query of the panel titled title.
func (e *env) dashboardQueryTitled(t *testing.T, title string) dashboard.Query {
	t.Helper()
	for _, q := range e.dash.Queries() {
		if q.PanelTitle == title {
			return q
		}
	}
	t.Fatalf("the dashboard has no panel %q", title)
	return dashboard.Query{}
}

// within reports whether got is within frac of want.
func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

// TestLockRateMatchesAudit: real client-go electors hold two Leases (a
// leader and a follower each) with a 1s retry period, then with 3s. Over a
// window of each, the dashboard's Lease request rate, evaluated by
// Prometheus from the kube-apiserver's apiserver_request_total, equals
// what `leasetune audit` counts for the Lease locks in the apiserver's
// audit log of the same window within 10%, and shows the drop; the
// ConfigMap panel shows at least the ConfigMap lock's traffic (it is an
// upper bound: every ConfigMap get and update by name).
func TestLockRateMatchesAudit(t *testing.T) {
	e := sharedEnv(t)
	t.Parallel()
	ns := namespace(t)
	var bg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(context.Background())
	defer func() { stopBg(); bg.Wait() }()
	runConfigMapLock(t, bgCtx, &bg, ns)

	var ms []measured
	for _, timings := range []election.Timings{fast, slow} {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		runElectors(t, ctx, &wg, ns, timings)
		time.Sleep(timings.RetryPeriod + time.Second) // the followers' first tries, the new cadence established
		time.Sleep(window)
		end := time.Now()
		cancel()
		wg.Wait()
		ms = append(ms, measured{end: end})
	}
	stopBg()
	bg.Wait()
	time.Sleep(3 * scrapeInterval) // scrapes after the last window; the audit log's last lines
	for i, timings := range []election.Timings{fast, slow} {
		ms[i] = e.measure(t, ns, ms[i].end)
		m := ms[i]
		t.Logf("retry period %s: Lease requests per hour over %s: Prometheus %.0f (by verb %.0f), leasetune audit %.0f (%+.1f%%); ConfigMaps: Prometheus %.0f, the ConfigMap lock %.0f",
			timings.RetryPeriod, window, m.prometheus, m.promByVerb, m.audit, 100*(m.prometheus-m.audit)/m.audit, m.promConfigMaps, m.auditCMLock)
		if m.audit == 0 || !within(m.prometheus, m.audit, 0.10) {
			t.Errorf("retry period %s: the dashboard shows %.0f Lease requests per hour, leasetune audit %.0f: not within 10%%", timings.RetryPeriod, m.prometheus, m.audit)
		}
		if !within(m.promByVerb, m.prometheus, 0.001) {
			t.Errorf("retry period %s: the by-verb panel sums to %.1f, the total panel shows %.1f", timings.RetryPeriod, m.promByVerb, m.prometheus)
		}
		if m.auditCMLock == 0 || m.promConfigMaps < 0.9*m.auditCMLock {
			t.Errorf("retry period %s: the ConfigMap panel shows %.0f per hour, under the ConfigMap lock's %.0f from the audit log", timings.RetryPeriod, m.promConfigMaps, m.auditCMLock)
		}
	}
	// 1s → 3s: the electors' traffic falls to a third; leasetune's own
	// Lease and the apiserver's identity Lease stay.
	ratio, auditRatio := ms[1].prometheus/ms[0].prometheus, ms[1].audit/ms[0].audit
	t.Logf("after the change: %.2f of the Lease requests before on the dashboard, %.2f by leasetune audit", ratio, auditRatio)
	if ratio > 0.6 || !within(ratio, auditRatio, 0.15) {
		t.Errorf("the dashboard's Lease requests fell to %.2f of what they were, leasetune audit's to %.2f: want under 0.6 and alike", ratio, auditRatio)
	}
}
