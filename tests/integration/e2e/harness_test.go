package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

var (
	fleetGVR = fleet.ClusterGVR
)

// env is one test's namespaces.
type env struct{ ns, fleetNS, rancherNS string }

func newEnv(t *testing.T) env {
	cp.ResetSettings(t)
	return env{ns: cp.Namespace(t), fleetNS: cp.Namespace(t), rancherNS: cp.Namespace(t)}
}

// proc is a running leasetune controller process.
type proc struct {
	identity string
	cmd      *exec.Cmd
	out      *kit.SyncBuffer
	health   string
	metrics  string
	exited   chan struct{}
	exitCode int
}

// freeAddrs returns n distinct free loopback addresses (held open together
// while chosen, so they differ).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

// start runs `leasetune controller` for env e with its own lock timings of
// 4s/2s/1s (fast failover for the test), and the extra flags given (e.g.
// "--settle", "3s"). A free port can be taken by another process between
// choosing and binding it: then it starts again with other ports.
func start(t *testing.T, e env, identity string, extra ...string) *proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := launch(t, e, identity, extra...)
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			select {
			case <-p.exited:
				return false, fmt.Errorf("%s exited with %d", identity, p.exitCode)
			default:
			}
			return p.get("/readyz", p.health) == "ok", nil
		})
		if err == nil {
			return p
		}
		if attempt < 3 && strings.Contains(p.out.String(), "address already in use") {
			continue
		}
		t.Fatalf("%s ready: %v", identity, err)
	}
}

func launch(t *testing.T, e env, identity string, extra ...string) *proc {
	t.Helper()
	addrs := freeAddrs(t, 3)
	p := &proc{identity: identity, out: &kit.SyncBuffer{}, health: addrs[0], metrics: addrs[1], exited: make(chan struct{})}
	args := append([]string{"controller", "--kubeconfig", kubeconfig, "--namespace", e.ns,
		"--fleet-namespace", e.fleetNS, "--rancher-namespace", e.rancherNS, "--identity", identity,
		"--health-addr", p.health, "--metrics-addr", p.metrics, "--webhook-addr", addrs[2], "--log-format", "text"}, extra...)
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), "CATTLE_ELECTION_LEASE_DURATION=4s", "CATTLE_ELECTION_RENEW_DEADLINE=2s", "CATTLE_ELECTION_RETRY_PERIOD=1s")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- %s output ---\n%s", identity, p.out.String())
		}
	})
	return p
}

func (p *proc) get(path, addr string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// term sends SIGTERM and returns the exit code.
func (p *proc) term(t *testing.T) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // the Go runtime prints every goroutine's stack
		<-p.exited
		t.Fatalf("%s did not stop within 30s of SIGTERM", p.identity)
	}
	return p.exitCode
}

// holder returns the identity holding the project's Lease.
func holder(t *testing.T, e env) string {
	l, err := cp.Client.CoordinationV1().Leases(e.ns).Get(context.Background(), "leasetune", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func dyn(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	d := dynamic.NewForConfigOrDie(cp.Config)
	if ns == "" {
		return d.Resource(gvr)
	}
	return d.Resource(gvr).Namespace(ns)
}

// setSetting sets a Setting's value once the Setting exists (the
// controller creates the nine when it starts leading).
func setSetting(t *testing.T, name, value string) {
	t.Helper()
	framework.Eventually(t, "setting "+name+" exists", func() bool {
		_, err := dyn(framework.SettingsGVR, "").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	})
	body, _ := json.Marshal(map[string]string{"value": value})
	if _, err := dyn(framework.SettingsGVR, "").Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The Fleet fixtures the tests install. On v0.14 (channel agentmanagement)
// Fleet's agent manifest renders CATTLE_ELECTION_* itself: the global agent
// triple goes to FLEET_AGENT_ELECTION_* on fleet-agentmanagement and nothing
// is written to clusters (an override is reported, entries an earlier
// leasetune wrote are removed). On v0.9.9 (its fleet-controller image has no
// release tag and the chart sets no election env: detected as
// cluster-env-v0.9) the agents read CATTLE_ELECTION_* from each cluster's
// spec.agentEnvVars, which leasetune writes.
const (
	fleetV014 = "v0.14.10"
	fleetV09  = "v0.9.9"
)

// installFleet creates the Deployments of a Fleet fixture version in
// e.fleetNS as Helm would and returns their names.
func installFleet(t *testing.T, e env, version string) []string {
	t.Helper()
	var names []string
	for name := range cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, version)) {
		names = append(names, name)
	}
	return names
}

// addCluster creates a standalone fleet Cluster with the given annotations
// and spec.agentEnvVars HTTPS_PROXY=http://proxy:3128 followed by extra,
// deleted when the test ends.
func addCluster(t *testing.T, ns, name string, ann map[string]string, extra ...corev1.EnvVar) {
	t.Helper()
	cp.Create(t, fleetGVR, kit.FleetCluster(ns, name, kit.WithAnnotations(ann),
		kit.WithEnv(append(kit.Env("HTTPS_PROXY=http://proxy:3128"), extra...)...)))
}

// earlierEntries returns the CATTLE_ELECTION_* entries of a triple and the
// record annotation an earlier leasetune left beside them when it wrote
// them (agentenv.RecordAnnotation: env name → value).
func earlierEntries(l, r, p string) (entries []corev1.EnvVar, record map[string]string) {
	rec := map[string]string{}
	entries = election.CattlePrefix.Env(kit.Timings(l, r, p))
	for _, e := range entries {
		rec[e.Name] = e.Value
	}
	b, _ := json.Marshal(rec)
	return entries, map[string]string{agentenv.RecordAnnotation: string(b)}
}

// clusterEnv returns a fleet Cluster's spec.agentEnvVars as
// "NAME=value,...".
func clusterEnv(t *testing.T, ns, name string) string {
	t.Helper()
	u, err := dyn(fleetGVR, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return objEnv(u)
}

// objEnv returns an object's spec.agentEnvVars as "NAME=value,...".
func objEnv(u *unstructured.Unstructured) string {
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	var out []string
	for _, it := range l {
		m := it.(map[string]interface{})
		out = append(out, fmt.Sprintf("%s=%v", m["name"], m["value"]))
	}
	return strings.Join(out, ",")
}

// controllerTriple reads CATTLE_ELECTION_* of a Deployment's first container.
func controllerTriple(t *testing.T, e env, name string) election.Timings {
	t.Helper()
	d, err := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tm, _, _ := election.CattlePrefix.FromEnv(d.Spec.Template.Spec.Containers[0].Env)
	return tm
}

// agentTriple reads FLEET_AGENT_ELECTION_* of the fleet-agentmanagement
// container (Fleet v0.13+).
func agentTriple(t *testing.T, e env) election.Timings {
	t.Helper()
	d, err := cp.Client.AppsV1().Deployments(e.fleetNS).Get(context.Background(), "fleet-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "fleet-agentmanagement" {
			tm, _, _ := election.FleetAgentPrefix.FromEnv(c.Env)
			return tm
		}
	}
	t.Fatal("no fleet-agentmanagement container")
	return election.Timings{}
}

// annotations returns an object's annotations (nil when it is gone).
func annotations(t *testing.T, gvr schema.GroupVersionResource, ns, name string) map[string]string {
	t.Helper()
	u, err := dyn(gvr, ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()
}

// versions snapshots the resourceVersions of everything the project may write.
func versions(t *testing.T, e env) string {
	t.Helper()
	var out []string
	ds, _ := cp.Client.AppsV1().Deployments(e.fleetNS).List(context.Background(), metav1.ListOptions{})
	for _, d := range ds.Items {
		out = append(out, d.Name+"="+d.ResourceVersion)
	}
	for _, gvr := range []schema.GroupVersionResource{fleetGVR, framework.SettingsGVR} {
		l, _ := dyn(gvr, "").List(context.Background(), metav1.ListOptions{})
		for _, u := range l.Items {
			out = append(out, u.GetName()+"="+u.GetResourceVersion())
		}
	}
	cms, _ := cp.Client.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{})
	for _, c := range cms.Items {
		out = append(out, c.Name+"="+c.ResourceVersion)
	}
	return strings.Join(out, " ")
}
