package main

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
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"leasetune.io/leasetune/hack/cluster/rollout"
)

type kube struct {
	cs  kubernetes.Interface
	ext apiextclient.Interface
}

func (c *cluster) client() (*kube, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.p("admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ext, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kube{cs: cs, ext: ext}, nil
}

func (k *kube) ready(ctx context.Context) error {
	b, err := k.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s", err, b)
	}
	return nil
}

func (k *kube) nodeReady(ctx context.Context) error {
	n, err := k.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("condition Ready is %s: %s", c.Status, c.Message)
		}
	}
	return errors.New("no Ready condition yet")
}

// StandIn turns a Deployment of Fleet's into one the node can run: its
// containers run the stand-in image (hack/pause, with Fleet's command names),
// never pulled; everything else, env first, stays as Fleet renders it.
func StandIn(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	for i := range d.Spec.Template.Spec.Containers {
		ct := &d.Spec.Template.Spec.Containers[i]
		ct.Image, ct.ImagePullPolicy = standInImage, corev1.PullNever
	}
	return d
}

// seedFleet installs what a Fleet installation has that leasetune reads:
// the Cluster CRD, the fleet-local and fleet-default namespaces, and
// Fleet's Deployments with their ServiceAccounts (fleet-v<ver>-*.yaml of
// the shared fixtures), and waits until their pods run.
func (c *cluster) seedFleet(ctx context.Context, k *kube) error {
	crdPath := filepath.Join(c.fixtures, "fleet", "fleet-"+c.fleet+"-clusters-crd.yaml")
	var crd apiextv1.CustomResourceDefinition
	if err := decodeFile(crdPath, func(dec *utilyaml.YAMLOrJSONDecoder) (bool, error) {
		return false, dec.Decode(&crd)
	}); err != nil {
		return err
	}
	if _, err := k.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: %w", crdPath, err)
	}
	// cattle-system: Rancher's namespace, which a Rancher installation
	// always has; the chart's Role for rancher-config lives there.
	for _, ns := range []string{fleetNamespace, "fleet-local", "fleet-default", "cattle-system"} {
		if _, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	depPath := filepath.Join(c.fixtures, "fleet", "fleet-"+c.fleet+"-deployments.yaml")
	var deps []*appsv1.Deployment
	if err := decodeFile(depPath, func(dec *utilyaml.YAMLOrJSONDecoder) (bool, error) {
		var d appsv1.Deployment
		err := dec.Decode(&d)
		if err == nil && d.Name != "" {
			deps = append(deps, &d)
		}
		return true, err
	}); err != nil {
		return err
	}
	for _, d := range deps {
		d = StandIn(d)
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "" {
			_, err := k.cs.CoreV1().ServiceAccounts(fleetNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		if _, err := k.cs.AppsV1().Deployments(fleetNamespace).Create(ctx, d, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			return fmt.Errorf("%s %s: %w", depPath, d.Name, err)
		}
	}
	for _, d := range deps {
		if err := c.waitFor(ctx, "Deployment "+fleetNamespace+"/"+d.Name+" available", 3*time.Minute, func() error {
			return available(ctx, k, fleetNamespace, d.Name)
		}, "kubelet", "containerd"); err != nil {
			return err
		}
	}
	logf("Fleet %s's %d Deployments run (the stand-in image)", c.fleet, len(deps))
	return nil
}

func available(ctx context.Context, k *kube, ns, name string) error {
	d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return rollout.Done(d)
}

// decodeFile decodes the YAML documents of path with each until it returns
// false or the file ends.
func decodeFile(path string, each func(*utilyaml.YAMLOrJSONDecoder) (bool, error)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		more, err := each(dec)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !more {
			return nil
		}
	}
}

// installChart runs the README's install: helm install into
// leasetune-system, the image as make image names it (leasetune:<appVersion>,
// the chart's default repository and tag), no Rancher here, so installCRDs
// stays true; then labels the namespace for Pod Security Admission's
// restricted level, failing on any warning (a pod that would not pass).
func (c *cluster) installChart(ctx context.Context, k *kube) error {
	kubeconfig := c.p("admin.kubeconfig")
	cmd := exec.CommandContext(ctx, c.helm, "install", "leasetune", filepath.Join(c.repo, "charts/leasetune"),
		"--namespace", leasetuneNS, "--create-namespace", "--set", "image.repository=leasetune",
		"--kubeconfig", kubeconfig, "--wait", "--timeout", "5m")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm install: %w: %s\n%s", err, out, c.diagnose(leasetuneNS))
	}
	out, err := execOut(filepath.Join(c.assets, "kubectl"), "--kubeconfig", kubeconfig, "label", "namespace", leasetuneNS,
		"pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
	if err != nil {
		return err
	}
	if bytes.Contains([]byte(out), []byte("Warning")) {
		return fmt.Errorf("namespace %s under Pod Security restricted: %s", leasetuneNS, out)
	}
	if err := available(ctx, k, leasetuneNS, "leasetune"); err != nil {
		return fmt.Errorf("leasetune after helm install --wait: %w", err)
	}
	logf("helm install leasetune: 2 replicas Ready; namespace %s enforces Pod Security restricted", leasetuneNS)
	return nil
}

// diagnose says what a user would look at when pods of ns do not become
// Ready: the pods and their events, the containers' logs (and the previous
// run's, after a restart), and the end of the kubelet's and kube-proxy's
// logs. Each part is best effort: a command that fails says so in place.
func (c *cluster) diagnose(ns string) string {
	kubectl := filepath.Join(c.assets, "kubectl")
	kc := "--kubeconfig=" + c.p("admin.kubeconfig")
	var b bytes.Buffer
	run := func(args ...string) {
		fmt.Fprintf(&b, "--- kubectl %s\n", strings.Join(args, " "))
		out, _ := exec.Command(kubectl, append([]string{kc, "--request-timeout=20s"}, args...)...).CombinedOutput()
		b.Write(out)
	}
	run("get", "pods", "-A", "-o", "wide")
	run("-n", ns, "describe", "pods")
	run("-n", ns, "get", "events", "--sort-by=.lastTimestamp")
	run("-n", ns, "logs", "-l", "app.kubernetes.io/name=leasetune", "--all-containers", "--prefix", "--tail=60")
	run("-n", ns, "logs", "-l", "app.kubernetes.io/name=leasetune", "--all-containers", "--prefix", "--tail=30", "--previous")
	for _, p := range []string{"kubelet", "kube-proxy"} {
		fmt.Fprintf(&b, "--- the end of %s\n", filepath.Join(c.state, "logs", p+".log"))
		b.WriteString(tail(filepath.Join(c.state, "logs", p+".log"), 30))
	}
	return b.String()
}

// tail is the last n lines of the file at path, or why it cannot be read.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.SplitAfter(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "") + "\n"
}
