// Command devenv is `make run` without a KUBECONFIG: it starts a local
// kube-apiserver and etcd (the ones the tests use), installs the CRDs
// leasetune needs, seeds a sample Rancher + Fleet installation, runs
// `leasetune controller` against it, prints how to change a setting and see
// the effect (with kubectl and through the /v3/settings API, with a ready
// token), and on Ctrl-C stops leasetune, then the control plane.
package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/pkg/own"
)

// statusCRD is the chart's ElectionStatus CRD, relative to the repository.
const statusCRD = "charts/leasetune/crds/electionstatuses.leasetune.io.yaml"

//go:embed crds/*.yaml
var crdFiles embed.FS

// webhookAddr is where the local leasetune serves its webhook and the
// /v3/settings API.
const webhookAddr = "127.0.0.1:9443"

// namespace is leasetune's namespace in the sample installation.
const namespace = "leasetune-system"

// installWebhook creates the ValidatingWebhookConfiguration of the chart's
// rendered webhook.yaml with each webhook pointed at addr by URL.
func installWebhook(ctx context.Context, cs kubernetes.Interface, path, addr string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s has no ValidatingWebhookConfiguration", path)
		}
		if err != nil {
			return err
		}
		if !bytes.Contains(doc, []byte("kind: ValidatingWebhookConfiguration")) {
			continue
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := yaml.Unmarshal(doc, &vwc); err != nil {
			return err
		}
		for i := range vwc.Webhooks {
			url := "https://" + addr + *vwc.Webhooks[i].ClientConfig.Service.Path
			vwc.Webhooks[i].ClientConfig.Service, vwc.Webhooks[i].ClientConfig.URL = nil, &url
		}
		_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &vwc, metav1.CreateOptions{})
		return err
	}
}

// childEnv marks the devenv process that does the work (see supervise).
const childEnv = "LEASETUNE_DEVENV_CHILD"

func main() {
	if os.Getenv(childEnv) == "" {
		os.Exit(supervise())
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

// supervise runs devenv again, as a child in a process group of its own,
// passes it SIGINT and SIGTERM as SIGTERM, and returns its exit code.
//
// Ctrl-C in a terminal signals the whole foreground process group. envtest
// starts kube-apiserver and etcd in the group of the process that starts
// them, so in devenv's group they died at the same moment as leasetune,
// which then failed to release its Lease ("Failed to release lock ...
// connection refused"). In a group of its own the child hears of the Ctrl-C
// only from here, and stops leasetune first (it releases its Lease), then
// the control plane.
func supervise() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		return 1
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	// No stdin: a process outside the terminal's foreground group that
	// reads it is stopped.
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		return 1
	}
	go func() {
		for range sig {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
	if err := cmd.Wait(); err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

func run() error {
	if len(os.Args) != 5 {
		return fmt.Errorf("usage: devenv <control-plane assets dir> <leasetune binary> <state dir> <chart's webhook.yaml>")
	}
	assets, binary, dir, webhookYAML := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	setting, err := crds.Setting()
	if err != nil {
		return err
	}
	list := []*apiextv1.CustomResourceDefinition{setting}
	entries, _ := crdFiles.ReadDir("crds")
	for _, e := range entries {
		b, _ := crdFiles.ReadFile("crds/" + e.Name())
		var c apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		list = append(list, &c)
	}
	// leasetune's own ElectionStatus CRD, as the chart installs it (make run
	// runs from the repository's root).
	b, err := os.ReadFile(statusCRD)
	if err != nil {
		return fmt.Errorf("the ElectionStatus CRD: %w", err)
	}
	var status apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &status); err != nil {
		return fmt.Errorf("%s: %w", statusCRD, err)
	}
	list = append(list, &status)
	fmt.Println("starting kube-apiserver and etcd ...")
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: list, ControlPlaneStartTimeout: 3 * time.Minute}
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	// Deferred: it runs after leasetune has stopped (below), so leasetune
	// can release its Lease.
	defer func() {
		start := time.Now()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devenv: stopping the control plane:", err)
			return
		}
		fmt.Printf("control plane stopped (%s)\n", time.Since(start).Round(100*time.Millisecond))
	}()
	user, err := env.AddUser(envtest.User{Name: "dev-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	if err := seed(ctx, cs, dynamic.NewForConfigOrDie(cfg)); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	go rolloutStandIn(ctx, cs)
	// The chart's webhook configuration, pointed at the local server;
	// leasetune fills in its caBundle before its controllers start.
	if err := installWebhook(ctx, cs, webhookYAML, webhookAddr); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}

	cmd := exec.Command(binary, "controller", "--kubeconfig", kubeconfig, "--namespace", namespace,
		"--log-format", "text", "--health-addr", "127.0.0.1:8081", "--metrics-addr", "127.0.0.1:8080",
		"--webhook-addr", webhookAddr, "--webhook-host", "127.0.0.1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: only devenv signals it (one SIGTERM), and waits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// stopLeasetune stops leasetune (it releases its Lease) and waits.
	stopLeasetune := func() error {
		start := time.Now()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := <-done
		if err != nil {
			return fmt.Errorf("leasetune: %w", err)
		}
		fmt.Printf("leasetune stopped (%s)\n", time.Since(start).Round(100*time.Millisecond))
		return nil
	}

	// The /v3/settings API: a token of a ServiceAccount with a role for the
	// nine settings, and the webhook's CA (leasetune makes it at start).
	token, err := settingsAPIToken(ctx, cs, namespace)
	if err != nil {
		if ctx.Err() != nil { // Ctrl-C meanwhile
			return stopLeasetune()
		}
		_ = stopLeasetune()
		return fmt.Errorf("settings API token: %w", err)
	}
	caFile, err := webhookCA(ctx, cs, namespace, dir)
	if err != nil {
		if ctx.Err() != nil {
			return stopLeasetune()
		}
		_ = stopLeasetune()
		return err
	}
	kubectl := filepath.Join(assets, "kubectl")
	fmt.Printf(`
leasetune is running against a local control plane seeded with Fleet v0.14 and six clusters.

  export KUBECONFIG=%[1]s
  alias kubectl=%[2]s

Change a setting (as PUT /v3/settings/<name> would) and watch it reach Fleet, once the settings
have been unchanged for the settle time (10s, so that editing three in a row rolls once):
  kubectl patch setting fleet-leader-election-retry-period --type merge -p '{"value":"5s"}'
  kubectl -n cattle-fleet-system get deploy fleet-controller -o jsonpath='{.spec.template.spec.containers[0].env}'
A value that would crash-loop Fleet is refused at the door, with the rule and an order that works:
  kubectl patch setting fleet-leader-election-retry-period --type merge -p '{"value":"30s"}'
Events say what took effect:
  kubectl get events -n default --field-selector involvedObject.name=fleet-leader-election-retry-period
Downstream agents: Fleet v0.14 renders every agent's timings from fleet-agentmanagement's env:
  kubectl patch setting fleet-agent-leader-election-retry-period --type merge -p '{"value":"12s"}'
  kubectl -n cattle-fleet-system get deploy fleet-controller -o jsonpath='{.spec.template.spec.containers[?(@.name=="fleet-agentmanagement")].env}'
Per-cluster overrides need a Fleet whose agent manifest leaves room (v0.9.x): on v0.14 a new one is
refused at the door, and the sample's are reported on their clusters:
  kubectl -n fleet-default annotate clusters.fleet.cattle.io edge-1 election.cattle.io/retry-period=20s --overwrite
  kubectl -n fleet-default get clusters.fleet.cattle.io edge-1 -o jsonpath='{.metadata.annotations.leasetune\.io/agent-env-status}'
  kubectl -n fleet-default get events --field-selector involvedObject.name=edge-2
Rancher's own lock kube-system/cattle-controllers (the sample's Rancher Deployment, v2.10.3, 3
replicas; make run marks its rollouts done, standing in for kube-controller-manager): the
rancher-leader-election-* settings start at Rancher's 45s/30s/2s and write nothing; a change rolls
every Rancher replica once:
  kubectl patch setting rancher-leader-election-retry-period --type merge -p '{"value":"10s"}'
  kubectl -n cattle-system get deploy rancher -o jsonpath='{.spec.template.spec.containers[0].env}'
  kubectl -n cattle-system get events --field-selector involvedObject.name=rancher
Every write leasetune would make now, without making it; and what it wrote, to remove it:
  %[3]s plan --kubeconfig %[1]s --namespace leasetune-system
  %[3]s cleanup --kubeconfig %[1]s --namespace leasetune-system   (lists; --yes removes)
Settings: kubectl get settings | grep leader-election     Metrics: http://127.0.0.1:8080/metrics

The Rancher-compatible /v3/settings API, at https://%[4]s/v3/settings (TLS with the CA of the
Secret %[6]s/%[7]s, written to %[5]s), with a token of the
ServiceAccount %[6]s/%[8]s (a ClusterRole to get, list, update and patch the nine settings):
  export TOKEN=%[9]s
  curl --cacert %[5]s -H "Authorization: Bearer $TOKEN" https://%[4]s/v3/settings/fleet-leader-election-retry-period
  curl --cacert %[5]s -H "Authorization: Bearer $TOKEN" -X PUT -d '{"value":"6s"}' https://%[4]s/v3/settings/fleet-leader-election-retry-period
A value that breaks the triple is refused with 422 and the rule (-k instead of --cacert also works):
  curl -k -H "Authorization: Bearer $TOKEN" -X PUT -d '{"value":"30s"}' https://%[4]s/v3/settings/fleet-leader-election-retry-period

Ctrl-C stops everything: leasetune first (it releases its Lease), then the control plane.
`, kubeconfig, kubectl, binary, webhookAddr, caFile, namespace, own.WebhookSecret, settingsEditor, token)

	select {
	case <-ctx.Done():
		return stopLeasetune()
	case err = <-done:
		if err == nil {
			return errors.New("leasetune exited on its own (status 0) before Ctrl-C")
		}
		return fmt.Errorf("leasetune exited: %w", err)
	}
}

// rolloutStandIn stands in for kube-controller-manager's Deployment
// controller, which the local control plane does not run, for the Rancher
// Deployment only: a second after its spec changes (a new generation) it
// reports the rollout done (every replica updated and available), as the
// real controller's status would once the new pods are ready; leasetune
// writes the Rancher Deployment only when it is rolled out. It looks every
// half second until ctx ends.
func rolloutStandIn(ctx context.Context, cs kubernetes.Interface) {
	deps := cs.AppsV1().Deployments("cattle-system")
	for ctx.Err() == nil {
		if d, err := deps.Get(ctx, "rancher", metav1.GetOptions{}); err == nil && d.Status.ObservedGeneration < d.Generation {
			time.Sleep(time.Second)
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: want, UpdatedReplicas: want,
				ReadyReplicas: want, AvailableReplicas: want, Conditions: []appsv1.DeploymentCondition{{
					Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
					Message: "make run's stand-in for kube-controller-manager"}}}
			if _, err := deps.UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "make-run-rollout-stand-in"}); err == nil && d.Generation > 1 {
				fmt.Printf("make run: the Rancher Deployment's rollout of generation %d is done (a stand-in for kube-controller-manager)\n", d.Generation)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// seed creates the namespaces, the Fleet Deployments, the Rancher
// Deployment, rancher-config and the clusters of the sample installation.
func seed(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	for _, ns := range []string{"cattle-fleet-system", "cattle-system", "leasetune-system", "fleet-local", "fleet-default"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, d := range fleetDeployments() {
		if _, err := cs.AppsV1().Deployments("cattle-fleet-system").Create(ctx, d, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			return err
		}
	}
	if _, err := cs.AppsV1().Deployments("cattle-system").Create(ctx, rancherDeployment(), metav1.CreateOptions{FieldManager: "helm"}); err != nil {
		return err
	}
	if _, err := cs.CoreV1().ConfigMaps("cattle-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher-config"}, Data: map[string]string{"fleet": rancherConfigFleetValues},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, o := range clusters() {
		gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
		if err != nil {
			return err
		}
		gvr := gv.WithResource("clusters")
		var r dynamic.ResourceInterface = dyn.Resource(gvr)
		if o.GetNamespace() != "" {
			r = dyn.Resource(gvr).Namespace(o.GetNamespace())
		}
		if _, err := r.Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("%s %s/%s: %w", gvr.Group, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
