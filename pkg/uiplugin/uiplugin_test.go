package uiplugin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func testBundle(t *testing.T) *Bundle {
	t.Helper()
	b, err := Load(fstest.MapFS{
		"manifest.json":                     {Data: []byte(`{"name":"leasetune","version":"0.1.0","main":"leasetune-0.1.0.umd.min.js","annotations":{"catalog.cattle.io/ui-extensions-version":">= 3.0.0 < 4.0.0"}}`)},
		"plugin/package.json":               {Data: []byte(`{"name":"leasetune","version":"0.1.0"}`)},
		"plugin/leasetune-0.1.0.umd.min.js": {Data: []byte(`window["leasetune-0.1.0"]={}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEmbeddedBundle(t *testing.T) {
	b, err := Embedded()
	if err != nil {
		t.Fatalf("the embedded bundle: %v (run make ui)", err)
	}
	if b.Name != "leasetune" || b.Annotations["catalog.cattle.io/ui-extensions-version"] == "" || b.Annotations["catalog.cattle.io/rancher-version"] == "" {
		t.Errorf("manifest %+v", b.Manifest)
	}
	if _, ok := b.Files["plugin/"+b.Main]; !ok {
		t.Errorf("no %s", b.Main)
	}
}

func TestLoadRefusesAnIncompleteBundle(t *testing.T) {
	for name, fs := range map[string]fstest.MapFS{
		"no manifest":      {"plugin/package.json": {Data: []byte(`{}`)}},
		"no main script":   {"manifest.json": {Data: []byte(`{"name":"a","version":"1.0.0","main":"a-1.0.0.umd.min.js"}`)}, "plugin/package.json": {Data: []byte(`{"version":"1.0.0"}`)}},
		"version mismatch": {"manifest.json": {Data: []byte(`{"name":"a","version":"1.0.0","main":"m.js"}`)}, "plugin/package.json": {Data: []byte(`{"version":"1.0.1"}`)}, "plugin/m.js": {}},
	} {
		if _, err := Load(fs); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestHandlerServesRanchersLayout(t *testing.T) {
	b := testBundle(t)
	srv := httptest.NewServer(Handler(b))
	defer srv.Close()
	get := func(p string) (int, string, string) {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header.Get("Content-Type")
	}
	if code, body, _ := get("/uiplugin/leasetune/0.1.0/files.txt"); code != 200 || body != "plugin/leasetune-0.1.0.umd.min.js\nplugin/package.json\n" {
		t.Errorf("files.txt: %d %q", code, body)
	}
	if code, body, ct := get("/uiplugin/leasetune/0.1.0/plugin/leasetune-0.1.0.umd.min.js"); code != 200 || !strings.Contains(body, "leasetune-0.1.0") || !strings.Contains(ct, "javascript") {
		t.Errorf("script: %d %q %s", code, body, ct)
	}
	for _, p := range []string{"/uiplugin/leasetune/0.2.0/files.txt", "/uiplugin/leasetune/0.1.0/manifest.json", "/uiplugin/leasetune/0.1.0/plugin/../manifest.json", "/"} {
		if code, _, _ := get(p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	resp, _ := http.Post(srv.URL+"/uiplugin/leasetune/0.1.0/files.txt", "text/plain", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestDiffersOnOwnedFieldsOnly(t *testing.T) {
	b := testBundle(t)
	want := Desired(b, "http://x/uiplugin/leasetune/0.1.0", map[string]string{APIProxyKey: "/p"})
	if _, d := Differs(nil, want); !d {
		t.Error("absent does not differ")
	}
	live := want.DeepCopy()
	if f, d := Differs(live, want); d {
		t.Errorf("itself differs at %s", f)
	}
	// What others own may change: status, another label, another metadata key, noCache.
	_ = unstructured.SetNestedField(live.Object, "cached", "status", "cacheState")
	_ = unstructured.SetNestedField(live.Object, true, "spec", "plugin", "noCache")
	_ = unstructured.SetNestedField(live.Object, "v", "spec", "plugin", "metadata", "other")
	live.SetLabels(map[string]string{ManagedByLabel: ManagedByValue, "app.kubernetes.io/name": "leasetune", "x": "y"})
	if f, d := Differs(live, want); d {
		t.Errorf("others' fields count: %s", f)
	}
	for field, path := range map[string][]string{"spec.plugin.endpoint": {"spec", "plugin", "endpoint"}, "spec.plugin.version": {"spec", "plugin", "version"},
		"spec.plugin.metadata." + BundleHashKey: {"spec", "plugin", "metadata", BundleHashKey}} {
		l := want.DeepCopy()
		_ = unstructured.SetNestedField(l.Object, "changed", path...)
		if f, d := Differs(l, want); !d || f != field {
			t.Errorf("%s changed: %q %v", field, f, d)
		}
	}
}
