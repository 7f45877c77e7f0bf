//go:build upstream

package rancher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/election"
	itfw "leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// dashboardResult is what ui/test/browser/rancher.js saw.
type dashboardResult struct {
	Steps       []string `json:"steps"`
	Heading     string   `json:"heading"`
	PageUnread  bool     `json:"pageUnread"`
	SettingsNav []string `json:"settingsNav"`
	Banners     []string `json:"banners"`
	InEffect    []string `json:"inEffect"`
	ClientError string   `json:"clientError"`
	Saved       string   `json:"saved"`
	ServerError string   `json:"serverError"`
	Error       string   `json:"error"`
	URL         string   `json:"url"`
	BodyText    string   `json:"bodyText"`
	Console     []string `json:"console"`
	Pending     []string `json:"pendingRequests"`
}

// Test08Dashboard is case 7: the page in Rancher's real dashboard
// (@rancher/shell 3.0.8 built as rancher/dashboard builds it,
// scripts/dashboard.sh, and served by the real Rancher from disk), in
// headless Chromium: log in on Rancher's login page as the admin, open
// Global Settings, where the dashboard has loaded leasetune's extension
// from its UIPlugin (case 6), follow Leader election, type a value the
// page refuses, save a valid fleet-agent triple (it must reach
// fleet-agentmanagement), and see leasetune's webhook refuse a value.
// The screenshots are in the test output folder (LEASETUNE_UPSTREAM_KEEP
// keeps it).
func Test08Dashboard(t *testing.T) {
	if in.Bin.Dashboard == "" {
		t.Fatal("Rancher's dashboard is not built: scripts/dashboard.sh (make test-upstream runs it)")
	}
	root, err := itfw.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chromium, err := exec.Command("bash", filepath.Join(root, "scripts/chromium.sh")).Output()
	if err != nil {
		t.Fatalf("no chromium (scripts/chromium.sh): %v", err)
	}
	ctx := context.Background()
	// Rancher's first-login page would come first (shell
	// config/router/navigation-guards/attempt-first-login.js).
	for name, value := range map[string]string{"first-login": "false", "eula-agreed": time.Now().UTC().Format(time.RFC3339)} {
		if code, body, err := in.Admin.Do(ctx, http.MethodPut, "/v3/settings/"+name, map[string]string{"value": value}); err != nil || code != http.StatusOK {
			t.Fatalf("PUT /v3/settings/%s: %d %v %s", name, code, err, body)
		}
	}
	cur := in.SettingsTriple(t, "fleet-agent-leader-election", election.FleetDefaults)
	want := election.Timings{LeaseDuration: cur.LeaseDuration + 10*time.Second, RenewDeadline: cur.RenewDeadline + 5*time.Second, RetryPeriod: cur.RetryPeriod}
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(in.Dir, "dashboard")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "node", filepath.Join(root, "ui/test/browser/rancher.js"))
	cmd.Dir = filepath.Join(root, "ui")
	cmd.Env = append(os.Environ(), "LT_RANCHER="+in.Rancher.URL(), "LT_USER=admin", "LT_PASSWORD="+framework.RancherPassword,
		"CHROMIUM="+strings.TrimSpace(string(chromium)), "LT_OUT="+out,
		"LT_TRIPLE="+want.LeaseDuration.String()+"/"+want.RenewDeadline.String()+"/"+want.RetryPeriod.String(),
		"LT_REFUSED="+want.RenewDeadline.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("rancher.js: %v\n%s", err, &stderr)
	}
	var r dashboardResult
	if err := json.Unmarshal(bytes.TrimSpace(raw), &r); err != nil {
		t.Fatalf("rancher.js printed %q: %v\n%s", raw, err, &stderr)
	}
	t.Logf("screenshots in %s; steps %v; heading %q; page banners %q; in effect %q; client error %q; saved %q; server error %q",
		out, r.Steps, r.Heading, r.Banners, r.InEffect, r.ClientError, r.Saved, r.ServerError)
	if r.Error != "" {
		t.Fatalf("in the dashboard at %s: %s\npage text: %s\nrequests without an answer:\n  %s\nconsole (last lines):\n  %s", r.URL, r.Error, r.BodyText,
			strings.Join(r.Pending, "\n  "), strings.Join(r.Console, "\n  "))
	}
	t.Run("the-dashboard-loads-the-extension", func(t *testing.T) {
		for _, s := range []string{"logged in", "saw Leader election in Global Settings", "opened the page"} {
			if !contains(r.Steps, s) {
				t.Errorf("step %q not reached: %v", s, r.Steps)
			}
		}
		if r.Heading != "Leader election" {
			t.Errorf("the page's heading is %q, want Leader election", r.Heading)
		}
	})
	t.Run("the-page-saves-and-shows-the-webhooks-refusal", func(t *testing.T) {
		if r.PageUnread {
			// What the page shows beside the real Rancher today: it reads
			// leasetune's API through Rancher's proxy of the local cluster
			// to the leasetune-webhook Service with a token it mints, and
			// the kube-apiserver proxies a Service only to the addresses of
			// Pod objects (k8s.io/kubernetes v1.32.13 pkg/registry/core/
			// service/storage/storage.go ResourceLocation, isValidAddress).
			// Issue 25 replaces that data path (no minted token, no
			// services/proxy); this step is its test.
			t.Skipf("SKIPPED until the page's data path of issue 25: the page could not read leasetune's data: %q (screenshot %s)",
				r.Banners, filepath.Join(out, "leader-election.png"))
		}
		if !strings.Contains(r.ServerError, `admission webhook "settings.leasetune.io" denied the request`) {
			t.Errorf("the refusal the page shows is not the webhook's: %q", r.ServerError)
		}
		framework.Within(t, 2*time.Minute, "the saved triple on fleet-agentmanagement", func() bool {
			got, found := in.ContainerTriple(t, framework.FleetNamespace, "fleet-controller", "fleet-agentmanagement", election.FleetAgentPrefix)
			return found && got == want
		})
	})
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
