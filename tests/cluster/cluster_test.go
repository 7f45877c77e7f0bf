//go:build cluster

// Package cluster is `make test-cluster`: leasetune as users run it, its
// image in real pods on the node `make cluster` brings up (hack/cluster,
// docs/cluster.md), installed by its chart. The tests run in this order
// and each leaves the node as it found it; the last uninstalls the chart
// and installs it again.
package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// timings are leasetune's own, from its Deployment's CATTLE_ELECTION_*
// (the chart's leaderElection values).
func timings(t *testing.T) (leaseDuration, retryPeriod time.Duration) {
	t.Helper()
	d := deployment(t, ns, "leasetune")
	parse := func(name string) time.Duration {
		v, err := time.ParseDuration(envValue(d, "leasetune", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	return parse("CATTLE_ELECTION_LEASE_DURATION"), parse("CATTLE_ELECTION_RETRY_PERIOD")
}

// jitter is client-go's leaderelection.JitterFactor: a candidate tries
// every retryPeriod to retryPeriod*(1+jitter).
const jitter = 1.2

func TestReplicasLeadAndStandBy(t *testing.T) {
	leader, standby := settled(t)
	t.Logf("leader %s, standing by %s (Lease holder %s)", leader.Name, standby.Name, holder(t))
	if leader.Spec.NodeName != nodeName || standby.Spec.NodeName != nodeName {
		t.Errorf("pods on %s and %s, want %s", leader.Spec.NodeName, standby.Spec.NodeName, nodeName)
	}
	for _, p := range []corev1.Pod{leader, standby} {
		if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("%s restarted %d times", p.Name, n)
		}
	}
}

// TestPodsAsTheChartPromises: the pods run the image of
// bin/leasetune-image.tar; it reads the leasetune processes on the node:
// uid and gid 65532, no capability, no privilege escalation, a read-only
// root, and a root filesystem that holds the binary alone (no shell).
func TestPodsAsTheChartPromises(t *testing.T) {
	leader, standby := settled(t)
	id := archiveImageID(t)
	for _, pod := range []corev1.Pod{leader, standby} {
		// The image make image built (its config's digest), not another.
		if got := pod.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(got, id) {
			t.Errorf("%s runs image %s, want bin/leasetune-image.tar's %s", pod.Name, got, id)
		}
		pid := nodeProcess(t, pod, "/usr/local/bin/leasetune")
		st := procStatus(t, pid)
		for k, want := range map[string]string{
			"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532",
			"NoNewPrivs": "1", "CapEff": "0000000000000000", "CapPrm": "0000000000000000",
		} {
			if st[k] != want {
				t.Errorf("%s (pid %d) %s: %q, want %q", pod.Name, pid, k, st[k], want)
			}
		}
		mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			t.Fatal(err)
		}
		rootRO := false
		for _, l := range strings.Split(string(mounts), "\n") {
			f := strings.Fields(l)
			if len(f) > 5 && f[4] == "/" {
				rootRO = slices.Contains(strings.Split(f[5], ","), "ro")
			}
		}
		if !rootRO {
			t.Errorf("%s: root filesystem not read-only", pod.Name)
		}
		root := fmt.Sprintf("/proc/%d/root", pid)
		for _, sh := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/env"} {
			if _, err := os.Lstat(filepath.Join(root, sh)); err == nil {
				t.Errorf("%s: the image has /%s", pod.Name, sh)
			}
		}
		bins, err := os.ReadDir(filepath.Join(root, "usr/local/bin"))
		if err != nil || len(bins) != 1 || bins[0].Name() != "leasetune" {
			t.Errorf("%s: /usr/local/bin holds %v (%v), want leasetune alone", pod.Name, bins, err)
		}
		// The root filesystem refuses a write even from root on the node's side of the mount namespace.
		if err := os.WriteFile(filepath.Join(root, "tmp-probe"), nil, 0o600); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s: a write to its root: %v, want read-only file system", pod.Name, err)
		}
	}
}

// TestPodSecurityRestricted: leasetune's namespace enforces Pod Security
// Admission's restricted level (make cluster labels it after helm install),
// and asking the apiserver again (a dry run of the label at a pinned
// version) finds no pod that would fail. The same dry run on Fleet's
// namespace, whose stand-in pods keep Fleet's security context, must warn:
// the check can fail.
func TestPodSecurityRestricted(t *testing.T) {
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx(t), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := nsObj.Labels["pod-security.kubernetes.io/enforce"]; l != "restricted" {
		t.Fatalf("namespace %s enforce label %q, want restricted", ns, l)
	}
	if w := psaWarnings(t, ns); len(w) != 0 {
		t.Errorf("restricted on %s: warnings %q, want none", ns, w)
	}
	if w := psaWarnings(t, fleetNS); len(w) == 0 {
		t.Errorf("restricted on %s (Fleet's stand-in pods): no warning; the check cannot fail", fleetNS)
	}
}

type warnings struct{ got []string }

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) { w.got = append(w.got, text) }

func psaWarnings(t *testing.T, namespace string) []string {
	t.Helper()
	w := &warnings{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = w
	client := kubernetes.NewForConfigOrDie(c)
	n, err := client.CoreV1().Namespaces().Get(ctx(t), namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	n.Labels["pod-security.kubernetes.io/enforce-version"] = "v1.36"
	if _, err := client.CoreV1().Namespaces().Update(ctx(t), n, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	return w.got
}

// TestFailover: the leader's pod deleted (SIGTERM: it releases the Lease,
// the other takes it within one retry of its own, retryPeriod to
// retryPeriod*(1+jitter)), then the leader's process killed outright and
// its pod force-deleted (nothing released: another candidate leads once
// the Lease expires, leaseDuration after it last saw a renewal, and its
// next retry). The times go to docs/cluster.md.
func TestFailover(t *testing.T) {
	leaseDuration, retryPeriod := timings(t)
	t.Run("SIGTERM", func(t *testing.T) {
		leader, standby := settled(t)
		old := holder(t)
		start := time.Now()
		if err := cs.CoreV1().Pods(ns).Delete(ctx(t), leader.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var released time.Duration
		var taker string
		eventually(t, "another candidate leads", 2*leaseDuration, func() error {
			h := holder(t)
			if released == 0 && h != old {
				released = time.Since(start)
			}
			if h == old || h == "" {
				return fmt.Errorf("holder %q", h)
			}
			taker = h
			return nil
		})
		taken := time.Since(start)
		// The ReplicaSet's replacement starts within seconds and tries at
		// once; the standby tries on its own schedule: either may win.
		who := "the replacement pod"
		if strings.HasPrefix(taker, standby.Name+"_") {
			who = "the standby"
		}
		if strings.HasPrefix(taker, leader.Name+"_") {
			t.Fatalf("the deleted pod %s leads again (%s)", leader.Name, taker)
		}
		t.Logf("pod deleted (SIGTERM): Lease released after %s, taken by %s (%s) after %s (retryPeriod %s)",
			released.Round(10*time.Millisecond), who, taker, taken.Round(10*time.Millisecond), retryPeriod)
		// From the release: one jittered retry of a candidate (and the
		// poll's 250ms); the release itself comes with SIGTERM's delivery.
		if max := time.Duration(float64(retryPeriod)*(1+jitter)) + time.Second; taken-released > max {
			t.Errorf("taken %s after the release, want within one retry (%s)", taken-released, max)
		}
		if released > 10*time.Second {
			t.Errorf("released %s after the delete, want at SIGTERM", released)
		}
	})
	t.Run("killed", func(t *testing.T) {
		leader, _ := settled(t)
		old := holder(t)
		pid := nodeProcess(t, leader, "/usr/local/bin/leasetune")
		start := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		lastRenew := lease(t).Spec.RenewTime.Time // nothing renews it after the kill
		zero := int64(0)
		if err := cs.CoreV1().Pods(ns).Delete(ctx(t), leader.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "another leads", 3*leaseDuration, func() error {
			if h := holder(t); h == old || h == "" {
				return fmt.Errorf("holder %q", h)
			}
			return nil
		})
		taken := time.Since(start)
		t.Logf("leader killed (SIGKILL, pod force-deleted): %s leads after %s (leaseDuration %s, retryPeriod %s)",
			holder(t), taken.Round(10*time.Millisecond), leaseDuration, retryPeriod)
		// The candidate counts leaseDuration from when it last saw the
		// record change (up to one retry after the leader's last renewal),
		// then takes it at its next retry.
		if max := leaseDuration + 2*time.Duration(float64(retryPeriod)*(1+jitter)) + 2*time.Second; taken > max {
			t.Errorf("taken after %s, want within %s", taken, max)
		}
		// No candidate may take it before leaseDuration has passed since
		// the last renewal it saw (a second for the Lease's microsecond
		// times and the poll).
		if acquired := lease(t).Spec.AcquireTime.Time; acquired.Sub(lastRenew) < leaseDuration-time.Second {
			t.Errorf("acquired %s after the last renewal, before the Lease could expire (%s): was it released?", acquired.Sub(lastRenew), leaseDuration)
		}
	})
	settled(t)
}

// TestWebhookAndDisruptionBudget: the webhook, reached through its
// Service, refuses a bad Setting with the rule's message; kubectl drain is
// held by the PodDisruptionBudget after one pod; with that pod gone the
// webhook still answers.
func TestWebhookAndDisruptionBudget(t *testing.T) {
	settled(t)
	const rule = "leaseDuration 30s must exceed renewDeadline 40s"
	refused := func(when string) {
		t.Helper()
		err := patchSetting("fleet-leader-election-renew-deadline", "40s")
		if err == nil || !strings.Contains(err.Error(), rule) || !strings.Contains(err.Error(), "fleet-leader-election-renew-deadline") {
			t.Errorf("%s: renew-deadline 40s: %v; want a denial naming the setting and %q", when, err, rule)
		}
	}
	refused("both replicas up")
	t.Cleanup(func() { _, _ = command(t, kubectl, "uncordon", nodeName) })
	out, err := command(t, kubectl, "drain", nodeName, "--pod-selector", selector, "--timeout", "40s")
	if err == nil {
		t.Fatalf("kubectl drain ended without error: the PodDisruptionBudget held nothing:\n%s", out)
	}
	if !strings.Contains(out, "disruption budget") {
		t.Errorf("kubectl drain: %v\n%s\nwant the PodDisruptionBudget's refusal", err, out)
	}
	if n := len(readyPods(t)); n != 1 {
		t.Errorf("after the drain: %d leasetune pods Ready, want 1 (minAvailable)", n)
	}
	refused("one replica evicted, the node cordoned")
	mustCommand(t, kubectl, "uncordon", nodeName)
	settled(t)
}

// TestSettingChangeRollsFleetOnce: a change of the fleet-leader-election
// Settings rolls each of Fleet's Deployments exactly once: one new pod
// each, its CATTLE_ELECTION_* the new value; nothing else restarts.
func TestSettingChangeRollsFleetOnce(t *testing.T) {
	settled(t)
	deps := []string{"fleet-controller", "gitjob", "helmops"}
	for _, d := range deps {
		if err := rolledOut(t, fleetNS, d); err != nil {
			t.Fatal(err)
		}
	}
	change := func(value string) {
		t.Helper()
		fleetStarts := watchPodStarts(t, fleetNS)
		ownStarts := watchPodStarts(t, ns)
		gens := map[string]int64{}
		for _, d := range deps {
			gens[d] = deployment(t, fleetNS, d).Generation
		}
		if err := patchSetting("fleet-leader-election-retry-period", value); err != nil {
			t.Fatal(err)
		}
		for _, name := range deps {
			eventually(t, name+" rolled out with CATTLE_ELECTION_RETRY_PERIOD="+value, 2*time.Minute, func() error {
				d := deployment(t, fleetNS, name)
				want := value
				if want == "" {
					want = "10s" // the empty value: the Setting's default, the chart's 10s
				}
				if got := envValue(d, d.Spec.Template.Spec.Containers[0].Name, "CATTLE_ELECTION_RETRY_PERIOD"); got != want {
					return fmt.Errorf("CATTLE_ELECTION_RETRY_PERIOD %q", got)
				}
				return rolledOut(t, fleetNS, name)
			})
		}
		time.Sleep(15 * time.Second) // a further rollout would start within this
		for _, name := range deps {
			if g := deployment(t, fleetNS, name).Generation; g != gens[name]+1 {
				t.Errorf("%s: generation %d → %d, want one rollout", name, gens[name], g)
			}
		}
		got := fleetStarts.counts()
		want := map[string]int{"fleet-controller": 1, "gitjob": 1, "helmops": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pods started in %s: %v, want %v (one per Deployment)", fleetNS, got, want)
		}
		if own := ownStarts.counts(); len(own) != 0 {
			t.Errorf("leasetune's own pods started: %v, want none", own)
		}
		t.Logf("fleet-leader-election-retry-period=%s: pods started %v", value, got)
	}
	// From whatever the Setting holds (a user may have changed it by
	// hand), to another value, and back.
	orig := settingValue(t, "fleet-leader-election-retry-period")
	other := "5s"
	if orig == other {
		other = "6s"
	}
	change(other)
	change(orig)
}

var fleetClusterGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusters"}
var statusGVR = schema.GroupVersionResource{Group: "leasetune.io", Version: "v1alpha1", Resource: "electionstatuses"}

// TestMemoryUnderTheLimit: each pod's working set at rest, and its peak
// (its memory cgroup's high-water mark) through a change with 1,000 Fleet
// clusters, stay under half the chart's limit; no restart, no OOM kill.
func TestMemoryUnderTheLimit(t *testing.T) {
	leader, standby := settled(t)
	d := deployment(t, ns, "leasetune")
	limit := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().Value()
	if limit == 0 {
		t.Fatal("the chart sets no memory limit")
	}
	for _, p := range []corev1.Pod{leader, standby} {
		ws := workingSet(t, p)
		t.Logf("%s at rest: working set %.1f MiB of %.0f MiB", p.Name, mib(ws), mib(limit))
		if ws >= limit/2 {
			t.Errorf("%s at rest: working set %.1f MiB, want under half the limit (%.0f MiB)", p.Name, mib(ws), mib(limit))
		}
	}
	const n = 1000
	clusters := dyn.Resource(fleetClusterGVR).Namespace("fleet-default")
	agentRetry := settingValue(t, "fleet-agent-leader-election-retry-period")
	changed := "5s"
	if agentRetry == changed {
		changed = "6s"
	}
	t.Cleanup(func() {
		_ = clusters.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		gen := deployment(t, fleetNS, "fleet-controller").Generation
		if err := patchSetting("fleet-agent-leader-election-retry-period", agentRetry); err != nil {
			t.Error(err)
			return
		}
		// The next test counts rollouts: this one must be over first.
		eventually(t, "fleet-controller rolled back to the agents' "+agentRetry, 2*time.Minute, func() error {
			if g := deployment(t, fleetNS, "fleet-controller").Generation; g == gen {
				return fmt.Errorf("generation %d unchanged", g)
			}
			return rolledOut(t, fleetNS, "fleet-controller")
		})
	})
	start := time.Now()
	for i := range n {
		c := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": fmt.Sprintf("c-%04d", i), "labels": map[string]interface{}{"env": "bench"}},
			"spec":     map[string]interface{}{"kubeConfigSecret": fmt.Sprintf("c-%04d-kubeconfig", i)},
		}}
		if _, err := clusters.Create(ctx(t), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d Fleet clusters created in %s", n, time.Since(start).Round(time.Second))
	fc := deployment(t, fleetNS, "fleet-controller")
	if err := patchSetting("fleet-agent-leader-election-retry-period", changed); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ElectionStatus counts the clusters and fleet-controller has rolled", 3*time.Minute, func() error {
		st, err := dyn.Resource(statusGVR).Get(context.Background(), "leasetune", metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, _, _ := unstructured.NestedInt64(st.Object, "status", "agents", "clusters")
		if got < n {
			return fmt.Errorf("status.agents.clusters %d", got)
		}
		if g := deployment(t, fleetNS, "fleet-controller").Generation; g == fc.Generation {
			return fmt.Errorf("fleet-controller generation %d unchanged", g)
		}
		return rolledOut(t, fleetNS, "fleet-controller")
	})
	leader, standby = settled(t)
	for _, p := range []corev1.Pod{leader, standby} {
		peak := peakMemory(t, p)
		ws := workingSet(t, p)
		t.Logf("%s after the change with %d clusters: working set %.1f MiB, cgroup peak %.1f MiB, limit %.0f MiB", p.Name, n, mib(ws), mib(peak), mib(limit))
		// cgroup v1 caps the high-water mark at the limit: ask for half, so
		// the check shows headroom rather than only that no OOM happened.
		if peak >= limit/2 {
			t.Errorf("%s: peak %.1f MiB, want under half the limit (%.0f MiB)", p.Name, mib(peak), mib(limit))
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount != 0 || (s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.Reason == "OOMKilled") {
				t.Errorf("%s: %d restarts, last state %+v", p.Name, s.RestartCount, s.LastTerminationState)
			}
		}
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// workingSet is the pod's container's working set, from the kubelet's
// stats summary (what the kubelet evicts and kubectl top reports by).
func workingSet(t *testing.T, p corev1.Pod) int64 {
	t.Helper()
	var summary struct {
		Pods []struct {
			PodRef     struct{ Name, Namespace string }
			Containers []struct {
				Name   string
				Memory struct {
					WorkingSetBytes int64 `json:"workingSetBytes"`
				}
			}
		}
	}
	var last error
	for range 20 {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy/stats/summary").DoRaw(context.Background())
		if err == nil {
			if err = jsonUnmarshal(raw, &summary); err == nil {
				for _, sp := range summary.Pods {
					if sp.PodRef.Name == p.Name {
						for _, c := range sp.Containers {
							if c.Name == "leasetune" && c.Memory.WorkingSetBytes > 0 {
								return c.Memory.WorkingSetBytes
							}
						}
					}
				}
				err = fmt.Errorf("no stats for %s yet", p.Name)
			}
		}
		last = err
		time.Sleep(time.Second)
	}
	t.Fatalf("stats summary: %v", last)
	return 0
}

// peakMemory is the high-water mark of the pod's container's memory cgroup
// (cgroup v1 memory.max_usage_in_bytes, v2 memory.peak) since it started.
func peakMemory(t *testing.T, p corev1.Pod) int64 {
	t.Helper()
	pid := nodeProcess(t, p, "/usr/local/bin/leasetune")
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.max_usage_in_bytes")
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.peak")
		default:
			continue
		}
		if b, err := os.ReadFile(file); err == nil {
			var v int64
			if _, err := fmt.Sscan(string(b), &v); err == nil && v > 0 {
				return v
			}
		}
	}
	t.Fatalf("no memory high-water mark for pid %d (cgroup %s)", pid, cg)
	return 0
}

// TestHelmUpgrade: helm upgrade with the same values restarts nothing;
// with a changed value it rolls leasetune once (two new pods, one per
// replica) and nothing of Fleet's.
func TestHelmUpgrade(t *testing.T) {
	leader, standby := settled(t)
	chart := filepath.Join(repo, "charts/leasetune")
	upgrade := func(set ...string) {
		t.Helper()
		args := append([]string{"upgrade", releaseName, chart, "--namespace", ns, "--reuse-values", "--wait", "--timeout", "5m"}, set...)
		mustCommand(t, helm, args...)
	}
	gen := deployment(t, ns, "leasetune").Generation
	own, fleet := watchPodStarts(t, ns), watchPodStarts(t, fleetNS)
	upgrade()
	time.Sleep(10 * time.Second)
	if g := deployment(t, ns, "leasetune").Generation; g != gen {
		t.Errorf("same values: generation %d → %d", gen, g)
	}
	if c := own.counts(); len(c) != 0 {
		t.Errorf("same values: leasetune pods started %v, want none", c)
	}
	if l, s := settled(t); l.UID != leader.UID || s.UID != standby.UID {
		t.Errorf("same values: pods replaced (%s %s → %s %s)", leader.Name, standby.Name, l.Name, s.Name)
	}
	upgrade("--set", "logLevel=debug")
	settled(t)
	time.Sleep(10 * time.Second)
	if g := deployment(t, ns, "leasetune").Generation; g != gen+1 {
		t.Errorf("logLevel=debug: generation %d → %d, want one rollout", gen, g)
	}
	if c := own.counts(); c["leasetune"] != 2 || len(c) != 1 {
		t.Errorf("logLevel=debug: leasetune pods started %v, want 2 (one rollout of 2 replicas)", c)
	}
	if c := fleet.counts(); len(c) != 0 {
		t.Errorf("helm upgrades of leasetune started Fleet pods: %v", c)
	}
	upgrade("--set", "logLevel=info")
	settled(t)
}

// TestHelmUninstallLeavesWhatIsDocumented runs last: helm uninstall
// removes the chart's objects and leaves what docs/install.md's Uninstalling
// paragraph lists (the values propagated to Fleet, the Settings and their
// CRD, the ElectionStatus CRD, and what `leasetune cleanup` removes: the
// state ConfigMap, the webhook Secret, the Lease, the ElectionStatus
// leasetune); then installs the chart again as make cluster did.
func TestHelmUninstallLeavesWhatIsDocumented(t *testing.T) {
	settled(t)
	before := deployment(t, fleetNS, "fleet-controller")
	mustCommand(t, helm, "uninstall", releaseName, "--namespace", ns, "--wait", "--timeout", "3m")
	t.Cleanup(func() {
		mustCommand(t, helm, "install", releaseName, filepath.Join(repo, "charts/leasetune"), "--namespace", ns,
			"--create-namespace", "--set", "image.repository=leasetune", "--wait", "--timeout", "5m")
		settled(t)
	})
	eventually(t, "leasetune's pods gone", 2*time.Minute, func() error {
		l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return fmt.Errorf("%d pods", len(l.Items))
		}
		return nil
	})
	c := context.Background()
	gone := map[string]error{}
	_, gone["Deployment leasetune"] = cs.AppsV1().Deployments(ns).Get(c, "leasetune", metav1.GetOptions{})
	_, gone["Service leasetune-webhook"] = cs.CoreV1().Services(ns).Get(c, "leasetune-webhook", metav1.GetOptions{})
	_, gone["ServiceAccount leasetune"] = cs.CoreV1().ServiceAccounts(ns).Get(c, "leasetune", metav1.GetOptions{})
	_, gone["PodDisruptionBudget leasetune"] = cs.PolicyV1().PodDisruptionBudgets(ns).Get(c, "leasetune", metav1.GetOptions{})
	_, gone["ValidatingWebhookConfiguration leasetune"] = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(c, "leasetune", metav1.GetOptions{})
	_, gone["ClusterRole leasetune"] = cs.RbacV1().ClusterRoles().Get(c, "leasetune", metav1.GetOptions{})
	for what, err := range gone {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after helm uninstall: %v, want not found", what, err)
		}
	}
	left := map[string]error{}
	_, left["ConfigMap leasetune-state"] = cs.CoreV1().ConfigMaps(ns).Get(c, "leasetune-state", metav1.GetOptions{})
	_, left["Secret leasetune-webhook-tls"] = cs.CoreV1().Secrets(ns).Get(c, "leasetune-webhook-tls", metav1.GetOptions{})
	_, left["Lease leasetune"] = cs.CoordinationV1().Leases(ns).Get(c, leaseName, metav1.GetOptions{})
	_, left["ElectionStatus leasetune"] = dyn.Resource(statusGVR).Get(c, "leasetune", metav1.GetOptions{})
	_, left["Setting fleet-leader-election-retry-period"] = dyn.Resource(settingsGVR).Get(c, "fleet-leader-election-retry-period", metav1.GetOptions{})
	for what, err := range left {
		if err != nil {
			t.Errorf("%s after helm uninstall: %v, want it left (docs/install.md, Uninstalling)", what, err)
		}
	}
	after := deployment(t, fleetNS, "fleet-controller")
	for _, name := range []string{"CATTLE_ELECTION_LEASE_DURATION", "CATTLE_ELECTION_RENEW_DEADLINE", "CATTLE_ELECTION_RETRY_PERIOD"} {
		if a, b := envValue(after, "fleet-controller", name), envValue(before, "fleet-controller", name); a != b || a == "" {
			t.Errorf("fleet-controller %s: %q before, %q after helm uninstall; want the propagated value kept", name, b, a)
		}
	}
	if after.Generation != before.Generation {
		t.Errorf("helm uninstall rolled fleet-controller (generation %d → %d)", before.Generation, after.Generation)
	}
}
