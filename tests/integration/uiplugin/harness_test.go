package uiplugin_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/uiplugin"
	"leasetune.io/leasetune/tests/integration/framework"
)

func dyn() dynamic.Interface { return dynamic.NewForConfigOrDie(cp.Config) }

func installUIPluginCRD(t *testing.T) { cp.InstallUIPluginCRD(t) }

// ensureNamespace creates a namespace with a fixed name (Rancher's
// cattle-ui-plugin-system) when missing.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// getUIPlugin reads leasetune's UIPlugin (nil when absent).
func getUIPlugin(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Get(context.Background(), "leasetune", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func deleteUIPlugin(t *testing.T) {
	t.Helper()
	err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Delete(context.Background(), "leasetune", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !isKindMissing(err) {
		t.Fatal(err)
	}
}

// chartUIPlugin returns the UIPlugin the chart renders where Rancher's
// UIPlugin kind is served (helm template --api-versions), for leasetune in
// namespace ns, with more --set values; nil when it renders none.
func chartUIPlugin(t *testing.T, ns string, set ...string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, doc := range framework.RenderChartAPIs(t, []string{framework.UIPluginAPIVersion}, append([]string{"namespaceOverride=" + ns}, set...)...) {
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != "UIPlugin" {
			continue
		}
		if found != nil {
			t.Fatal("the chart renders more than one UIPlugin")
		}
		found = u
	}
	return found
}

// installChartUIPlugin does what helm install does with the chart's
// UIPlugin beside Rancher (its CRD and namespace there): it creates it, for
// leasetune in ns with the bundle fetched from endpoint (the chart's
// uiPlugin.endpoint), in place of any other, and deletes it when t ends.
func installChartUIPlugin(t *testing.T, ns, endpoint string) *unstructured.Unstructured {
	t.Helper()
	ensureNamespace(t, uiplugin.Namespace)
	installUIPluginCRD(t)
	deleteUIPlugin(t)
	u := chartUIPlugin(t, ns, "uiPlugin.endpoint="+endpoint)
	if u == nil {
		t.Fatal("the chart renders no UIPlugin where the UIPlugin kind is served")
	}
	got, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "helm"})
	if err != nil {
		t.Fatalf("create the chart's UIPlugin (as helm install does): %v", err)
	}
	t.Cleanup(func() { deleteUIPlugin(t) })
	return got
}

func isKindMissing(err error) bool {
	return apierrors.IsNotFound(err) || strings.Contains(err.Error(), "the server could not find the requested resource")
}

// server is a manager running in this process as the only replica, with
// the webhook and /v3/settings on addr (HTTPS) and the bundle on uiAddr.
type server struct {
	ns, addr, uiAddr, fleetNS, rancherNS string
	cancel                               context.CancelFunc
	done                                 chan error
}

type serverOptions struct {
	channel fleet.AgentChannel
	env     map[string]string
	// settle is the settle time of the settings (default 1s).
	settle time.Duration
}

// startServer runs the manager as leasetune's service account (with
// system:masters, as the admission tests do: the chart's RBAC is checked
// in tests/integration/rbac), the chart's webhook configuration pointed at
// it, and the UI bundle served at http://<uiAddr>.
func startServer(t *testing.T, o serverOptions) *server {
	t.Helper()
	cp.ResetSettings(t)
	s := &server{ns: cp.Namespace(t), fleetNS: cp.Namespace(t), rancherNS: cp.Namespace(t), addr: framework.FreeAddr(t), uiAddr: framework.FreeAddr(t), done: make(chan error, 1)}
	installWebhookConfig(t, s)
	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + s.ns + ":leasetune", Groups: []string{"system:masters"}}
	lookup := func(k string) (string, bool) { v, ok := o.env[k]; return v, ok }
	if o.settle == 0 {
		o.settle = time.Second
	}
	cfg := manager.Config{
		Namespace: s.ns, FleetNamespace: s.fleetNS, RancherNamespace: s.rancherNS, ChannelOverride: o.channel,
		QPS: 100, Burst: 200, Workers: 1, Settle: o.settle,
		WebhookAddr: s.addr, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"}, CertCheckInterval: time.Second,
		WebhookConfigName: "leasetune", ServiceAccount: "system:serviceaccount:" + s.ns + ":leasetune",
		LookupEnv: lookup,
	}
	cfg.UI = manager.UIConfig{Addr: s.uiAddr}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		s.done <- manager.Run(ctx, sa, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	t.Cleanup(func() { s.stop(t) })
	framework.Eventually(t, "settings created", func() bool {
		l, err := dyn().Resource(framework.SettingsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) >= len(settings.Registry)
	})
	framework.Eventually(t, "webhook answers", func() bool {
		resp, err := insecure().Get("https://" + s.addr + "/v3/settings")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	framework.Eventually(t, "caBundle published", func() bool {
		v, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "leasetune", metav1.GetOptions{})
		return err == nil && len(v.Webhooks[0].ClientConfig.CABundle) > 0
	})
	return s
}

// stop cancels the manager and fails t when manager.Run returned an error.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.cancel != nil {
		s.cancel()
		err := <-s.done
		s.cancel = nil
		if err != nil {
			t.Errorf("manager.Run: %v", err)
		}
	}
}

func insecure() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 30 * time.Second}
}

// render returns the chart's documents rendered with the given values.
func render(t *testing.T, set ...string) [][]byte {
	t.Helper()
	return framework.RenderChart(t, set...)
}

// installWebhookConfig installs the chart's ValidatingWebhookConfiguration,
// pointed at s by URL.
func installWebhookConfig(t *testing.T, s *server) {
	t.Helper()
	cp.InstallWebhookConfig(t, render(t, "namespaceOverride="+s.ns), s.addr)
}

// settingValue reads a Setting's value.
func settingValue(t *testing.T, name string) string {
	t.Helper()
	u, err := dyn().Resource(framework.SettingsGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := unstructured.NestedString(u.Object, "value")
	return v
}

// rancherCache fetches an extension as Rancher's extension cache does
// (rancher/rancher v2.11.3 pkg/controllers/dashboard/plugin/fscache.go,
// SyncWithControllersCache and its helpers): <endpoint>/plugin/package.json,
// whose version must equal the UIPlugin's; <endpoint>/files.txt, split on
// newlines, each entry refused when it starts with /, \ or . or contains ..
// (fileNameRegex); then each listed file at <endpoint>/<file>, with Go's
// default HTTP client (plain http.Get). It returns the files by path.
func rancherCache(endpoint, version string) (map[string][]byte, error) {
	get := func(u string) ([]byte, error) {
		resp, err := http.Get(u)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	raw, err := get(endpoint + "/" + "plugin/package.json")
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return nil, fmt.Errorf("package.json: %w", err)
	}
	if strings.TrimPrefix(pkg.Version, "v") != strings.TrimPrefix(version, "v") {
		return nil, fmt.Errorf("plugin version [%s] does not match version in controller's cache [%s]", pkg.Version, version)
	}
	list, err := get(endpoint + "/files.txt")
	if err != nil {
		return nil, err
	}
	bad := regexp.MustCompile(`(^[/\\.])|\.\.`)
	files := map[string][]byte{}
	for _, f := range strings.Split(string(list), "\n") {
		if f == "" {
			continue
		}
		name, err := url.QueryUnescape(f)
		if err != nil || bad.MatchString(name) {
			return nil, fmt.Errorf("invalid file entry: %s", f)
		}
		data, err := get(endpoint + "/" + f)
		if err != nil {
			return nil, err
		}
		files[f] = data
	}
	return files, nil
}
