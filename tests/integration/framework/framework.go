// Package framework starts a real kube-apiserver and etcd for the
// integration tests, with controller-runtime's envtest, and gives each test
// a namespace of its own.
//
// The binaries are built from their Go modules by scripts/controlplane.sh
// (tools/controlplane pins the versions). KUBEBUILDER_ASSETS names their
// folder; when it is unset, Start runs the script, which builds them once
// per machine and otherwise only prints the folder.
//
// One control plane serves a whole test package: call Start from TestMain.
package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"leasetune.io/leasetune/pkg/crds"
)

// DefaultStartTimeout is how long the control plane may take to start when
// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT is unset. envtest's own 20s is too
// short for a cold kube-apiserver on 2 cores.
const DefaultStartTimeout = 3 * time.Minute

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	env *envtest.Environment
	// Config is an admin (system:masters) client config for the API server.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Dynamic is a dynamic client built from Config.
	Dynamic dynamic.Interface
}

// CRD files the test packages install: RepoCRDs paths are relative to the
// repository, SharedCRDs to ../shared/fixtures.
const (
	SettingCRD      = crds.SettingPath
	ManagementCRD   = "hack/devenv/crds/clusters.management.cattle.io.yaml"
	FleetClusterCRD = "fleet/fleet-v0.14.10-clusters-crd.yaml"
	ProvisioningCRD = "rancher/provisioning.cattle.io_clusters-crd.yaml"
	// StatusCRD is leasetune's ElectionStatus CRD, as the chart installs it.
	StatusCRD = "charts/leasetune/crds/electionstatuses.leasetune.io.yaml"
)

// Options tunes Start.
type Options struct {
	// RepoCRDs and SharedCRDs are CRD files to install before Start
	// returns, relative to the repository and to ../shared/fixtures.
	RepoCRDs, SharedCRDs []string
	// AuditLog, when set, makes the kube-apiserver write an audit log
	// (level Metadata, every request) to this path.
	AuditLog string
	// APIServerArgs are more kube-apiserver flags (name without "--" →
	// value).
	APIServerArgs map[string]string
	// Assets, when set, is the folder of the kube-apiserver and etcd to
	// run instead of KUBEBUILDER_ASSETS's (see AssetsOf).
	Assets string
}

// Start builds (if needed) and starts a control plane. It returns an error
// when the binaries cannot be built or the control plane does not come up
// within the start timeout.
func Start(opts Options) (*ControlPlane, error) {
	assets := opts.Assets
	var err error
	if assets == "" {
		assets, err = assetsDir()
	}
	if err != nil {
		return nil, err
	}
	var crdPaths []string
	if len(opts.RepoCRDs) > 0 {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		for _, p := range opts.RepoCRDs {
			crdPaths = append(crdPaths, filepath.Join(root, p))
		}
	}
	for _, p := range opts.SharedCRDs {
		path, err := SharedFixture(p)
		if err != nil {
			return nil, err
		}
		crdPaths = append(crdPaths, path)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: DefaultStartTimeout,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if v := os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"); v != "" {
		// envtest reads it itself when the field is zero.
		env.ControlPlaneStartTimeout = 0
	}
	// Tests need no durability; fsync dominates etcd latency on slow disks.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "true")
	// Progress notifications every 5 s, as kubeadm runs etcd
	// (k8s.io/kubernetes v1.36.2 cmd/kubeadm/app/phases/etcd/local.go:
	// watch-progress-notify-interval 5s; etcd's default is 10m): they move
	// the watch cache of a resource nothing writes, so a watch with
	// sendInitialEvents gets its initial-events-end bookmark (steve's SQL
	// cache in Rancher v2.15 waits for it, 60 s at most).
	flag, err := progressNotifyFlag(filepath.Join(assets, "etcd"))
	if err != nil {
		return nil, err
	}
	env.ControlPlane.Etcd.Configure().Set(flag, "5s")
	if opts.AuditLog != "" || len(opts.APIServerArgs) > 0 {
		env.ControlPlane.APIServer = &envtest.APIServer{}
	}
	if opts.AuditLog != "" {
		policy := filepath.Join(filepath.Dir(opts.AuditLog), "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600); err != nil {
			return nil, err
		}
		env.ControlPlane.APIServer.Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", opts.AuditLog).
			Set("audit-log-format", "json")
	}
	for k, v := range opts.APIServerArgs {
		env.ControlPlane.APIServer.Configure().Set(k, v)
	}

	cfg, err := startEnv(env, opts.Assets)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start control plane from %s: %w", assets, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &ControlPlane{env: env, Config: cfg, Client: cs, Dynamic: dyn}, nil
}

// startMu serializes the starts: startEnv sets process-wide variables.
var startMu sync.Mutex

// startEnv starts env, with the binaries of the folder assets when it is
// set: envtest resolves each binary at Start from TEST_ASSET_<NAME>, then
// KUBEBUILDER_ASSETS, then BinaryAssetsDirectory (controller-runtime
// v0.16.6 pkg/envtest/server.go Start, pkg/internal/testing/process
// bin_path_finder.go), so the first is set for the start.
func startEnv(env *envtest.Environment, assets string) (*rest.Config, error) {
	startMu.Lock()
	defer startMu.Unlock()
	if assets != "" {
		for name, bin := range map[string]string{"TEST_ASSET_KUBE_APISERVER": "kube-apiserver", "TEST_ASSET_ETCD": "etcd", "TEST_ASSET_KUBECTL": "kubectl"} {
			old, had := os.LookupEnv(name)
			if err := os.Setenv(name, filepath.Join(assets, bin)); err != nil {
				return nil, err
			}
			defer func() {
				if had {
					_ = os.Setenv(name, old)
				} else {
					_ = os.Unsetenv(name)
				}
			}()
		}
	}
	return env.Start()
}

// Stop stops the control plane and removes its data.
func (c *ControlPlane) Stop() error { return c.env.Stop() }

// Main is a TestMain body: it starts a control plane, stores it in *cp,
// runs the tests and stops it, returning the exit code for os.Exit.
func Main(m interface{ Run() int }, cp **ControlPlane, opts Options) int {
	c, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	*cp = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: stop control plane: %v\n", err)
	}
	return code
}

// BuildLeasetune builds the leasetune binary of this repository into dir
// and returns its path.
func BuildLeasetune(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "leasetune")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/leasetune")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build leasetune: %w\n%s", err, out)
	}
	return bin, nil
}

// MainAtRoot is Main that first stores the repository's root in *root
// (RepoRoot), for the tests that read files of the repository.
func MainAtRoot(m interface{ Run() int }, cp **ControlPlane, root *string, opts Options) int {
	r, err := RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*root = r
	return Main(m, cp, opts)
}

// MainWithAuditLog is Main with the kube-apiserver writing an audit log to
// a temporary file, whose path it stores in *auditLog first; the file is
// removed afterwards.
func MainWithAuditLog(m *testing.M, cp **ControlPlane, auditLog *string, opts Options) int {
	dir, err := os.MkdirTemp("", "leasetune-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	*auditLog = filepath.Join(dir, "audit.log")
	opts.AuditLog = *auditLog
	return Main(m, cp, opts)
}

// Kubeconfig writes a kubeconfig for an admin (system:masters) user of the
// control plane into dir and returns its path, for processes the tests start.
func (c *ControlPlane) Kubeconfig(dir string) (string, error) {
	u, err := c.env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kubeconfig")
	return p, os.WriteFile(p, b, 0o600)
}

// Namespace creates a namespace with a random name for test t and deletes
// it when t ends.
func (c *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := c.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// Eventually polls cond every 50ms and fails t when it does not hold within
// a minute (generous: a loaded 2-core machine is slow, and a passing test
// returns as soon as cond holds).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: not within a minute", what)
	}
}

// FleetDeployments reads the rendered Deployments of a Fleet release from
// ../shared/fixtures/fleet (version as in the file names, e.g. "v0.14.10").
func FleetDeployments(t testing.TB, version string) []*appsv1.Deployment {
	t.Helper()
	path, b := ReadSharedFixture(t, "fleet/fleet-"+version+"-deployments.yaml")
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*appsv1.Deployment
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.Name != "" {
			out = append(out, &d)
		}
	}
	return out
}

// InstallFleet creates the Deployments in ns as Helm would (field manager
// "helm") and returns them as created.
func (c *ControlPlane) InstallFleet(t testing.TB, ns string, ds []*appsv1.Deployment) map[string]*appsv1.Deployment {
	t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, d := range ds {
		d = d.DeepCopy()
		d.Namespace = ns
		got, err := c.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{FieldManager: "helm"})
		if err != nil {
			t.Fatalf("create %s: %v", d.Name, err)
		}
		out[got.Name] = got
	}
	return out
}

// Events returns the messages of the Events with reason about the object
// called name in namespace ns ("" for a cluster-scoped object: its Events
// go to "default").
func (c *ControlPlane) Events(t testing.TB, ns, name, reason string) []string {
	t.Helper()
	if ns == "" {
		ns = "default"
	}
	l, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l.Items {
		out = append(out, e.Message)
	}
	return out
}

// EventuallyEvent waits until an Event with reason about the object called
// name in ns ("" for a cluster-scoped object) has every one of parts in
// its message, and fails t when none does in time.
func (c *ControlPlane) EventuallyEvent(t testing.TB, ns, name, reason string, parts ...string) {
	t.Helper()
	Eventually(t, fmt.Sprintf("an Event %s on %s saying %q", reason, name, parts), func() bool {
		for _, m := range c.Events(t, ns, name, reason) {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(m, p)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// RepoRoot returns the repository root: the nearest folder above the
// working directory that holds go.mod with this project's module path.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module leasetune.io/leasetune\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of leasetune.io/leasetune above the working directory")
		}
		dir = parent
	}
}

// SharedFixture returns the path of a file under ../shared/fixtures beside
// the repository (the read-only test data of real Fleet and Rancher
// releases).
func SharedFixture(rel string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "..", "shared", "fixtures", rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("shared fixture: %w", err)
	}
	return p, nil
}

// ReadSharedFixture returns the path and the bytes of a file under
// ../shared/fixtures, failing t when it cannot be read.
func ReadSharedFixture(t testing.TB, rel string) (string, []byte) {
	t.Helper()
	p, err := SharedFixture(rel)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// assetsDir returns KUBEBUILDER_ASSETS, or runs scripts/controlplane.sh
// and returns the folder it prints last.
func assetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	return AssetsOf("", "")
}

// AssetsOf runs scripts/controlplane.sh for Kubernetes kube (LEASETUNE_KUBE)
// and flavour (LEASETUNE_KUBE_FLAVOUR), each "" for the environment's, and returns the
// folder it prints last; it builds the binaries when the machine has none
// (minutes).
func AssetsOf(kube, flavour string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "controlplane.sh"))
	cmd.Env = os.Environ()
	if kube != "" {
		cmd.Env = append(cmd.Env, "LEASETUNE_KUBE="+kube)
	}
	if flavour != "" {
		cmd.Env = append(cmd.Env, "LEASETUNE_KUBE_FLAVOUR="+flavour)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/controlplane.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// progressNotifyFlag is the name etcd binary knows the watch progress
// notification interval by: experimental-watch-progress-notify-interval
// up to v3.5, watch-progress-notify-interval from v3.6 (the other name
// deprecated there).
func progressNotifyFlag(etcd string) (string, error) {
	out, err := exec.Command(etcd, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", etcd, err)
	}
	if strings.Contains(string(out), "etcd Version: 3.5.") || strings.Contains(string(out), "etcd Version: 3.4.") {
		return "experimental-watch-progress-notify-interval", nil
	}
	return "watch-progress-notify-interval", nil
}
