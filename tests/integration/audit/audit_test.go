package audit_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// The timings the clients run with.
var (
	// leaseTimings is a valid triple short enough for a test, on a Lease
	// named like the fleet-agent's (Fleet v0.12+), so that pkg/audit
	// counts it as managed.
	leaseTimings = election.Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	// configMapRetry is the cadence of the ConfigMap-annotation leader.
	configMapRetry = 2 * time.Second
	// readerPeriod is the cadence of a client that only reads a ConfigMap.
	readerPeriod = time.Second
	// runFor is how long the clients run.
	runFor = 30 * time.Second
)

// counter records, per user agent, the requests of the clients it makes.
type counter struct {
	mu   sync.Mutex
	recs map[string]*framework.Recorder
}

func (c *counter) client(t *testing.T, ua string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = ua
	rec := framework.Record(cfg, framework.WithReads())
	c.mu.Lock()
	c.recs[ua] = rec
	c.mu.Unlock()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// get is the number of requests of the client with user agent ua that got
// a response.
func (c *counter) get(ua string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recs[ua].Answered()
}

// TestRealAuditLog runs, in one namespace for runFor: two client-go
// electors on the Lease "fleet-agent" (leader and follower, retry period
// 1s); a leader that keeps its record in the annotation
// control-plane.alpha.kubernetes.io/leader of a ConfigMap, getting and
// updating it every 2s as client-go's ConfigMap lock did (client-go v0.28
// no longer ships ConfigMap or Endpoints locks: resourcelock.New accepts
// only "leases" and, since v0.27, refuses "configmapsleases"), and a
// follower reading it; and a client that only reads another ConfigMap
// every second. The audit log must show exactly the requests each client
// made, the two locks (the ConfigMap one inferred, at Metadata level),
// their retry periods, and no lock for the ConfigMap only read.
func TestRealAuditLog(t *testing.T) {
	ns := cp.Namespace(t)
	cnt := &counter{recs: map[string]*framework.Recorder{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup

	// The Lease electors.
	var leader atomic.Value
	for _, id := range []string{"elector-a", "elector-b"} {
		cs := cnt.client(t, "test-"+id)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-agent"},
				Client: cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: id}},
			LeaseDuration: leaseTimings.LeaseDuration, RenewDeadline: leaseTimings.RenewDeadline, RetryPeriod: leaseTimings.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { leader.Store("test-" + id); <-ctx.Done() },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); le.Run(ctx) }()
		if id == "elector-a" {
			framework.Eventually(t, "elector-a leads", func() bool { return le.IsLeader() })
		}
	}

	// The ConfigMap-annotation leader, its follower, and the reader.
	cms := cnt.client(t, "test-old-style-leader").CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old-style-lock"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readerCMs := cnt.client(t, "test-reader").CoreV1().ConfigMaps(ns)
	if _, err := readerCMs.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "autoscaler-config"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		every(ctx, configMapRetry, func() {
			cm, err := cms.Get(ctx, "old-style-lock", metav1.GetOptions{})
			if err != nil {
				return
			}
			rec, _ := json.Marshal(resourcelock.LeaderElectionRecord{HolderIdentity: "old-style-leader", LeaseDurationSeconds: 15,
				AcquireTime: metav1.Now(), RenewTime: metav1.Now()})
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[audit.LeaderAnnotation] = string(rec)
			_, _ = cms.Update(ctx, cm, metav1.UpdateOptions{})
		})
	}()
	followerCMs := cnt.client(t, "test-old-style-follower").CoreV1().ConfigMaps(ns)
	go func() {
		defer wg.Done()
		rnd := rand.New(rand.NewSource(1))
		for ctx.Err() == nil {
			_, _ = followerCMs.Get(ctx, "old-style-lock", metav1.GetOptions{})
			sleep(ctx, time.Duration(float64(configMapRetry)*(1+1.2*rnd.Float64())))
		}
	}()
	go func() {
		defer wg.Done()
		every(ctx, readerPeriod, func() { _, _ = readerCMs.Get(ctx, "autoscaler-config", metav1.GetOptions{}) })
	}()

	start := time.Now()
	sleep(context.Background(), runFor)
	cancel()
	wg.Wait()
	elapsed := time.Since(start)
	// The apiserver writes ResponseComplete once the handler returns,
	// possibly after the client has its response.
	time.Sleep(2 * time.Second)

	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := audit.NewAnalyzer()
	if err := a.Read(auditLog, f); err != nil {
		t.Fatal(err)
	}
	r := a.Report(10)
	if r.BadLines != 0 {
		t.Errorf("%d bad lines in the apiserver's own log: %v", r.BadLines, r.BadLineSamples)
	}
	locks := map[string]audit.Lock{}
	for _, l := range r.Locks {
		if l.Namespace == ns {
			locks[l.Resource+"/"+l.Name] = l
		}
		if l.Resource == "leases" && l.Namespace == "kube-node-lease" {
			t.Errorf("node heartbeat Lease %s counted as a lock", l.Name)
		}
	}
	t.Logf("%d requests in %s; locks in %s: %+v", r.Requests, elapsed, ns, locks)

	byUA := func(l audit.Lock) map[string]audit.Holder {
		m := map[string]audit.Holder{}
		for _, h := range append(append([]audit.Holder{}, l.Holders...), l.Readers...) {
			m[h.UserAgent] = h
		}
		return m
	}
	// client-go's requests can be cancelled at the end: the server may
	// have logged one the client never saw answered, or not yet logged
	// one the client saw.
	near := func(what string, got, want int) {
		t.Helper()
		if got < want-1 || got > want+1 {
			t.Errorf("%s: %d requests in the audit log, the client counted %d", what, got, want)
		}
	}

	lease, ok := locks["leases/fleet-agent"]
	if !ok {
		t.Fatalf("the Lease fleet-agent is not among the locks: %+v", r.Locks)
	}
	if lease.Evidence != audit.EvidenceLease || lease.Inferred || lease.Managed != settings.FleetAgent {
		t.Errorf("Lease: evidence %s, inferred %v, managed %q", lease.Evidence, lease.Inferred, lease.Managed)
	}
	holders := byUA(lease)
	for _, ua := range []string{"test-elector-a", "test-elector-b"} {
		near("Lease, "+ua, holders[ua].Requests, cnt.get(ua))
	}
	if len(lease.Holders) == 0 || lease.Holders[0].UserAgent != "test-elector-a" {
		t.Errorf("Lease holder: %+v, want test-elector-a first", lease.Holders)
	}
	if len(lease.Readers) != 1 || lease.Readers[0].UserAgent != "test-elector-b" || lease.Followers() != 1 {
		t.Errorf("Lease readers: %+v (followers %d), want test-elector-b alone", lease.Readers, lease.Followers())
	}
	if d := lease.RetryPeriod - leaseTimings.RetryPeriod; d < 0 || d > 200*time.Millisecond {
		t.Errorf("Lease: implied retry period %s, the electors ran with %s", lease.RetryPeriod, leaseTimings.RetryPeriod)
	}
	if lease.Behaviour() != election.LeaderGetsAndUpdates {
		t.Errorf("Lease: leader reads per write %v, client-go v0.28 gets before every update", lease.LeaderReadsPerWrite)
	}
	// The model's 2 leader + 1/1.6 follower requests per retry period,
	// with generous bounds (request latency stretches the cadence).
	model := election.CostOf(leaseTimings, 1, election.LeaderGetsAndUpdates).TotalRequestsPerHour() * elapsed.Hours()
	if got := float64(lease.Requests); got < 0.75*model || got > 1.1*model {
		t.Errorf("Lease: %v requests, the model says %.0f", got, model)
	}

	cm, ok := locks["configmaps/old-style-lock"]
	if !ok {
		t.Fatalf("the ConfigMap lock is not among the locks: %+v", r.Locks)
	}
	if cm.Evidence != audit.EvidenceCadence || !cm.Inferred || cm.Managed != "" {
		t.Errorf("ConfigMap lock: evidence %s, inferred %v, managed %q", cm.Evidence, cm.Inferred, cm.Managed)
	}
	holders = byUA(cm)
	near("ConfigMap lock, leader", holders["test-old-style-leader"].Requests, cnt.get("test-old-style-leader")) // its create included
	near("ConfigMap lock, follower", holders["test-old-style-follower"].Requests, cnt.get("test-old-style-follower"))
	if d := cm.RetryPeriod - configMapRetry; d < 0 || d > 200*time.Millisecond {
		t.Errorf("ConfigMap lock: implied retry period %s, the leader ran every %s", cm.RetryPeriod, configMapRetry)
	}
	if _, ok := locks["configmaps/autoscaler-config"]; ok {
		t.Error("a ConfigMap only read counted as a lock")
	}

	// The projection with Fleet's defaults: 1 leader and 1 follower.
	p := r.Project(map[settings.Component]election.Timings{settings.FleetAgent: election.FleetDefaults}, "test")
	var found bool
	for _, pl := range p.Locks {
		if pl.Namespace == ns && pl.Name == "fleet-agent" {
			found = true
			if want := election.CostOf(election.FleetDefaults, 1, election.LeaderGetsAndUpdates).TotalRequestsPerHour(); math.Abs(pl.ProjectedPerHour-want) > 1e-9 {
				t.Errorf("projection: %v/h, want %v/h", pl.ProjectedPerHour, want)
			}
		}
	}
	if !found {
		t.Errorf("the Lease is not among the projected locks: %+v", p.Locks)
	}

	t.Run("the same log gzipped, with bad lines, in two parts", func(t *testing.T) {
		raw, err := os.ReadFile(auditLog)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(raw, []byte("\n"))
		half := len(lines) / 2
		first := append(bytes.Join(lines[:half], nil), []byte("this is not JSON\n{\"kind\":\"Status\",\"apiVersion\":\"v1\"}\n")...)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(bytes.Join(lines[half:], nil))
		_ = zw.Close()

		b := audit.NewAnalyzer()
		if err := b.Read("part1", bytes.NewReader(first)); err != nil {
			t.Fatal(err)
		}
		if err := b.Read("part2.gz", bytes.NewReader(gz.Bytes())); err != nil {
			t.Fatal(err)
		}
		r2 := b.Report(10)
		if r2.BadLines != 2 || len(r2.BadLineSamples) != 2 || r2.BadLineSamples[0].Line != half+1 || r2.BadLineSamples[1].Line != half+2 {
			t.Errorf("bad lines: %d %+v, want lines %d and %d", r2.BadLines, r2.BadLineSamples, half+1, half+2)
		}
		// A request cut in two by the split (RequestReceived in one part,
		// ResponseComplete in the other) is still one request.
		if r2.Requests != r.Requests {
			t.Errorf("%d requests in two parts, %d in one", r2.Requests, r.Requests)
		}
		trunc := gz.Bytes()[:gz.Len()/2]
		err = audit.NewAnalyzer().Read("cut.gz", bytes.NewReader(trunc))
		if err == nil || !strings.Contains(err.Error(), "cut.gz") {
			t.Errorf("truncated gzip: err = %v, want an error naming the file", err)
		}
	})
}

func every(ctx context.Context, d time.Duration, f func()) {
	for ctx.Err() == nil {
		f()
		sleep(ctx, d)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
