package manager

import (
	"io"
	"net"
	"net/http"
	"testing"

	"leasetune.io/leasetune/pkg/admission"
	"leasetune.io/leasetune/pkg/settingsapi"
	"leasetune.io/leasetune/pkg/uiplugin"
)

// TestUIServerServesOnlyTheBundle: the plain-HTTP server behind the
// leasetune-ui Service answers the bundle's paths and 404 for everything
// else the process serves elsewhere (the webhook, /v3/settings, health,
// metrics) and for the page API that no longer exists, so that Rancher, or
// anyone allowed services/proxy on that Service, reaches nothing but the
// bundle there.
func TestUIServerServesOnlyTheBundle(t *testing.T) {
	b, err := uiplugin.Embedded()
	if err != nil {
		t.Fatalf("the embedded bundle: %v (run make ui)", err)
	}
	var addr string
	cfg := Config{UI: UIConfig{Addr: "127.0.0.1:0"}, Listen: func(network, a string) (net.Listener, error) {
		ln, err := net.Listen(network, a)
		if err == nil {
			addr = ln.Addr().String()
		}
		return ln, err
	}}
	stop, err := serveUI(cfg, newHealth(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	for _, p := range []string{b.PathPrefix() + "/files.txt", b.PathPrefix() + "/plugin/package.json", b.PathPrefix() + "/plugin/" + b.Main} {
		if code, _ := get(p); code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, code)
		}
	}
	if code, body := get(b.PathPrefix() + "/files.txt"); code != http.StatusOK || body != string(b.FilesTxt()) {
		t.Errorf("files.txt: %d %q, want %q", code, body, b.FilesTxt())
	}
	for _, p := range []string{
		settingsapi.Prefix, settingsapi.Prefix + "/fleet-leader-election-retry-period",
		admission.SettingsPath, admission.OverridesPath,
		"/metrics", "/healthz", "/readyz",
		"/leasetune/v1/overview", "/leasetune/v1/plan",
		"/", "/uiplugin/", "/uiplugin/leasetune/", "/uiplugin/leasetune/9.9.9/files.txt",
	} {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("GET %s on the UI server: %d, want 404", p, code)
		}
	}
}
