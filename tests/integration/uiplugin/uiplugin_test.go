package uiplugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/uiplugin"
	"leasetune.io/leasetune/tests/integration/framework"
)

// TestUIPluginLifecycle follows leasetune's UIPlugin from a cluster without
// Rancher to one with it: nothing is made while the UIPlugin CRD is
// missing; once it is there the UIPlugin names the endpoint the bundle is
// served at, with Rancher's metadata, and Rancher's own fetch of that
// endpoint gets the embedded bundle; at rest nothing is written; a hand
// edit of an owned field is taken back while other fields (Rancher's
// noCache, another manager's metadata) stay; a deleted UIPlugin comes
// back; cleanup deletes it.
func TestUIPluginLifecycle(t *testing.T) {
	removeUIPluginCRD(t)
	b, err := uiplugin.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOptions{})
	endpoint := "http://" + s.uiAddr + b.PathPrefix()

	// The bundle is served whether or not Rancher is there.
	resp, err := http.Get(endpoint + "/files.txt")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != string(b.FilesTxt()) {
		t.Fatalf("files.txt: %s %q, want %q", resp.Status, body, b.FilesTxt())
	}

	t.Run("no UIPlugin without its CRD", func(t *testing.T) {
		// The reconciler watches the CRD by name and does nothing else: the
		// kind stays unserved (nothing was installed behind its back).
		if !framework.Consistently(t, "no UIPlugin kind", framework.ConsistentlyMin, func() bool {
			_, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Get(context.Background(), "leasetune", metav1.GetOptions{})
			return err != nil && isKindMissing(err)
		}) {
			t.FailNow()
		}
	})

	ensureNamespace(t, uiplugin.Namespace)
	installUIPluginCRD(t)
	var live *unstructured.Unstructured
	framework.Eventually(t, "UIPlugin created once the CRD exists", func() bool {
		live = getUIPlugin(t)
		return live != nil
	})

	t.Run("endpoint, version and Rancher's metadata", func(t *testing.T) {
		plugin, _, _ := unstructured.NestedMap(live.Object, "spec", "plugin")
		want := map[string]interface{}{"name": "leasetune", "version": b.Version, "endpoint": endpoint}
		for k, v := range want {
			if plugin[k] != v {
				t.Errorf("spec.plugin.%s = %v, want %v", k, plugin[k], v)
			}
		}
		meta, _ := plugin["metadata"].(map[string]interface{})
		// Mandatory from Rancher 2.10: without it Rancher's UI does not load
		// the extension (shell/config/uiplugins.js shouldNotLoadPlugin at
		// shell-pkg-v3.0.8: plugins.error.apiAnnotationMissing).
		if meta["catalog.cattle.io/ui-extensions-version"] != ">= 3.0.0 < 4.0.0" {
			t.Errorf("catalog.cattle.io/ui-extensions-version = %v", meta["catalog.cattle.io/ui-extensions-version"])
		}
		if meta["catalog.cattle.io/rancher-version"] != ">= 2.10.0" {
			t.Errorf("catalog.cattle.io/rancher-version = %v", meta["catalog.cattle.io/rancher-version"])
		}
		// With this key Rancher's UI skips the extension (shouldNotLoadPlugin
		// returns true for UI_PLUGIN_LABELS.CATALOG).
		if _, ok := meta["catalog.cattle.io/ui-extensions-catalog"]; ok {
			t.Error("metadata carries catalog.cattle.io/ui-extensions-catalog: Rancher's UI would not load the extension")
		}
		if meta[uiplugin.BundleHashKey] != b.SHA256 {
			t.Errorf("%s = %v, want %s", uiplugin.BundleHashKey, meta[uiplugin.BundleHashKey], b.SHA256)
		}
		if want := "/k8s/clusters/local/api/v1/namespaces/" + s.ns + "/services/https:leasetune-webhook:443/proxy"; meta[uiplugin.APIProxyKey] != want {
			t.Errorf("%s = %v, want %s", uiplugin.APIProxyKey, meta[uiplugin.APIProxyKey], want)
		}
		if live.GetName() != plugin["name"] {
			t.Errorf("metadata.name %s differs from spec.plugin.name (Rancher's index is keyed by the one, readiness by the other)", live.GetName())
		}
		if _, set := plugin["noCache"]; set && plugin["noCache"] != false {
			t.Errorf("noCache = %v: leasetune must not switch Rancher's cache off", plugin["noCache"])
		}
	})

	t.Run("Rancher's cache fetches the bundle at the endpoint the UIPlugin names", func(t *testing.T) {
		plugin, _, _ := unstructured.NestedMap(live.Object, "spec", "plugin")
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

	t.Run("no write at rest, nor after Rancher's status update", func(t *testing.T) {
		// Rancher's controller writes the status (controller.go OnPluginChange: UpdateStatus).
		u := getUIPlugin(t)
		_ = unstructured.SetNestedField(u.Object, "cached", "status", "cacheState")
		_ = unstructured.SetNestedField(u.Object, true, "status", "ready")
		_ = unstructured.SetNestedField(u.Object, int64(u.GetGeneration()), "status", "observedGeneration")
		if _, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rv := getUIPlugin(t).GetResourceVersion()
		if !framework.Consistently(t, "resourceVersion unchanged", framework.ConsistentlyMin, func() bool { return getUIPlugin(t).GetResourceVersion() == rv }) {
			t.FailNow()
		}
	})

	t.Run("owned fields are taken back, others stay", func(t *testing.T) {
		patch := `{"metadata":{"annotations":{"note":"x"}},"spec":{"plugin":{"endpoint":"http://elsewhere.example","noCache":true,"metadata":{"example.com/owner":"someone"}}}}`
		if _, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Patch(context.Background(), "leasetune",
			types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, "endpoint put back", func() bool {
			e, _, _ := unstructured.NestedString(getUIPlugin(t).Object, "spec", "plugin", "endpoint")
			return e == endpoint
		})
		u := getUIPlugin(t)
		if nc, _, _ := unstructured.NestedBool(u.Object, "spec", "plugin", "noCache"); !nc {
			t.Error("noCache (Rancher's to set) was taken back")
		}
		if o, _, _ := unstructured.NestedString(u.Object, "spec", "plugin", "metadata", "example.com/owner"); o != "someone" {
			t.Error("another manager's metadata key was removed")
		}
		rv := u.GetResourceVersion()
		if !framework.Consistently(t, "no further write", framework.ConsistentlyMin, func() bool { return getUIPlugin(t).GetResourceVersion() == rv }) {
			t.FailNow()
		}
	})

	t.Run("a deleted UIPlugin comes back", func(t *testing.T) {
		deleteUIPlugin(t)
		framework.Eventually(t, "UIPlugin recreated", func() bool { return getUIPlugin(t) != nil })
	})

	t.Run("cleanup removes it", func(t *testing.T) {
		s.stop()
		bin := buildBinary(t)
		dir := t.TempDir()
		kc, err := cp.Kubeconfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "cleanup", "--kubeconfig", kc, "--namespace", s.ns, "--fleet-namespace", s.fleetNS).CombinedOutput()
		if err != nil {
			t.Fatalf("cleanup: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "UIPlugin cattle-ui-plugin-system/leasetune: would be deleted") {
			t.Fatalf("cleanup does not list the UIPlugin:\n%s", out)
		}
		if getUIPlugin(t) == nil {
			t.Fatal("cleanup without --yes deleted the UIPlugin")
		}
		out, err = exec.Command(bin, "cleanup", "--kubeconfig", kc, "--namespace", s.ns, "--fleet-namespace", s.fleetNS, "--yes", "--force").CombinedOutput()
		if err != nil {
			t.Fatalf("cleanup --yes: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "UIPlugin cattle-ui-plugin-system/leasetune: was deleted") || getUIPlugin(t) != nil {
			t.Fatalf("cleanup --yes did not delete the UIPlugin:\n%s", out)
		}
		// One that is not leasetune's (no managed-by label) is left alone.
		foreign := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "catalog.cattle.io/v1", "kind": "UIPlugin",
			"metadata": map[string]interface{}{"name": "leasetune", "namespace": uiplugin.Namespace},
			"spec":     map[string]interface{}{"plugin": map[string]interface{}{"name": "leasetune", "version": "1.0.0", "endpoint": "http://x"}}}}
		if _, err := dyn().Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out, err = exec.Command(bin, "cleanup", "--kubeconfig", kc, "--namespace", s.ns, "--fleet-namespace", s.fleetNS, "--yes", "--force").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "left alone: UIPlugin cattle-ui-plugin-system/leasetune is not leasetune's") || getUIPlugin(t) == nil {
			t.Fatalf("cleanup and a foreign UIPlugin: %v\n%s", err, out)
		}
		deleteUIPlugin(t)
	})
}

// buildBinary builds bin/leasetune's command into a temporary folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leasetune")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/leasetune")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestChartRBACForUIPlugin runs the UIPlugin reconciler with exactly the
// rights of the chart's ClusterRole (impersonating its service account)
// and checks it does its job, that those rights reach no other UIPlugin,
// and that uiPlugin.enabled=false renders none of them.
func TestChartRBACForUIPlugin(t *testing.T) {
	ensureNamespace(t, uiplugin.Namespace)
	installUIPluginCRD(t)
	deleteUIPlugin(t)
	ns := cp.Namespace(t)
	var role *rbacv1.ClusterRole
	for _, doc := range render(t, "namespaceOverride="+ns) {
		var obj metav1.TypeMeta
		_ = utilyaml.Unmarshal(doc, &obj)
		if obj.Kind == "ClusterRole" {
			role = &rbacv1.ClusterRole{}
			if err := utilyaml.Unmarshal(doc, role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole in the chart")
	}
	role.Name = ns + "-leasetune"
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "leasetune", Namespace: ns}}}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":leasetune"}
	saDyn := dynamic.NewForConfigOrDie(sa)
	b, err := uiplugin.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = uiplugin.NewReconciler(uiplugin.Options{Client: saDyn, Bundle: b, Endpoint: "http://leasetune-ui." + ns + ".svc" + b.PathPrefix(),
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done; deleteUIPlugin(t) })
	framework.Eventually(t, "UIPlugin created with the chart's rights", func() bool { return getUIPlugin(t) != nil })

	// Those rights reach no other UIPlugin.
	other := uiplugin.Desired(b, "http://x", nil)
	other.SetName("not-leasetune")
	body, _ := json.Marshal(other.Object)
	_, err = saDyn.Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Patch(context.Background(), "not-leasetune",
		types.MergePatchType, body, metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("patch of another UIPlugin with the chart's rights: %v, want forbidden", err)
	}
	if err := saDyn.Resource(uiplugin.UIPluginGVR).Namespace(uiplugin.Namespace).Delete(context.Background(), "leasetune", metav1.DeleteOptions{}); err == nil ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("delete with the chart's rights: %v, want forbidden (only cleanup, with the user's rights, deletes)", err)
	}

	for _, doc := range render(t, "namespaceOverride="+ns, "uiPlugin.enabled=false") {
		if bytes.Contains(doc, []byte("uiplugins")) || bytes.Contains(doc, []byte("leasetune-ui")) || bytes.Contains(doc, []byte("--ui-addr=:")) {
			t.Fatalf("uiPlugin.enabled=false still renders UIPlugin rights, the UI Service or the bundle server:\n%s", doc)
		}
	}
}
