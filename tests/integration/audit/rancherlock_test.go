package audit_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/rancher/wrangler/v2/pkg/leader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"leasetune.io/leasetune/pkg/audit"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
)

// lockHolderEnv, when set, makes the test binary run as the Rancher
// server's lock holder (TestRancherLockHolder) with the kubeconfig it
// names.
const lockHolderEnv = "LEASETUNE_TEST_CATTLE_CONTROLLERS_KUBECONFIG"

// TestRancherLockHolder is not a test: run as a child process (by
// runRancherLock), it takes the lock as the Rancher server does
// (rancher/rancher pkg/wrangler/context.go: leader.NewManager("",
// "cattle-controllers", k8s), whose Start calls wrangler's
// leader.RunOrDie with namespace "" → kube-system), with wrangler v2's
// pkg/leader, which reads CATTLE_ELECTION_* from the process env, until
// SIGTERM. A child process, because RunOrDie exits the process when the
// lock is released, and reads the env of the process, as a pod's
// container does.
func TestRancherLockHolder(t *testing.T) {
	kc := os.Getenv(lockHolderEnv)
	if kc == "" {
		t.Skip("run by TestRancherLockBeforeAfter as a child process")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent = "rancher/v2.11.3 (linux/amd64) test"
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	leader.RunOrDie(ctx, "", "cattle-controllers", kubernetes.NewForConfigOrDie(cfg), func(ctx context.Context) { <-ctx.Done() })
}

// runRancherLock runs the lock holder for d with env, then stops it.
func runRancherLock(t *testing.T, kc string, env []corev1.EnvVar, d time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRancherLockHolder$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+kc)
	for _, e := range env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lock holder: %v\n%s", err, out.String())
	}
}

// logSize is the audit log's size now (blocking audit mode: every request
// answered is in it).
func logSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// window analyzes the part of the audit log between two offsets.
func window(t *testing.T, from, to int64) *audit.Report {
	t.Helper()
	raw, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	a := audit.NewAnalyzer()
	if err := a.Read("window", bytes.NewReader(raw[from:to])); err != nil {
		t.Fatal(err)
	}
	return a.Report(10)
}

func cattleControllers(t *testing.T, r *audit.Report) audit.Lock {
	t.Helper()
	for _, l := range r.Locks {
		if l.Resource == "leases" && l.Namespace == "kube-system" && l.Name == audit.RancherLockName {
			return l
		}
	}
	t.Fatalf("no Lease kube-system/cattle-controllers among the locks: %+v", r.Locks)
	return audit.Lock{}
}

// TestRancherLockBeforeAfter: the Rancher server's lock, held by wrangler
// v2's pkg/leader as Rancher holds it, first with the env Rancher's chart
// renders (no CATTLE_ELECTION_*: 45s/30s/2s) and then with the entries
// rancherenv writes for 15s/10s/5s: the
// audit log of the real apiserver shows the lock managed by the rancher
// settings, its requests per hour before and after, and `audit`'s
// projection from the first window matches what the second measured.
func TestRancherLockBeforeAfter(t *testing.T) {
	dir := t.TempDir()
	kc, err := cp.Kubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}

	// Before: the container env as the chart renders it.
	start := logSize(t)
	runRancherLock(t, kc, nil, 20*time.Second)
	time.Sleep(time.Second)
	mid := logSize(t)
	before := cattleControllers(t, window(t, start, mid))

	// After: the entries rancherenv computes for the opted-in triple, on a
	// Deployment as the chart renders it.
	tuned := election.Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 5 * time.Second}
	one := int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-system", Name: "rancher"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "rancher", Image: "rancher/rancher:v2.11.3"}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}}
	dec := rancherenv.Decide(d, rancherenv.Input{Triple: tuned, OK: true})
	if !dec.Write || len(dec.Env) != 3 {
		t.Fatalf("decision %+v", dec)
	}
	runRancherLock(t, kc, dec.Env, 40*time.Second)
	time.Sleep(time.Second)
	after := cattleControllers(t, window(t, mid, logSize(t)))

	t.Logf("before: %d requests, %.0f/h, retry %s; after: %d requests, %.0f/h, retry %s",
		before.Requests, before.PerHour, before.RetryPeriod, after.Requests, after.PerHour, after.RetryPeriod)
	if before.Managed != settings.Rancher || after.Managed != settings.Rancher {
		t.Errorf("managed by %q and %q, want rancher", before.Managed, after.Managed)
	}
	if d := before.RetryPeriod - 2*time.Second; d < 0 || d > 300*time.Millisecond {
		t.Errorf("before: implied retry period %s, wrangler's default is 2s", before.RetryPeriod)
	}
	if d := after.RetryPeriod - 5*time.Second; d < 0 || d > 500*time.Millisecond {
		t.Errorf("after: implied retry period %s, want 5s", after.RetryPeriod)
	}
	// One replica, client-go v0.28 (a get and an update per renewal):
	// 3600/h at 2s, 1440/h at 5s. Each window holds the lock's whole life,
	// whose acquisition (a get and a create or update) and release (an
	// update) add three requests to 20-40 s of renewals: up to 40% more
	// than the steady rate, which is what an hour-long log shows.
	if before.PerHour < 0.8*3600 || before.PerHour > 1.4*3600 {
		t.Errorf("before: %.0f requests/h, the model says 3600", before.PerHour)
	}
	if after.PerHour < 0.8*1440 || after.PerHour > 1.4*1440 {
		t.Errorf("after: %.0f requests/h, the model says 1440", after.PerHour)
	}
	// audit's projection from the first window, with the tuned triple.
	r := window(t, start, mid)
	p := r.Project(map[settings.Component]election.Timings{settings.Rancher: tuned}, "test")
	var projected float64
	for _, pl := range p.Locks {
		if pl.Name == audit.RancherLockName && pl.Namespace == "kube-system" {
			projected = pl.ProjectedPerHour
		}
	}
	if projected != election.CostOf(tuned, 0, election.LeaderGetsAndUpdates).TotalRequestsPerHour() {
		t.Errorf("projected %.0f/h for cattle-controllers, want the model's 1440", projected)
	}
}
