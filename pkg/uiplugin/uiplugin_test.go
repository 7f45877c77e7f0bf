package uiplugin

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
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

// TestChartFileCurrent fails when charts/leasetune/uiplugin.json, which
// the chart's UIPlugin is rendered from, is not what the embedded bundle
// says (its version, its package.json's rancher annotations, its hash):
// the chart would then point Rancher at a version this binary does not
// serve, or claim other Rancher versions than the bundle does.
func TestChartFileCurrent(t *testing.T) {
	b, err := Embedded()
	if err != nil {
		t.Fatalf("the embedded bundle: %v (run make ui)", err)
	}
	want, err := EncodeChart(b.Chart())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", ChartFile)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run go run ./hack/uiplugin)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the embedded bundle says: run `go run ./hack/uiplugin` (make ui does) from the repository root and commit it\nhave:\n%s\nwant:\n%s", ChartFile, got, want)
	}
}

// TestChartCarriesTheBundle: the chart's metadata are the package.json's
// rancher annotations and the bundle's hash, and its name and version are
// the bundle's.
func TestChartCarriesTheBundle(t *testing.T) {
	b := testBundle(t)
	c := b.Chart()
	if c.Name != "leasetune" || c.Version != "0.1.0" {
		t.Errorf("name %q version %q", c.Name, c.Version)
	}
	want := map[string]string{"catalog.cattle.io/ui-extensions-version": ">= 3.0.0 < 4.0.0", BundleHashKey: b.SHA256}
	if len(c.Metadata) != len(want) {
		t.Errorf("metadata %v, want %v", c.Metadata, want)
	}
	for k, v := range want {
		if c.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, c.Metadata[k], v)
		}
	}
	data, err := EncodeChart(c)
	if err != nil || !bytes.HasSuffix(data, []byte("}\n")) || bytes.Contains(data, []byte(`\u003e`)) {
		t.Errorf("encoded: %v %s", err, data)
	}
}
