package framework

import (
	"context"
	"crypto/rand"
	"embed"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	itfw "leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/upstream/releases"
)

// Options says what an Installation runs.
type Options struct {
	// Suite is the package's entry in package releases: the releases it
	// runs. Main sets it, and Fleet and Rancher from it.
	Suite releases.Suite
	// Fleet is the tag of the Fleet release to run (the suite's).
	Fleet string
	// Rancher runs the suite's Rancher and installs Fleet as Rancher installs
	// it (bootstrap off; the local cluster comes from Rancher); without
	// it Fleet runs standalone (its chart's defaults: bootstrap on).
	Rancher bool
	// Leasetune are --set values for leasetune's chart after the suite's.
	Leasetune []string
}

// Installation is a control plane with the real Rancher (optional), the
// real Fleet and leasetune installed by their charts and run by the
// Kubelet double.
type Installation struct {
	Opts Options
	CP   *itfw.ControlPlane
	Dyn  dynamic.Interface
	Dir  string
	// keep is set when a test failed: Stop then keeps Dir.
	keep       bool
	Kubeconfig string
	Audit      AuditLog
	Bin        Binaries
	Helm       Helm
	Kubelet    *Kubelet
	Tokens     *TokenFiller
	Services   *ServiceProxy
	Rancher    RancherServer
	Leasetune  LeasetuneServer
	// Admin is Rancher's admin logged in (nil without Rancher).
	Admin *RancherAPI
	// BeforeLeasetune is the audit log's mark and the rollouts just before
	// leasetune's chart was installed: what leasetune did from its first
	// moment on is measured from there.
	BeforeLeasetune         int64
	RolloutsBeforeLeasetune map[string]int

	lock *os.File
}

// SettingGVR is Rancher's Setting resource, UIPluginGVR Rancher's UI
// extension resource.
var (
	SettingGVR  = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "settings"}
	UIPluginGVR = schema.GroupVersionResource{Group: "catalog.cattle.io", Version: "v1", Resource: "uiplugins"}
)

func progress(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "upstream: "+format+"\n", args...)
}

// step runs f with a progress line and its duration.
func step(what string, f func() error) error {
	start := time.Now()
	progress("%s ...", what)
	if err := f(); err != nil {
		progress("%s: failed after %s: %v", what, time.Since(start).Round(time.Second), err)
		return fmt.Errorf("%s: %w", what, err)
	}
	progress("%s: done in %s", what, time.Since(start).Round(time.Second))
	return nil
}

// Start brings up an installation. On error what it started is stopped.
func Start(opts Options) (_ *Installation, err error) {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	in := &Installation{Opts: opts}
	if in.Dir, err = os.MkdirTemp("", "leasetune-upstream-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			in.Stop()
		}
	}()
	// One installation per machine at a time: Rancher binds :6666 and
	// /tmp/log.sock whatever it is told (docs/upstream.md).
	if in.lock, err = lockMachine(); err != nil {
		return nil, err
	}
	if err := step("the release folders (package releases) and leasetune", func() (err error) {
		in.Bin, err = FindBinaries(in.Dir, opts.Suite)
		return err
	}); err != nil {
		return nil, err
	}
	in.Audit = AuditLog{Path: in.Dir + "/audit.log"}
	if err := step("control plane (kube-apiserver and etcd, audit log)", func() (err error) {
		// A Service range of its own, so that two installations on one
		// machine never give the ServiceProxy the same ClusterIP.
		n, err := rand.Int(rand.Reader, big.NewInt(250*250))
		if err != nil {
			return err
		}
		cidr := fmt.Sprintf("10.%d.%d.0/24", 1+n.Int64()/250, n.Int64()%250)
		args, err := frontProxyArgs(in.Dir)
		if err != nil {
			return err
		}
		args["service-cluster-ip-range"] = cidr
		// No rotation of the audit log (100 MB by default): its marks are
		// offsets in one file.
		args["audit-log-maxsize"] = "100000"
		in.CP, err = itfw.Start(itfw.Options{AuditLog: in.Audit.Path, APIServerArgs: args})
		if err != nil {
			return err
		}
		if in.Kubeconfig, err = in.CP.Kubeconfig(in.Dir); err != nil {
			return err
		}
		in.Dyn, err = dynamic.NewForConfig(in.CP.Config)
		return err
	}); err != nil {
		return nil, err
	}
	if in.Helm, err = NewHelm(in.Kubeconfig); err != nil {
		return nil, err
	}
	if in.Tokens, err = StartTokenFiller(in.CP.Config); err != nil {
		return nil, err
	}
	if in.Rancher, err = NewRancherServer(); err != nil {
		return nil, err
	}
	if in.Leasetune, err = NewLeasetuneServer(); err != nil {
		return nil, err
	}
	fleet := FleetRunner(in.Bin, opts.Fleet)
	runners := map[string]Runner{
		LeasetuneNamespace + "/leasetune":    LeasetuneRunner(in.Bin, in.Leasetune),
		FleetLocalNamespace + "/fleet-agent": fleet,
		FleetNamespace + "/fleet-agent":      fleet,
	}
	for _, d := range FleetDeployments {
		runners[FleetNamespace+"/"+d] = fleet
	}
	if opts.Rancher {
		runners[RancherNamespace+"/"+RancherDeployment] = RancherRunner(in.Bin, in.RancherVersion(), in.Rancher)
	}
	if opts.Suite.Webhook != nil {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		runners[RancherNamespace+"/"+WebhookDeployment] = WebhookRunner(in.Bin, addr)
	}
	if in.Kubelet, err = StartKubelet(in.CP.Config, in.Dir, runners); err != nil {
		return nil, err
	}
	services := map[string]string{LeasetuneNamespace + "/leasetune-webhook": LeasetuneNamespace + "/leasetune"}
	if opts.Rancher {
		// Rancher's Service (its internal URL) and its extension API's
		// (rancher/rancher v2.12.12 pkg/ext/extension_apiserver.go:
		// imperative-api-extension, port 6666, selecting Rancher's pods).
		services[RancherNamespace+"/"+RancherDeployment] = RancherNamespace + "/" + RancherDeployment
		services[RancherNamespace+"/imperative-api-extension"] = RancherNamespace + "/" + RancherDeployment
		if in.RancherAtLeast("2.14.0") {
			// Rancher's internal URL, which Fleet's local kubeconfig
			// names, is this Service's address from v2.14 (rancher/rancher
			// v2.14.4 and v2.15.0 chart/templates/service.yaml
			// rancher-internal, port 443 to the container's 444;
			// pkg/controllers/dashboard/apiservice/setting.go getClusterIP;
			// v2.13.8's names the rancher Service).
			services[RancherNamespace+"/rancher-internal"] = RancherNamespace + "/" + RancherDeployment
		}
	}
	if opts.Suite.Webhook != nil {
		services[RancherNamespace+"/"+WebhookDeployment] = RancherNamespace + "/" + WebhookDeployment
	}
	in.Services = StartServiceProxy(in.CP.Client, in.Kubelet, services)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	if err := step("Fleet "+opts.Fleet+" CRDs (helm install fleet-crd)", func() error {
		return in.Helm.Install("fleet-crd", FleetChart(in.Bin, opts.Fleet)+"-crd", FleetNamespace, false, nil)
	}); err != nil {
		return nil, err
	}
	settings := map[string]string{}
	if opts.Rancher {
		if err := step("Rancher "+in.RancherVersion()+" (helm install rancher; the Kubelet double runs it until /ping answers)", func() error {
			chart, err := RancherChart(in.Bin, in.Dir, in.RancherVersion())
			if err != nil {
				return err
			}
			if err := in.installCRD("testdata/issuers.cert-manager.io.yaml"); err != nil {
				return err
			}
			values, err := RancherValues(in.Dir, in.RancherVersion(), in.Rancher, in.Bin.Dashboard)
			if err != nil {
				return err
			}
			// With hooks: the bootstrap-secret is a pre-install hook
			// (chart/templates/secret.yaml); the chart's Jobs are
			// pre-upgrade and post-delete hooks only.
			if err := in.Helm.Install("rancher", chart, RancherNamespace, false, []string{values}); err != nil {
				return err
			}
			return in.waitRunning(ctx, RancherNamespace, RancherDeployment)
		}); err != nil {
			return nil, err
		}
		if err := step("Rancher's extension API registered with the aggregator (until then Rancher answers its UI with 503)", func() error {
			// steve pkg/server/server.go: the UI waits for the extension
			// API server's Registered, which the aggregator's first call
			// makes (steve pkg/ext/apiserver.go). The APIService itself
			// stays unavailable here (the kube-apiserver's availability
			// check wants Endpoints, which nothing makes).
			client := insecureClient(5 * time.Second)
			return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.Rancher.URL()+"/dashboard/", nil)
				resp, err := client.Do(req)
				if err != nil {
					return false, nil
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK, nil
			})
		}); err != nil {
			return nil, err
		}
		if err := step("Rancher login as admin, and the settings Fleet's chart gets", func() error {
			return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				if in.Admin == nil {
					a, err := Login(ctx, in.Rancher.URL(), "admin", RancherPassword)
					if err != nil {
						return false, nil
					}
					in.Admin = a
				}
				// A token made while Rancher starts can stay unusable: beside
				// v2.15.0 steve then acts as "system:cattle:error" (403, the
				// kube-apiserver's audit log) or answers 401. Log in again
				// until a token reads a Setting.
				if code, _, err := in.Admin.Do(ctx, http.MethodGet, "/v1/management.cattle.io.settings/server-url", nil); err != nil || code != http.StatusOK {
					in.Admin = nil
					return false, nil
				}
				for _, n := range []string{"server-url", "cacerts", "agent-tls-mode", "system-default-registry"} {
					s, err := in.Dyn.Resource(SettingGVR).Get(ctx, n, metav1.GetOptions{})
					if err != nil {
						return false, nil
					}
					v, _ := s.Object["value"].(string)
					if v == "" {
						v, _ = s.Object["default"].(string)
					}
					settings[n] = v
				}
				return settings["server-url"] != "", nil
			})
		}); err != nil {
			return nil, err
		}
	}
	if w := opts.Suite.Webhook; w != nil {
		if err := step("rancher-webhook "+w.Tag+" (helm install rancher-webhook with the values Rancher's system charts give it; the Kubelet double runs it until it has registered its webhooks)", func() error {
			chart, err := WebhookChart(in.Bin, in.Dir, w.Tag)
			if err != nil {
				return err
			}
			values, err := WebhookValues(in.Dir, w.Tag)
			if err != nil {
				return err
			}
			if err := in.Helm.Install(WebhookDeployment, chart, RancherNamespace, false, []string{values}); err != nil {
				return err
			}
			if err := in.waitRunning(ctx, RancherNamespace, WebhookDeployment); err != nil {
				return err
			}
			// Its leader fills the chart's empty webhook configurations
			// with its rules and CA bundle (rancher/webhook v0.11.0
			// pkg/server/server.go sync).
			return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				v, err := in.CP.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rancher.cattle.io", metav1.GetOptions{})
				if err != nil || len(v.Webhooks) == 0 {
					return false, nil
				}
				return len(v.Webhooks[0].ClientConfig.CABundle) > 0, nil
			})
		}); err != nil {
			return nil, err
		}
	}
	if err := step("Fleet "+opts.Fleet+" (helm install fleet; the Kubelet double runs its Deployments)", func() error {
		var files []string
		var set []string
		if opts.Rancher {
			f, err := RancherFleetValues(in.Dir, opts.Fleet, settings)
			if err != nil {
				return err
			}
			files = append(files, f)
		} else {
			set = append(set, "image.tag="+opts.Fleet, "agentImage.tag="+opts.Fleet)
		}
		// Without hooks: the chart's cleanup Job is a post-install hook
		// (charts/fleet/templates/job_cleanup_clusterregistrations.yaml).
		if err := in.Helm.Install("fleet", FleetChart(in.Bin, opts.Fleet), FleetNamespace, true, files, set...); err != nil {
			return err
		}
		for _, d := range FleetDeployments {
			if err := in.waitRunning(ctx, FleetNamespace, d); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := step("leasetune (helm install leasetune; the Kubelet double runs it until /readyz answers; beside Rancher, until Rancher has cached its UIPlugin)", func() error {
		if in.BeforeLeasetune, err = in.Audit.Mark(); err != nil {
			return err
		}
		in.RolloutsBeforeLeasetune = map[string]int{}
		for k, n := range in.Kubelet.AllRollouts() {
			in.RolloutsBeforeLeasetune[k] = n
		}
		chart, err := LeasetuneChart()
		if err != nil {
			return err
		}
		set := []string{"replicaCount=1", "image.repository=leasetune-upstream-test"}
		if opts.Rancher {
			// The chart's UIPlugin (helm finds Rancher's UIPlugin kind) points
			// Rancher at the bundle server's address here.
			set = append(set, "installCRDs=false", "uiPlugin.endpoint="+in.Leasetune.UIEndpoint())
		} else {
			// The chart's Role for rancher-config lives in cattle-system,
			// which a standalone Fleet does not make.
			_, err := in.CP.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RancherNamespace}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			set = append(set, "rancherElection.enabled=false", "uiPlugin.enabled=false")
		}
		set = append(set, opts.Leasetune...)
		if err := in.Helm.Install("leasetune", chart, LeasetuneNamespace, false, nil, set...); err != nil {
			return err
		}
		if err := in.waitRunning(ctx, LeasetuneNamespace, "leasetune"); err != nil {
			return err
		}
		if !opts.Rancher {
			return nil
		}
		// Its UIPlugin, which helm installed with the chart
		// (templates/uiplugin.yaml), cached by Rancher before any case
		// restarts Rancher. Rancher's first fetch usually comes before the
		// bundle server listens and fails; Rancher retries after a backoff
		// of seconds, but only in that process's memory: a Rancher started
		// again before the retry skips the plugin (its status.retryAt not
		// reached yet) and nothing enqueues it again until the next resync
		// or a change of the object (rancher/rancher v2.12.12
		// pkg/controllers/dashboard/plugin/controller.go, OnPluginChange's
		// RetryAt check and retry's EnqueueAfter). Seen here when
		// Test02RancherStartRestoresTheSettings ran first, 0.4 s after the
		// failed fetch.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return wait.PollUntilContextCancel(cctx, time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := in.Dyn.Resource(UIPluginGVR).Namespace("cattle-ui-plugin-system").Get(ctx, "leasetune", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			st, _ := u.Object["status"].(map[string]interface{})
			ready, _ := st["ready"].(bool)
			return st["cacheState"] == "cached" && ready, nil
		})
	}); err != nil {
		return nil, err
	}
	return in, nil
}

// RancherVersion is the tag of the Rancher the installation runs ("" for
// none).
func (in *Installation) RancherVersion() string {
	if in.Opts.Suite.Rancher == nil {
		return ""
	}
	return in.Opts.Suite.Rancher.Tag
}

// RancherAtLeast reports whether the installation runs a Rancher of
// version v (e.g. "2.15.0") or later.
func (in *Installation) RancherAtLeast(v string) bool {
	r, err := semver.NewVersion(in.RancherVersion())
	return err == nil && !r.LessThan(semver.MustParse(v))
}

// waitRunning waits for a Deployment the Kubelet double runs, and says
// what the double could not do when it does not come up.
func (in *Installation) waitRunning(ctx context.Context, ns, name string) error {
	if err := in.Kubelet.WaitRunning(ctx, ns, name); err != nil {
		return fmt.Errorf("%s/%s not running: %w\nkubelet double: %s\ncrashes: %s\n%s", ns, name, err,
			strings.Join(in.Kubelet.Errors(), "\n"), strings.Join(in.Kubelet.Crashes(), "\n"), in.Logs(ns, name, 40))
	}
	return nil
}

// Logs returns the last n lines of every container log of the running
// pods of Deployment ns/name.
func (in *Installation) Logs(ns, name string, n int) string {
	var b strings.Builder
	for _, p := range in.Kubelet.Pods(ns, name) {
		for _, c := range p.Template.Spec.Containers {
			lines := strings.Split(strings.TrimRight(p.Log(c.Name), "\n"), "\n")
			if len(lines) > n {
				lines = lines[len(lines)-n:]
			}
			fmt.Fprintf(&b, "--- %s/%s %s (last %d lines) ---\n%s\n", ns, p.Name, c.Name, len(lines), strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// Stop stops every process and the control plane, and removes the
// installation's folder unless LEASETUNE_UPSTREAM_KEEP is set or a test
// failed (then it says where it is).
func (in *Installation) Stop() {
	if in.Kubelet != nil {
		in.Kubelet.Stop()
	}
	if in.Services != nil {
		in.Services.Stop()
	}
	if in.Tokens != nil {
		in.Tokens.Stop()
	}
	if in.CP != nil {
		_ = in.CP.Stop()
	}
	defer func() {
		if in.lock != nil {
			_ = in.lock.Close() // releases the flock
		}
	}()
	if in.keep || os.Getenv("LEASETUNE_UPSTREAM_KEEP") != "" {
		progress("kept %s (logs of every pod, the audit log)", in.Dir)
		return
	}
	_ = os.RemoveAll(in.Dir)
}

// lockMachine takes the machine-wide lock of the upstream cache folder
// (flock, released when the process ends), waiting for another
// installation to end first.
func lockMachine() (*os.File, error) {
	cache := os.Getenv("LEASETUNE_UPSTREAM_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "leasetune-upstream")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(cache, ".installation.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		progress("another installation holds %s: waiting for it to end", f.Name())
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

//go:embed testdata
var testdata embed.FS

// installCRD creates the CRD in the embedded file name and waits until it
// is established.
func (in *Installation) installCRD(name string) error {
	b, err := testdata.ReadFile(name)
	if err != nil {
		return err
	}
	p := filepath.Join(in.Dir, filepath.Base(name))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(in.CP.Config, envtest.CRDInstallOptions{Paths: []string{p}, ErrorIfPathMissing: true})
	return err
}

// Hold, when LEASETUNE_UPSTREAM_HOLD is set, keeps the installation
// running after the tests until the process gets SIGINT or SIGTERM, and
// says how to reach it: for looking around by hand (kubectl, curl,
// Rancher's UI in a browser).
func Hold(in *Installation) {
	if os.Getenv("LEASETUNE_UPSTREAM_HOLD") == "" {
		return
	}
	progress("holding: KUBECONFIG=%s; Rancher %s (admin / %s); pods' logs in %s; Ctrl-C or SIGTERM to stop",
		in.Kubeconfig, in.Rancher.URL(), RancherPassword, in.Dir)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}

// Main is a TestMain body: it starts an installation with opts, stores it
// in *in, runs the tests, holds it when asked (Hold), stops it, and
// returns the exit code for os.Exit.
//
// pkg is the package's path from the repository's root, as package
// releases names its suite. Where a release's folder is missing Main
// starts nothing and every test skips (Need), saying what it expects.
func Main(m *testing.M, pkg string, opts Options, in **Installation) int {
	s, ok := releases.Of(pkg, os.Getenv(releases.SuiteEnv))
	if !ok {
		fmt.Fprintf(os.Stderr, "upstream: package releases has no suite %s %s\n", pkg, os.Getenv(releases.SuiteEnv))
		return 1
	}
	progress("suite %s: %s", s.Name, releasesLine(s))
	opts.Suite, opts.Fleet, opts.Rancher = s, s.Fleet.Tag, s.Rancher != nil
	if s.Missing() != "" {
		skipped = &s
		return m.Run()
	}
	i, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*in = i
	code := m.Run()
	Hold(i)
	if code != 0 {
		i.keep = true // a failure is read from the pods' logs and the audit log
	}
	i.Stop()
	return code
}

func releasesLine(s releases.Suite) string {
	var rs []string
	for _, r := range s.Releases() {
		rs = append(rs, r.Repo+" "+r.Tag)
	}
	return strings.Join(rs, ", ")
}

// skipped is the suite Main found a release folder of missing.
var skipped *releases.Suite

// Need skips t, with the suite's line for it, when Main started no
// installation because a release's folder is missing.
func Need(t *testing.T, in *Installation) {
	t.Helper()
	if in == nil && skipped != nil {
		t.Skip(skipped.SkipLine(t.Name()))
	}
}
