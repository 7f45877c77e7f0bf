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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/election"
	itfw "leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/upstream/framework"
	"leasetune.io/leasetune/tests/upstream/releases"
)

// dashboardResult is what ui/test/browser/rancher.js saw.
type dashboardResult struct {
	Steps                   []string `json:"steps"`
	Heading                 string   `json:"heading"`
	SettingsNav             []string `json:"settingsNav"`
	Banners                 []string `json:"banners"`
	Notes                   []string `json:"notes"`
	InEffect                []string `json:"inEffect"`
	Clusters                string   `json:"clusters"`
	Editable                []bool   `json:"editable"`
	ClientError             string   `json:"clientError"`
	SaveDisabledWhenInvalid bool     `json:"saveDisabledWhenInvalid"`
	Previews                []string `json:"previews"`
	Saved                   string   `json:"saved"`
	ServerError             string   `json:"serverError"`
	LoggedOut               bool     `json:"loggedOut"`
	browserSession
}

// browserSession is what every script on ui/test/browser/session.js
// reports besides its own findings: the requests it saw and the ones it
// aborted, and where and why it stopped if a step failed.
type browserSession struct {
	Seen struct {
		Requests, Websockets, Violations []string
	} `json:"seen"`
	Error    string   `json:"error"`
	URL      string   `json:"url"`
	BodyText string   `json:"bodyText"`
	Console  []string `json:"console"`
	Pending  []string `json:"pendingRequests"`
}

// judge fails t for every request the page must never make (first: an
// aborted request may also be why a step failed), and stops it with the
// page's URL, text, unanswered requests and console when a step failed.
func (s browserSession) judge(t *testing.T) {
	t.Helper()
	for _, v := range s.Seen.Violations {
		t.Errorf("a request the dashboard must never make: %s", v)
	}
	if s.Error != "" {
		t.Fatalf("in the dashboard at %s: %s\npage text: %s\nrequests without an answer:\n  %s\nconsole (last lines):\n  %s", s.URL, s.Error, s.BodyText,
			strings.Join(s.Pending, "\n  "), strings.Join(s.Console, "\n  "))
	}
}

// Test08Dashboard is case 7: the page in Rancher's real dashboard
// (@rancher/shell 3.0.5 built as rancher/dashboard builds it,
// scripts/dashboard.sh, and served by the real Rancher from disk), in
// headless Chromium: log in on Rancher's login page as the admin, open
// Global Settings, where the dashboard has loaded leasetune's extension
// from its UIPlugin (case 6), follow Leader election, which reads the
// Settings and leasetune's ElectionStatus through the dashboard's store
// (Rancher's steve, as the admin), type a value the page refuses, save a
// valid fleet-agent triple (it must reach fleet-agentmanagement), and see
// leasetune's webhook refuse a triple that would break the agent of a
// fleet Cluster whose own spec.agentEnvVars set a lease (made here for
// it). Every request of the browser is intercepted: no Rancher token
// minted, no proxy path, no credential header of the page's own. The
// screenshots are in the test output folder (LEASETUNE_UPSTREAM_KEEP
// keeps it).
func Test08Dashboard(t *testing.T) {
	framework.Need(t, in)
	ctx := context.Background()
	// The triples: want is valid; refused only moves the renew deadline up
	// to the lease of a fleet Cluster's own CATTLE_ELECTION_LEASE_DURATION,
	// so its agent would run lease == renew deadline, which client-go
	// refuses: only the webhook's judgement of every agent can see that.
	cur := in.SettingsTriple(t, "fleet-agent-leader-election", election.FleetDefaults)
	want := election.Timings{LeaseDuration: cur.LeaseDuration + 10*time.Second, RenewDeadline: cur.RenewDeadline + 5*time.Second, RetryPeriod: cur.RetryPeriod}
	own := want.RenewDeadline + time.Second
	refused := election.Timings{LeaseDuration: want.LeaseDuration, RenewDeadline: own, RetryPeriod: want.RetryPeriod}
	for _, c := range []struct {
		what  string
		t     election.Timings
		valid bool
	}{
		{"the valid triple", want, true}, {"the refused triple on its own", refused, true},
		{"the cluster's agent now", cur.With(election.LeaseDuration, own), true},
		{"the cluster's agent with the valid triple", want.With(election.LeaseDuration, own), true},
		{"the cluster's agent with the refused triple", refused.With(election.LeaseDuration, own), false},
	} {
		if err := c.t.Validate(); (err == nil) != c.valid {
			t.Fatalf("%s %s: valid %v, want %v (%v): the test's premise is gone", c.what, c.t, err == nil, c.valid, err)
		}
	}
	ns := "lt-dashboard"
	if _, err := in.CP.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.CP.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	edge := kit.FleetCluster(ns, "own-lease", kit.WithEnv(kit.Env("CATTLE_ELECTION_LEASE_DURATION="+election.FormatDuration(own))...))
	if _, err := in.Dyn.Resource(framework.FleetClusters).Namespace(ns).Create(ctx, edge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Dyn.Resource(framework.FleetClusters).Namespace(ns).Delete(context.Background(), edge.GetName(), metav1.DeleteOptions{})
	})
	slashed := func(t election.Timings) string {
		return t.LeaseDuration.String() + "/" + t.RenewDeadline.String() + "/" + t.RetryPeriod.String()
	}
	out, raw := dashboardScript(t, "rancher.js", "dashboard", 8*time.Minute,
		"LT_INVALID=999ms", "LT_TRIPLE="+slashed(want), "LT_REFUSED="+slashed(refused))
	var r dashboardResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("rancher.js printed %q: %v", raw, err)
	}
	t.Logf("screenshots in %s; steps %v; heading %q; page banners %q, notes %q; in effect %q; clusters %q; client error %q; saved %q; server error %q",
		out, r.Steps, r.Heading, r.Banners, r.Notes, r.InEffect, r.Clusters, r.ClientError, r.Saved, r.ServerError)
	r.judge(t)
	shot := filepath.Join(out, "leader-election.png")
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Errorf("the page's screenshot %s: %v", shot, err)
	} else {
		t.Logf("the page in @rancher/shell %s beside Rancher %s: %s", in.Opts.Suite.Shell, in.RancherVersion(), shot)
		newest, _ := releases.Newest(in.Opts.Suite.Package)
		if os.Getenv("LEASETUNE_UPDATE_SCREENSHOT") == "1" && newest.Name == in.Opts.Suite.Name {
			// docs/ui.md shows the page as users of the newest Rancher see it.
			root, _ := itfw.RepoRoot()
			data, _ := os.ReadFile(shot)
			if err := os.WriteFile(filepath.Join(root, "docs/ui-leader-election.png"), data, 0o644); err != nil {
				t.Error(err)
			}
		}
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
	t.Run("the-page-reads-through-the-dashboards-store", func(t *testing.T) {
		// The admin may update every Setting: no read-only banner, no
		// Setting or ElectionStatus unread; what is in effect, the clusters.
		if len(r.Banners) > 0 {
			t.Errorf("the admin's page says %q", r.Banners)
		}
		if !contains(r.InEffect, "fleet-agent: In effect: "+triple(cur)) {
			t.Errorf("in effect %q, want the fleet-agent's %s", r.InEffect, triple(cur))
		}
		if !strings.Contains(r.Clusters, "fleet Cluster(s) listed") || len(r.Editable) != 3 || !r.Editable[0] || !r.Editable[1] || !r.Editable[2] {
			t.Errorf("clusters %q, fleet-agent inputs editable %v", r.Clusters, r.Editable)
		}
		// Read once, then followed through the store's watch: one GET of the
		// ElectionStatus for the page opened once.
		gets := 0
		for _, q := range r.Seen.Requests {
			if strings.HasPrefix(q, "GET ") && strings.Contains(q, "/v1/leasetune.io.electionstatuses/leasetune") {
				gets++
			}
		}
		if gets != 1 {
			t.Errorf("%d GETs of the ElectionStatus, want 1 (the page's find; then the watch)", gets)
		}
	})
	t.Run("the-page-saves-and-shows-the-webhooks-refusal", func(t *testing.T) {
		if !strings.Contains(r.ClientError, "retryPeriod 999ms must be at least 1s") || !r.SaveDisabledWhenInvalid {
			t.Errorf("the page on 999ms: %q (save disabled %v)", r.ClientError, r.SaveDisabledWhenInvalid)
		}
		if !strings.HasPrefix(r.Saved, "saved: ") || !strings.Contains(r.Saved, triple(want)) {
			t.Errorf("the save: %q", r.Saved)
		}
		for _, w := range []string{"refused: ", `admission webhook "settings.leasetune.io" denied the request`, ns + "/own-lease",
			"CATTLE_ELECTION_LEASE_DURATION=" + election.FormatDuration(own), "Nothing was written."} {
			if !strings.Contains(r.ServerError, w) {
				t.Errorf("the refusal the page shows %q lacks %q", r.ServerError, w)
			}
		}
		if r.LoggedOut {
			t.Error("the refusal logged the admin out")
		}
		if got := in.SettingsTriple(t, "fleet-agent-leader-election", election.FleetDefaults); got != want {
			t.Errorf("the Settings hold %s, want the saved %s (the refused write changed nothing)", got, want)
		}
		framework.Within(t, 2*time.Minute, "the saved triple on fleet-agentmanagement", func() bool {
			got, found := in.ContainerTriple(t, framework.FleetNamespace, "fleet-controller", "fleet-agentmanagement", election.FleetAgentPrefix)
			return found && got == want
		})
	})
}

// dashboardScript runs the script ui/test/browser/<script> (./session.js:
// Debian's chromium through Rancher's real dashboard, logged in as the
// admin on Rancher's login page) with env added to its environment, its
// screenshots in in.Dir/<folder>, and returns that folder and the JSON it
// printed. Rancher's first-login page would come first (shell
// config/router/navigation-guards/attempt-first-login.js): the admin's
// first-login and eula-agreed Settings are set before. It fails t when
// the dashboard is not built, there is no chromium or the script does not
// end within limit.
func dashboardScript(t *testing.T, script, folder string, limit time.Duration, env ...string) (string, []byte) {
	t.Helper()
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
	// puppeteer-core, from ui/package-lock.json (a fresh clone has no
	// ui/node_modules).
	if out, err := exec.Command("bash", filepath.Join(root, "scripts/ui.sh"), "deps").CombinedOutput(); err != nil {
		t.Fatalf("scripts/ui.sh deps (ui/node_modules, for puppeteer-core): %v\n%s", err, out)
	}
	ctx := context.Background()
	for name, value := range map[string]string{"first-login": "false", "eula-agreed": time.Now().UTC().Format(time.RFC3339)} {
		if code, body, err := in.Admin.Do(ctx, http.MethodPut, "/v3/settings/"+name, map[string]string{"value": value}); err != nil || code != http.StatusOK {
			t.Fatalf("PUT /v3/settings/%s: %d %v %s", name, code, err, body)
		}
	}
	out := filepath.Join(in.Dir, folder)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, "node", filepath.Join(root, "ui/test/browser", script))
	cmd.Dir = filepath.Join(root, "ui")
	cmd.Env = append(append(os.Environ(), "LT_RANCHER="+in.Rancher.URL(), "LT_USER=admin", "LT_PASSWORD="+framework.RancherPassword,
		"CHROMIUM="+strings.TrimSpace(string(chromium)), "LT_OUT="+out), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, &stderr)
	}
	return out, bytes.TrimSpace(raw)
}

// triple formats t as the page shows a triple: "1m0s / 30s / 15s".
func triple(t election.Timings) string {
	return election.FormatDuration(t.LeaseDuration) + " / " + election.FormatDuration(t.RenewDeadline) + " / " + election.FormatDuration(t.RetryPeriod)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
