package prometheus_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	sigsyaml "sigs.k8s.io/yaml"

	"leasetune.io/leasetune/tests/helmchart"
	"leasetune.io/leasetune/tests/integration/framework"

	"leasetune.io/leasetune/tests/kit"
)

// The Prometheus Operator's kinds the test creates.
var (
	prometheusGVR     = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}
	serviceMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	ruleGVR           = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// promName is the Prometheus object's name: rancher-monitoring's (the
// kube-prometheus-stack chart names it <fullname>-prometheus, and
// rancher-monitoring's nameOverride is rancher-monitoring).
const promName = "rancher-monitoring-prometheus"

// podName is the name of the stand-in leasetune Pod.
const podName = "leasetune-0"

// TestChartThroughPrometheusOperator: the chart's ServiceMonitor and
// PrometheusRule, as helm renders them with monitoring.enabled, go through
// the real Prometheus Operator (v0.75.1, the one rancher-monitoring 105.x
// ships, running against the test kube-apiserver with the CRDs of its own
// module), and the real Prometheus runs what the operator generated from
// them: the Secret prometheus-<name> (prometheus.yaml.gz) and the rule
// ConfigMaps prometheus-<name>-rulefiles-N.
//
//   - the one scrape job the operator makes of the ServiceMonitor finds
//     leasetune's metrics endpoint alone, up, with job="leasetune-metrics"
//     (what every alert selects) and the labels namespace, pod and service;
//     leasetune_* series come through it;
//   - the PrometheusRule's group is loaded, every rule healthy, and its
//     alerts are exactly those docs/alerts.md lists;
//   - LeasetuneSettingRefused is inactive, then fires once a Rancher
//     triple the controller refuses stands for longer than the settle time,
//     and is inactive again once the value is set back.
//
// What a cluster has and envtest has not is stood in for: no kubelet runs
// the Pod and no endpoints controller fills the Endpoints, so the test
// writes the Pod's status and the Endpoints as they would, with an address
// of this machine that the API server accepts in Endpoints, where the test
// forwards to the controller's metrics server (standInPod); and the
// Prometheus Pod's environment (its service-account credentials for
// Kubernetes discovery, the rule ConfigMaps mounted as files, the config
// reloader's $(VAR) substitution) is given to the Prometheus process
// (prometheusConfig). Nothing else of the generated configuration is
// changed, and the StatefulSet the operator makes is never run. That the
// chart renders no ServiceMonitor without monitoring.enabled, or where the
// kind is not served, is tests/chart's TestMonitoringGated.
func TestChartThroughPrometheusOperator(t *testing.T) {
	e := sharedEnv(t)
	if noOperator != "" {
		kit.SkipUnlessRequired(t, "operator", noOperator)
	}
	dir := t.TempDir()
	installOperatorCRDs(t)
	kubeconfig, err := cp.Kubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	startOperator(t, dir, kubeconfig)

	// The Prometheus, selecting as rancher-monitoring's does (as the chart's
	// servicemonitor.yaml cites rancher/charts dev-v2.10,
	// charts/rancher-monitoring/105.1.0-rc.1+up61.3.2/values.yaml:
	// prometheus.prometheusSpec.serviceMonitorSelector and ruleSelector {}
	// with serviceMonitorSelectorNilUsesHelmValues and
	// ruleSelectorNilUsesHelmValues false, and the namespace selectors {}:
	// every ServiceMonitor and PrometheusRule of every namespace), in a
	// namespace of its own as in cattle-monitoring-system. Its scrape and
	// evaluation intervals are 1s (rancher-monitoring's are 30s) so that the
	// test is quick; the chart's ServiceMonitor sets no interval and takes
	// the Prometheus's.
	mon := namespace(t)
	prom := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
		"metadata": map[string]interface{}{"name": promName, "namespace": mon},
		"spec": map[string]interface{}{
			"serviceMonitorSelector":          map[string]interface{}{},
			"serviceMonitorNamespaceSelector": map[string]interface{}{},
			"ruleSelector":                    map[string]interface{}{},
			"ruleNamespaceSelector":           map[string]interface{}{},
			"scrapeInterval":                  "1s",
			"evaluationInterval":              "1s",
		},
	}}
	cp.Create(t, prometheusGVR, prom)

	// The chart, rendered as helm install renders it where the operator's
	// kinds are served, in leasetune's namespace, with the metrics port the
	// controller listens on and its settle time (the harness's, so that
	// LeasetuneSettingRefused waits what the controller waits).
	_, port, err := net.SplitHostPort(e.metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	docs := framework.RenderChartAPIs(t, []string{helmchart.ServiceMonitor, helmchart.PrometheusRule},
		"namespaceOverride="+e.ns, "monitoring.enabled=true", "metrics.port="+port, "settle="+settle.String())
	objs := rendered(t, docs)
	svc := one(t, objs, "Service", "leasetune-metrics")
	cp.Create(t, schema.GroupVersionResource{Version: "v1", Resource: "services"}, svc)
	cp.Create(t, serviceMonitorGVR, one(t, objs, "ServiceMonitor", "leasetune"))
	cp.Create(t, ruleGVR, one(t, objs, "PrometheusRule", "leasetune"))
	podAddr := standInPod(t, e, one(t, objs, "Deployment", "leasetune"), svc)

	job := "serviceMonitor/" + e.ns + "/leasetune/0"
	cfgPath, rulesDir := prometheusConfig(t, dir, kubeconfig, mon, job)

	pdir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := runPrometheus(pdir, cfgPath, func(p *promServer) error { return p.get("/api/v1/status/config", nil, nil) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)

	// (a) The scrape job finds leasetune's endpoint alone, up, with the
	// labels the alerts select by.
	var tg activeTarget
	if err := poll(time.Minute, func() error {
		ts, dropped, err := p.activeTargets()
		if err != nil {
			return err
		}
		var got []activeTarget
		for _, a := range ts {
			if a.ScrapePool == job {
				got = append(got, a)
			}
		}
		if len(got) != 1 {
			return fmt.Errorf("%d active targets in %s, want 1 (all active: %v; dropped by relabelling: %v)", len(got), job, ts, dropped)
		}
		if tg = got[0]; tg.Health != "up" {
			return fmt.Errorf("%s: %s %s", tg.ScrapeURL, tg.Health, tg.LastError)
		}
		return nil
	}); err != nil {
		t.Fatalf("the operator's scrape job for the chart's ServiceMonitor: %v\nPrometheus's log:\n%s", err, p.logTail())
	}
	t.Logf("the operator's job %s scrapes %s with the labels %v", job, tg.ScrapeURL, tg.Labels)
	if want := "http://" + podAddr + "/metrics"; tg.ScrapeURL != want {
		t.Errorf("scrape URL %s, want %s", tg.ScrapeURL, want)
	}
	for k, v := range map[string]string{"job": "leasetune-metrics", "namespace": e.ns, "pod": podName, "service": "leasetune-metrics", "endpoint": "metrics"} {
		if tg.Labels[k] != v {
			t.Errorf("the target's label %s=%q, want %q (its labels: %v)", k, tg.Labels[k], v, tg.Labels)
		}
	}
	sel := fmt.Sprintf(`{job="leasetune-metrics",namespace=%q,pod=%q,service="leasetune-metrics"}`, e.ns, podName)
	if err := poll(30*time.Second, func() error {
		n, err := p.total("count("+strings.Replace(sel, "{", `{__name__=~"leasetune_.+",`, 1)+")", time.Time{})
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no leasetune_ series %s", sel)
		}
		up, err := p.total("up"+sel, time.Time{})
		if err != nil {
			return err
		}
		if up != 1 {
			return fmt.Errorf("up%s = %v, want 1", sel, up)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// (b) The PrometheusRule's group is loaded from the operator's rule
	// file, every rule healthy, its alerts those of docs/alerts.md.
	want := documentedAlerts(t)
	var grp ruleGroup
	if err := poll(time.Minute, func() error {
		gs, err := p.ruleGroups()
		if err != nil {
			return err
		}
		if len(gs) != 1 || gs[0].Name != "leasetune" || !strings.HasPrefix(gs[0].File, rulesDir+string(filepath.Separator)) {
			return fmt.Errorf("rule groups %v, want the group leasetune alone, from a file in %s", gs, rulesDir)
		}
		grp = gs[0]
		for _, r := range grp.Rules {
			if r.Health != "ok" || r.LastEvaluation.IsZero() || r.LastEvaluation.Year() < 2000 {
				return fmt.Errorf("rule %s: health %q, last evaluated %v %s", r.Name, r.Health, r.LastEvaluation, r.LastError)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range grp.Rules {
		if r.Type == "alerting" {
			got = append(got, r.Name)
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("alerts loaded from %s: %v; docs/alerts.md lists %v", grp.File, got, want)
	}

	// (c) LeasetuneSettingRefused through this path: inactive while the
	// Rancher triple is valid; firing once an invalid one (renewDeadline
	// beyond the lease, written while no webhook is registered, so that it
	// gets past the door) stands for the settle time; inactive once the
	// value is set back (the shared installation's later tests see the
	// triple they had).
	const alert = "LeasetuneSettingRefused"
	const setting = "rancher-leader-election-renew-deadline"
	// Before: with the one replica up and leading and no triple refused,
	// the alerts on those are inactive (LeasetuneDown, whose absent()
	// fires on any job or namespace the scrape does not give, among them).
	// The first evaluations may predate the first scrape: they settle.
	if err := poll(30*time.Second, func() error {
		for _, a := range []string{"LeasetuneDown", "LeasetuneReplicaDown", "LeasetuneNoLeader", alert} {
			if st := p.alertState(t, a); st != "inactive" {
				return fmt.Errorf("%s is %s before any refusal, want inactive", a, st)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if as, err := p.alerts(); err == nil {
		t.Logf("alerts pending or firing before the refusal: %v", as)
	}
	prev, err := e.settingValue(setting)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.patchSettings(setting, "50s"); err != nil { // beyond Rancher's 45s lease
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := e.patchSettings(setting, prev); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(restore)
	start := time.Now()
	var firing []promAlert
	if err := poll(time.Minute, func() error {
		as, err := p.alerts()
		if err != nil {
			return err
		}
		firing = nil
		for _, a := range as {
			if a.Labels["alertname"] == alert && a.State == "firing" {
				firing = append(firing, a)
			}
		}
		if len(firing) == 0 {
			return fmt.Errorf("%s not firing; alerts: %v", alert, as)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s fired %s after the refused value was written: %v", alert, time.Since(start).Round(100*time.Millisecond), firing)
	if len(firing) != 1 || firing[0].Labels["component"] != "rancher" || firing[0].Labels["reason"] != "invalid" || firing[0].Labels["namespace"] != e.ns {
		t.Errorf("firing: %v; want one alert with component rancher, reason invalid, namespace %s", firing, e.ns)
	}
	restore()
	if err := poll(time.Minute, func() error {
		if st := p.alertState(t, alert); st != "inactive" {
			return fmt.Errorf("%s is %s after the value was set back", alert, st)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// installOperatorCRDs installs the CRDs the operator's Prometheus
// controller reads (Prometheus, ServiceMonitor, PodMonitor, Probe,
// PrometheusRule), from the folder scripts/prometheus-operator.sh copied
// them to beside the binary (the module's example/prometheus-operator-crd/).
// Its other controllers (Alertmanager, ThanosRuler, PrometheusAgent,
// ScrapeConfig) then stay off: the operator starts each only where its kind
// is served (cmd/operator/main.go, checkPrerequisites).
func installOperatorCRDs(t *testing.T) {
	t.Helper()
	var paths []string
	for _, k := range []string{"prometheuses", "servicemonitors", "podmonitors", "probes", "prometheusrules"} {
		paths = append(paths, filepath.Join(filepath.Dir(operatorBin), "crds", "monitoring.coreos.com_"+k+".yaml"))
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install the operator's CRDs: %v", err)
	}
}

// startOperator runs the operator against the test kube-apiserver with the
// kubeconfig (it reads $KUBECONFIG: pkg/k8sutil/k8sutil.go,
// NewClusterConfig), its web server on a free loopback port, its log in
// dir; it stops it (SIGTERM, then SIGKILL after 10 s) when t ends.
func startOperator(t *testing.T, dir, kubeconfig string) {
	t.Helper()
	logPath := filepath.Join(dir, "operator.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(operatorBin, "--web.listen-address="+framework.FreeAddr(t), "--log-level=info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		var exit error
		select {
		case exit = <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			exit = <-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("the operator (exit: %v); its log (last part):\n%s", exit, b)
		}
	})
}

// rendered decodes the chart's documents into objects (JSON numbers, as
// the API server's clients expect them).
func rendered(t *testing.T, docs [][]byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		j, err := sigsyaml.YAMLToJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(j) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		out = append(out, u)
	}
	return out
}

// one returns the object of kind and name among objs, failing t without it.
func one(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o.DeepCopy()
		}
	}
	t.Fatalf("the chart rendered no %s %s", kind, name)
	return nil
}

// standInPod creates what the kubelet and the endpoints controller would
// make of the chart's Deployment and metrics Service, which envtest does
// not run, and returns the Pod's metrics address: one Pod of the
// Deployment's template (its labels are what the Service selects), Running
// with an IP of this machine (the kubelet's status), and the Service's
// Endpoints, whose one ready address is that Pod on the controller's
// metrics port (the endpoints controller's work). The controller's metrics
// server listens on loopback, which the API server refuses in Endpoints
// (k8s.io/kubernetes v1.32.13 pkg/apis/core/validation/validation.go,
// validateEndpointAddress: ValidateNonSpecialIP refuses loopback,
// link-local and unspecified addresses), so the Pod's IP is the machine's
// first other IPv4 address (podIP) and the test forwards connections there
// to the metrics server, byte for byte (forward). The operator's scrape
// configuration discovers its targets from Endpoints (role endpoints:
// v0.75.1 never uses EndpointSlices, pkg/prometheus/server/operator.go sets
// endpointSliceSupported false whatever the API serves). It skips t when
// the machine has no such address.
func standInPod(t *testing.T, e *env, deploy, svc *unstructured.Unstructured) string {
	t.Helper()
	ctx := context.Background()
	ip := podIP(t)
	_, portStr, err := net.SplitHostPort(e.metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(ip, portStr)
	forward(t, addr, e.metricsAddr)

	tmpl, ok, err := unstructured.NestedMap(deploy.Object, "spec", "template")
	if err != nil || !ok {
		t.Fatalf("the Deployment has no pod template (%v)", err)
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Name, pod.Namespace = podName, e.ns
	pod.Spec.NodeName = "node-1"
	created, err := cp.Client.CoreV1().Pods(e.ns).Create(ctx, &pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Pods(e.ns).Delete(context.Background(), podName, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	now := metav1.Now()
	created.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: ip, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	for _, c := range created.Spec.Containers {
		created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	if _, err := cp.Client.CoreV1().Pods(e.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The Service's ports, on the container port each targets (the chart
	// renders metrics.port, the controller's, as both).
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var epPorts []corev1.EndpointPort
	for _, sp := range ports {
		m, _ := sp.(map[string]interface{})
		name, _ := m["name"].(string)
		epPorts = append(epPorts, corev1.EndpointPort{Name: name, Port: int32(port), Protocol: corev1.ProtocolTCP})
	}
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: svc.GetName(), Namespace: e.ns, Labels: svc.GetLabels()},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: ip, NodeName: &pod.Spec.NodeName,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: e.ns, Name: podName, UID: created.UID}}},
			Ports: epPorts,
		}},
	}
	eps := cp.Client.CoreV1().Endpoints(e.ns)
	if _, err := eps.Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eps.Delete(context.Background(), svc.GetName(), metav1.DeleteOptions{}) })
	return addr
}

// podIP is the first IPv4 address of an interface of this machine that is
// up and that the API server accepts in Endpoints (not loopback,
// link-local or unspecified); it skips t when there is none.
func podIP(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.To4() == nil || !n.IP.IsGlobalUnicast() {
				continue
			}
			return n.IP.String()
		}
	}
	// A property of the machine, not a tool it lacks: a skip even in CI.
	t.Skip("this machine has no IPv4 address other than loopback or link-local, which the API server refuses in Endpoints: the Pod's stand-in needs one")
	return ""
}

// forward accepts connections on addr until t ends and copies each, both
// ways, to and from a connection to to: the stand-in Pod's metrics port.
func forward(t *testing.T, addr, to string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s for the stand-in Pod: %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() {
					_, _ = io.Copy(u, c)
					if tc, ok := u.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
					close(done)
				}()
				_, _ = io.Copy(c, u)
				_ = c.Close()
				<-done
			}()
		}
	}()
}

// prometheusConfig waits until the operator has generated the
// configuration of the Prometheus promName in namespace mon with the
// scrape job job and a rule file of leasetune's PrometheusRule, and writes
// what a Prometheus Pod of its StatefulSet would run into dir: it returns
// the configuration file's path and the folder of the rule files.
//
// The generated configuration is kept as the operator wrote it, but for
// what the Pod gets from its environment:
//   - the config reloader's substitution of $(VAR) with the container's
//     environment (POD_NAME, SHARD: the StatefulSet's config-reloader
//     container; github.com/thanos-io/thanos v0.35.1, the reloader the
//     operator's prometheus-config-reloader runs, pkg/reloader/reloader.go,
//     expandEnv, replaces every $(NAME) in the file's text);
//   - each kubernetes_sd_configs entry gets kubeconfig_file, the test
//     apiserver's kubeconfig, where the Pod uses its in-cluster service
//     account (the operator writes neither api_server nor credentials);
//   - rule_files under /etc/prometheus/rules (where the StatefulSet mounts
//     the rule ConfigMaps: pkg/prometheus/common.go, RulesDir) point to the
//     folder the test wrote the ConfigMaps' files into, one subfolder per
//     ConfigMap as mounted.
//
// It fails t if anything else of the Pod's file system is left in the
// configuration (a path under /etc/prometheus or /var/run/secrets).
func prometheusConfig(t *testing.T, dir, kubeconfig, mon, job string) (cfgPath, rulesDir string) {
	t.Helper()
	ctx := context.Background()
	var raw []byte
	var cms []corev1.ConfigMap
	err := poll(time.Minute, func() error {
		sec, err := cp.Client.CoreV1().Secrets(mon).Get(ctx, "prometheus-"+promName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		zr, err := gzip.NewReader(bytes.NewReader(sec.Data["prometheus.yaml.gz"]))
		if err != nil {
			return fmt.Errorf("prometheus.yaml.gz: %w", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return err
		}
		if !bytes.Contains(raw, []byte("job_name: "+job+"\n")) {
			return fmt.Errorf("no job %s in the generated configuration:\n%s", job, raw)
		}
		l, err := cp.Client.CoreV1().ConfigMaps(mon).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		cms = nil
		found := false
		for _, cm := range l.Items {
			if strings.HasPrefix(cm.Name, "prometheus-"+promName+"-rulefiles-") {
				cms = append(cms, cm)
				for k := range cm.Data {
					found = found || strings.Contains(k, "leasetune")
				}
			}
		}
		if !found {
			return fmt.Errorf("no rule file of leasetune's PrometheusRule in the rule ConfigMaps (%d of them)", len(cms))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the operator's configuration for %s/%s: %v", mon, promName, err)
	}
	t.Logf("the operator generated (Secret prometheus-%s, prometheus.yaml.gz):\n%s", promName, raw)

	// The config reloader's environment, from the StatefulSet's Pod template.
	sts, err := cp.Client.AppsV1().StatefulSets(mon).Get(ctx, "prometheus-"+promName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name != "config-reloader" {
			continue
		}
		for _, v := range c.Env {
			switch {
			case v.ValueFrom == nil:
				env[v.Name] = v.Value
			case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.name":
				env[v.Name] = sts.Name + "-0" // the StatefulSet's first Pod
			}
		}
	}
	var expandErr error
	raw = regexp.MustCompile(`\$\(([a-zA-Z_0-9]+)\)`).ReplaceAllFunc(raw, func(m []byte) []byte {
		v, ok := env[string(m[2:len(m)-1])]
		if !ok && expandErr == nil {
			expandErr = fmt.Errorf("the configuration names %s, which the config reloader's environment %v has not", m, env)
		}
		return []byte(v)
	})
	if expandErr != nil {
		t.Fatal(expandErr)
	}

	rulesDir = filepath.Join(dir, "rules")
	for _, cm := range cms {
		sub := filepath.Join(rulesDir, cm.Name)
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		for k, v := range cm.Data {
			if err := os.WriteFile(filepath.Join(sub, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	var cfg map[string]interface{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	const podRules = "/etc/prometheus/rules/"
	files, _ := cfg["rule_files"].([]interface{})
	for i, f := range files {
		s, _ := f.(string)
		if !strings.HasPrefix(s, podRules) {
			t.Fatalf("rule file %q is not under %s", s, podRules)
		}
		files[i] = filepath.Join(rulesDir, strings.TrimPrefix(s, podRules))
	}
	var jobs []string
	scs, _ := cfg["scrape_configs"].([]interface{})
	for _, sc := range scs {
		m, _ := sc.(map[string]interface{})
		name, _ := m["job_name"].(string)
		jobs = append(jobs, name)
		sds, _ := m["kubernetes_sd_configs"].([]interface{})
		for _, sd := range sds {
			sdm, _ := sd.(map[string]interface{})
			if name == job && sdm["role"] != "endpoints" {
				t.Errorf("job %s discovers role %v; the stand-ins make Endpoints (standInPod)", job, sdm["role"])
			}
			sdm["kubeconfig_file"] = kubeconfig
		}
	}
	if len(jobs) != 1 || jobs[0] != job {
		t.Errorf("the generated scrape jobs are %v, want the ServiceMonitor's %s alone", jobs, job)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"/etc/prometheus", "/var/run/secrets"} {
		if bytes.Contains(out, []byte(pod)) {
			t.Fatalf("the configuration still needs the Pod's %s:\n%s", pod, out)
		}
	}
	cfgPath = filepath.Join(dir, "prometheus.yaml")
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, rulesDir
}

// documentedAlerts returns the alerts docs/alerts.md's table lists, sorted.
func documentedAlerts(t *testing.T) []string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\| \[(\w+)\]\(#\w+\) \|`).FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	if len(out) == 0 {
		t.Fatal("docs/alerts.md lists no alert")
	}
	sort.Strings(out)
	return out
}

// settingValue returns the value of the Setting name.
func (e *env) settingValue(name string) (string, error) {
	u, err := e.dyn().Resource(framework.SettingsGVR).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("no Setting %s", name)
	}
	if err != nil {
		return "", err
	}
	v, _, _ := unstructured.NestedString(u.Object, "value")
	return v, nil
}

// poll calls f every 200ms until it returns nil, and returns its last error
// when that does not happen within d.
func poll(d time.Duration, f func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, d, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("not within %s: %w", d, last)
	}
	return nil
}

// activeTarget is a target of /api/v1/targets.
type activeTarget struct {
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
	Labels     map[string]string `json:"labels"`
}

func (a activeTarget) String() string { return a.ScrapePool + " " + a.ScrapeURL + " " + a.Health }

// activeTargets returns Prometheus's active targets and the number of
// targets relabelling dropped, per scrape pool.
func (p *promServer) activeTargets() ([]activeTarget, map[string]int, error) {
	var d struct {
		ActiveTargets       []activeTarget `json:"activeTargets"`
		DroppedTargetCounts map[string]int `json:"droppedTargetCounts"`
	}
	err := p.get("/api/v1/targets", nil, &d)
	return d.ActiveTargets, d.DroppedTargetCounts, err
}

// ruleGroup is a rule group of /api/v1/rules.
type ruleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []struct {
		Name           string    `json:"name"`
		Type           string    `json:"type"`
		State          string    `json:"state"`
		Health         string    `json:"health"`
		LastError      string    `json:"lastError"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	} `json:"rules"`
}

func (g ruleGroup) String() string { return g.Name + " (" + g.File + ")" }

// ruleGroups returns the rule groups Prometheus has loaded.
func (p *promServer) ruleGroups() ([]ruleGroup, error) {
	var d struct {
		Groups []ruleGroup `json:"groups"`
	}
	err := p.get("/api/v1/rules", nil, &d)
	return d.Groups, err
}

// alertState returns the state of the alerting rule name (inactive,
// pending, firing), failing t when no group has it.
func (p *promServer) alertState(t *testing.T, name string) string {
	t.Helper()
	gs, err := p.ruleGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		for _, r := range g.Rules {
			if r.Type == "alerting" && r.Name == name {
				return r.State
			}
		}
	}
	t.Fatalf("no alerting rule %s loaded", name)
	return ""
}

// promAlert is an alert of /api/v1/alerts.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts returns the pending and firing alerts.
func (p *promServer) alerts() ([]promAlert, error) {
	var d struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.get("/api/v1/alerts", nil, &d)
	return d.Alerts, err
}
