package uiplugin_test

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"leasetune.io/leasetune/pkg/uiplugin"
	"leasetune.io/leasetune/tests/integration/framework"
)

// TestChartUIPlugin checks the UIPlugin the Helm chart renders against the
// bundle the binary embeds: where Rancher's UIPlugin kind is served (and
// only there) the chart renders one UIPlugin in cattle-ui-plugin-system
// whose name, version and metadata are the embedded bundle's and whose
// endpoint is the leasetune-ui Service's, which leads to the port the bundle
// server listens on.
func TestChartUIPlugin(t *testing.T) {
	b, err := uiplugin.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)

	t.Run("none where the UIPlugin kind is not served", func(t *testing.T) {
		for _, doc := range render(t, "namespaceOverride="+ns) {
			if bytes.Contains(doc, []byte("kind: UIPlugin")) {
				t.Fatalf("rendered without catalog.cattle.io/v1 UIPlugin served:\n%s", doc)
			}
		}
	})

	t.Run("name, version, endpoint and metadata are the embedded bundle's", func(t *testing.T) {
		u := chartUIPlugin(t, ns)
		if u == nil {
			t.Fatal("no UIPlugin rendered where catalog.cattle.io/v1 UIPlugin is served")
		}
		if u.GetAPIVersion() != "catalog.cattle.io/v1" || u.GetNamespace() != uiplugin.Namespace || u.GetName() != b.Name {
			t.Errorf("the UIPlugin is %s %s/%s, want catalog.cattle.io/v1 %s/%s", u.GetAPIVersion(), u.GetNamespace(), u.GetName(), uiplugin.Namespace, b.Name)
		}
		plugin, _, _ := unstructured.NestedMap(u.Object, "spec", "plugin")
		want := map[string]interface{}{"name": b.Name, "version": b.Version, "endpoint": "http://leasetune-ui." + ns + ".svc" + b.PathPrefix()}
		for k, v := range want {
			if plugin[k] != v {
				t.Errorf("spec.plugin.%s = %v, want %v", k, plugin[k], v)
			}
		}
		meta, _ := plugin["metadata"].(map[string]interface{})
		wantMeta := b.Chart().Metadata
		if len(meta) != len(wantMeta) {
			t.Errorf("spec.plugin.metadata %v, want exactly %v", meta, wantMeta)
		}
		for k, v := range wantMeta {
			if meta[k] != v {
				t.Errorf("spec.plugin.metadata[%s] = %v, want the bundle's %q", k, meta[k], v)
			}
		}
		// Mandatory from Rancher 2.10: without it Rancher's UI does not load
		// the extension (rancher/dashboard shell/config/uiplugins.js
		// shouldNotLoadPlugin: plugins.error.apiAnnotationMissing).
		if meta["catalog.cattle.io/ui-extensions-version"] == nil || meta["catalog.cattle.io/rancher-version"] == nil {
			t.Errorf("metadata lacks Rancher's compatibility annotations: %v", meta)
		}
		// With this key Rancher's UI skips the extension (shouldNotLoadPlugin
		// returns true for UI_PLUGIN_LABELS.CATALOG); and no path to an API
		// of leasetune's: the page has none (issue 25).
		for _, k := range []string{"catalog.cattle.io/ui-extensions-catalog", "leasetune.io/api-proxy"} {
			if _, ok := meta[k]; ok {
				t.Errorf("metadata carries %s", k)
			}
		}
		if _, set := plugin["noCache"]; set {
			t.Errorf("noCache = %v: it is Rancher's to set (a file over its size limit)", plugin["noCache"])
		}
	})

	t.Run("the endpoint's Service leads to the bundle server's port", func(t *testing.T) {
		docs := render(t, "namespaceOverride="+ns, "uiPlugin.port=8099")
		var svc *corev1.Service
		var dep *appsv1.Deployment
		for _, doc := range docs {
			var m metav1.TypeMeta
			_ = utilyaml.Unmarshal(doc, &m)
			switch {
			case m.Kind == "Service" && bytes.Contains(doc, []byte("name: leasetune-ui\n")):
				svc = &corev1.Service{}
				_ = utilyaml.Unmarshal(doc, svc)
			case m.Kind == "Deployment":
				dep = &appsv1.Deployment{}
				_ = utilyaml.Unmarshal(doc, dep)
			}
		}
		if svc == nil || dep == nil {
			t.Fatal("no leasetune-ui Service or no Deployment")
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.StrVal != "ui" {
			t.Errorf("leasetune-ui ports %+v: want one, 80 to the container port named ui", svc.Spec.Ports)
		}
		c := dep.Spec.Template.Spec.Containers[0]
		var uiPort int32
		for _, p := range c.Ports {
			if p.Name == "ui" {
				uiPort = p.ContainerPort
			}
		}
		if uiPort != 8099 || !contains(c.Args, "--ui-addr=:8099") {
			t.Errorf("container port ui %d, args %v: want 8099 and --ui-addr=:8099", uiPort, c.Args)
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--ui-api-upstream") || strings.HasPrefix(a, "--ui-plugin") {
				t.Errorf("the Deployment passes %s", a)
			}
		}
		// The webhook's Service is another Service, on another port.
		for _, doc := range docs {
			if bytes.Contains(doc, []byte("name: leasetune-webhook\n")) && bytes.Contains(doc, []byte("targetPort: ui")) {
				t.Errorf("the webhook's Service leads to the bundle server:\n%s", doc)
			}
		}
	})

	t.Run("uiPlugin.enabled=false renders no UIPlugin, Service or bundle server", func(t *testing.T) {
		for _, doc := range framework.RenderChartAPIs(t, []string{framework.UIPluginAPIVersion}, "namespaceOverride="+ns, "uiPlugin.enabled=false") {
			if bytes.Contains(doc, []byte("kind: UIPlugin")) || bytes.Contains(doc, []byte("leasetune-ui")) || bytes.Contains(doc, []byte("--ui-addr=:")) {
				t.Fatalf("uiPlugin.enabled=false still renders the UIPlugin, the UI Service or the bundle server:\n%s", doc)
			}
		}
	})
}

// TestUIPluginBesideTheServer installs the chart's UIPlugin as helm install
// does beside Rancher (its CRD's schema accepts it), pointed at the bundle
// server of a running leasetune, and fetches the extension from its
// endpoint exactly as Rancher's cache does: the bytes are the embedded
// bundle's. leasetune itself never writes a UIPlugin: none appears while
// it runs, a hand edit stays, and `leasetune cleanup` leaves the chart's
// UIPlugin to helm uninstall.
func TestUIPluginBesideTheServer(t *testing.T) {
	b, err := uiplugin.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, uiplugin.Namespace)
	installUIPluginCRD(t)
	deleteUIPlugin(t)
	s := startServer(t, serverOptions{})

	t.Run("leasetune makes no UIPlugin", func(t *testing.T) {
		if !framework.Consistently(t, "no UIPlugin", framework.ConsistentlyMin, func() bool { return getUIPlugin(t) == nil }) {
			t.FailNow()
		}
	})

	live := installChartUIPlugin(t, s.ns, "http://"+s.uiAddr)

	t.Run("Rancher's cache fetches the bundle at the endpoint the UIPlugin names", func(t *testing.T) {
		plugin, _, _ := unstructured.NestedMap(live.Object, "spec", "plugin")
		if plugin["endpoint"] != "http://"+s.uiAddr+b.PathPrefix() {
			t.Fatalf("endpoint %v", plugin["endpoint"])
		}
		files, err := rancherCache(plugin["endpoint"].(string), plugin["version"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != len(b.Files) {
			t.Fatalf("fetched %d files, the bundle has %d", len(files), len(b.Files))
		}
		for p, data := range b.Files {
			if !bytes.Equal(files[p], data) {
				t.Errorf("%s: fetched %d bytes that differ from the embedded %d", p, len(files[p]), len(data))
			}
		}
		// What Rancher's UI then loads: /v1/uiplugins/<name>/<version>/plugin/<name>-<version>.umd.min.js,
		// a UMD script defining window["<name>-<version>"].
		script := files["plugin/leasetune-"+b.Version+".umd.min.js"]
		if script == nil || !bytes.Contains(script, []byte(`["leasetune-`+b.Version+`"]`)) {
			t.Fatalf("the main script is missing or does not define window[\"leasetune-%s\"]", b.Version)
		}
		if b.ScriptURL() != "/v1/uiplugins/leasetune/"+b.Version+"/plugin/leasetune-"+b.Version+".umd.min.js" {
			t.Errorf("ScriptURL %s", b.ScriptURL())
		}
	})

	t.Run("another version is not served", func(t *testing.T) {
		resp, err := http.Get("http://" + s.uiAddr + "/uiplugin/leasetune/9.9.9/plugin/package.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another version: %s, want 404", resp.Status)
		}
	})

	t.Run("a hand edit stays: nothing in leasetune keeps the UIPlugin", func(t *testing.T) {
		patch := `{"spec":{"plugin":{"endpoint":"http://elsewhere.example"}}}`
		if _, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Patch(context.Background(), "leasetune",
			types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		rv := getUIPlugin(t).GetResourceVersion()
		if !framework.Consistently(t, "no write of the UIPlugin", framework.ConsistentlyMin, func() bool {
			u := getUIPlugin(t)
			return u != nil && u.GetResourceVersion() == rv
		}) {
			t.FailNow()
		}
	})

	t.Run("cleanup leaves the chart's UIPlugin to helm uninstall", func(t *testing.T) {
		s.stop(t)
		bin := buildBinary(t)
		kc, err := cp.Kubeconfig(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{}, {"--yes", "--force"}} {
			out, err := exec.Command(bin, append([]string{"cleanup", "--kubeconfig", kc, "--namespace", s.ns, "--fleet-namespace", s.fleetNS}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("cleanup %v: %v\n%s", args, err, out)
			}
			if strings.Contains(string(out), "UIPlugin") {
				t.Errorf("cleanup %v speaks of the UIPlugin:\n%s", args, out)
			}
			if getUIPlugin(t) == nil {
				t.Fatalf("cleanup %v deleted the chart's UIPlugin", args)
			}
		}
	})
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// buildBinary builds bin/leasetune's command into a temporary folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := framework.BuildLeasetune(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
