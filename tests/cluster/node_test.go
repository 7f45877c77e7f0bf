//go:build cluster

package cluster

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"leasetune.io/leasetune/hack/cluster/rollout"
)

// The node make cluster brings up (hack/cluster): where its kubeconfig is,
// and the binaries the tests run as a user would.
var (
	stateDir = envOr("LEASETUNE_CLUSTER_STATE", "/var/lib/leasetune-cluster")
	kubectl  = os.Getenv("KUBECTL")
	helm     = os.Getenv("HELM")
	repo     = envOr("LEASETUNE_REPO", "../..")

	cfg *rest.Config
	cs  kubernetes.Interface
	dyn dynamic.Interface
)

const (
	ns          = "leasetune-system"
	fleetNS     = "cattle-fleet-system"
	nodeName    = "leasetune-node"
	selector    = "app.kubernetes.io/name=leasetune"
	leaseName   = "leasetune"
	releaseName = "leasetune"
)

var settingsGVR = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "settings"}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestMain(m *testing.M) {
	kubeconfig := filepath.Join(stateDir, "admin.kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		fmt.Fprintf(os.Stderr, "tests/cluster: no node: %v; make cluster brings it up (docs/cluster.md)\n", err)
		os.Exit(1)
	}
	// The host's way to the node (hack/cluster node.go): without it the
	// kubeconfig's address would go out by the host's default route.
	if _, err := os.Stat("/sys/class/net/lt-host"); err != nil {
		fmt.Fprintf(os.Stderr, "tests/cluster: %s is there but the node's network is not (no interface lt-host): make cluster-down, then make cluster\n", kubeconfig)
		os.Exit(1)
	}
	if kubectl == "" || helm == "" {
		fmt.Fprintln(os.Stderr, "tests/cluster: KUBECTL and HELM must name the binaries (make test-cluster sets them)")
		os.Exit(1)
	}
	var err error
	if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cs = kubernetes.NewForConfigOrDie(cfg)
	dyn = dynamic.NewForConfigOrDie(cfg)
	if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil { // for kubectl and helm
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// ---- helpers ------------------------------------------------------------

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return c
}

func eventually(t *testing.T, what string, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, d, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func command(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

func mustCommand(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := command(t, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

// readyPods are leasetune's pods that are Running and Ready, not deleted.
func readyPods(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// settled waits until leasetune's Deployment is rolled out with both
// replicas Ready and one of them holding the Lease.
func settled(t *testing.T) (leader corev1.Pod, standby corev1.Pod) {
	t.Helper()
	eventually(t, "leasetune rolled out, 2 pods Ready, one leading", 3*time.Minute, func() error {
		if err := rolledOut(t, ns, "leasetune"); err != nil {
			return err
		}
		pods := readyPods(t)
		if len(pods) != 2 {
			return fmt.Errorf("%d pods Ready", len(pods))
		}
		holder := holder(t)
		switch {
		case strings.HasPrefix(holder, pods[0].Name+"_"):
			leader, standby = pods[0], pods[1]
		case strings.HasPrefix(holder, pods[1].Name+"_"):
			leader, standby = pods[1], pods[0]
		default:
			return fmt.Errorf("Lease holder %q is neither pod (%s, %s)", holder, pods[0].Name, pods[1].Name)
		}
		return nil
	})
	return leader, standby
}

func lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(t *testing.T) string {
	t.Helper()
	if h := lease(t).Spec.HolderIdentity; h != nil {
		return *h
	}
	return ""
}

func rolledOut(t *testing.T, namespace, name string) error {
	d, err := cs.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return rollout.Done(d)
}

func deployment(t *testing.T, namespace, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// podStarts counts the pods created in namespace while it runs, by the
// name of the Deployment that owns them (its ReplicaSet's name less the
// hash): the rollouts the tests count.
type podStarts struct {
	mu    sync.Mutex
	byDep map[string]int
	stop  func()
	done  chan struct{}
}

func watchPodStarts(t *testing.T, namespace string) *podStarts {
	t.Helper()
	l, err := cs.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(namespace).Watch(context.Background(), metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	ps := &podStarts{byDep: map[string]int{}, stop: w.Stop, done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			ps.mu.Lock()
			ps.byDep[owningDeployment(p)]++
			ps.mu.Unlock()
		}
	}()
	t.Cleanup(ps.stop)
	return ps
}

func (ps *podStarts) counts() map[string]int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := map[string]int{}
	for k, v := range ps.byDep {
		out[k] = v
	}
	return out
}

func owningDeployment(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" {
			if i := strings.LastIndex(o.Name, "-"); i > 0 {
				return o.Name[:i]
			}
		}
	}
	return p.Name
}

// nodeProcess finds the process of a pod's container on this machine (the
// node): the one whose cgroup names the pod's UID and whose command line
// starts with exe.
func nodeProcess(t *testing.T, pod corev1.Pod, exe string) int {
	t.Helper()
	uid := string(pod.UID)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !(strings.Contains(string(cg), uid) || strings.Contains(string(cg), strings.ReplaceAll(uid, "-", "_"))) {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasPrefix(string(cmd), exe+"\x00") {
			return pid
		}
	}
	t.Fatalf("no process %s of pod %s (uid %s) on this machine", exe, pod.Name, uid)
	return 0
}

// procStatus reads the fields of /proc/<pid>/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

// patchSetting writes a Setting's value as a user would (merge patch).
func patchSetting(name, value string) error {
	body := fmt.Sprintf(`{"value":%q}`, value)
	_, err := dyn.Resource(settingsGVR).Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// settingValue is a Setting's value ("" when it holds none).
func settingValue(t *testing.T, name string) string {
	t.Helper()
	u, err := dyn.Resource(settingsGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(u.Object, "value")
	return v
}

// envValue is the value of env name in container c of d ("" when absent).
func envValue(d *appsv1.Deployment, container, name string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// archiveImageID is the image ID (config digest) of the image make image
// wrote, from the archive's manifest.json.
func archiveImageID(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "bin/leasetune-image.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("bin/leasetune-image.tar: no manifest.json: %v", err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ Config string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) != 1 {
			t.Fatalf("bin/leasetune-image.tar manifest.json: %v (%d images)", err, len(m))
		}
		return "sha256:" + strings.TrimPrefix(m[0].Config, "sha256:")
	}
}
