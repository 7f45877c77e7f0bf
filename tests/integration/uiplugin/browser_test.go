package uiplugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// standIn is a stand-in for Rancher's server and shell, for the browser
// (Rancher's real dashboard needs a whole Rancher: tests/upstream runs
// that one). Over HTTPS, as Rancher is, it does what Rancher does for one
// extension and one page:
//   - fetches the bundle from the endpoint the UIPlugin names, exactly as
//     Rancher's extension cache does (rancherCache: fscache.go), and serves
//     it at /v1/uiplugins/<name>/<version>/<path> (pkg/api/steve/catalog/
//     plugin.go pluginHandler), with the index at /v1/uiplugins (index.go:
//     the UIPlugin's spec.plugin, with cacheState and ready);
//   - serves the rest of /v1 with steve, the double of Rancher's steve API
//     (tests/integration/framework/steve.go), which acts on the
//     kube-apiserver as the user of the session cookie;
//   - serves the shell's part (ui/test/host: the store, the extension
//     loader, the Global Settings menu, the router), Vue 3.2.47, Vuex, the
//     message formatter and the HTML sanitizer the shell bundles, and
//     Rancher's CSS and translations (ui/test/host/assets.js), with the
//     fonts they name.
//
// Nothing else is served: no proxy path, no /v3, no leasetune API.
func standIn(t *testing.T, steve *framework.Steve) *httptest.Server {
	t.Helper()
	live := getUIPlugin(t)
	plugin, _, _ := unstructured.NestedMap(live.Object, "spec", "plugin")
	name, version, endpoint := plugin["name"].(string), plugin["version"].(string), plugin["endpoint"].(string)
	files, err := rancherCache(endpoint, version)
	if err != nil {
		t.Fatalf("Rancher's cache would fail: %v", err)
	}
	assets := t.TempDir()
	cmd := exec.Command("node", filepath.Join(root, "ui/test/host/assets.js"), assets)
	cmd.Dir = filepath.Join(root, "ui")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ui/test/host/assets.js (Rancher's CSS and translations): %v\n%s", err, out)
	}
	modules := filepath.Join(root, "ui/node_modules")
	static := map[string]string{
		"/":                                 filepath.Join(root, "ui/test/host/index.html"),
		"/host.js":                          filepath.Join(root, "ui/test/host/host.js"),
		"/store.js":                         filepath.Join(root, "ui/test/host/store.js"),
		"/rancher.css":                      filepath.Join(assets, "rancher.css"),
		"/shell-en-us.json":                 filepath.Join(assets, "shell-en-us.json"),
		"/vendor/vue.global.prod.js":        filepath.Join(modules, "vue/dist/vue.global.prod.js"),
		"/vendor/vuex.global.prod.js":       filepath.Join(modules, "vuex/dist/vuex.global.prod.js"),
		"/vendor/intl-messageformat.min.js": filepath.Join(modules, "intl-messageformat/dist/umd/intl-messageformat.min.js"),
		"/vendor/purify.min.js":             filepath.Join(modules, "dompurify/dist/purify.min.js"),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f, ok := static[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, f)
	})
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// The fonts of Rancher's CSS (the shell's and @rancher/icons).
	mux.Handle("/node_modules/@rancher/", http.StripPrefix("/node_modules/", http.FileServer(http.Dir(modules))))
	mux.HandleFunc("/v1/uiplugins", func(w http.ResponseWriter, r *http.Request) {
		entry := map[string]interface{}{}
		for k, v := range plugin {
			entry[k] = v
		}
		entry["CacheState"], entry["Ready"] = "cached", true
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]interface{}{"entries": map[string]interface{}{name: entry}})
	})
	prefix := "/v1/uiplugins/" + name + "/" + version + "/"
	mux.HandleFunc("/v1/uiplugins/", func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		data, found := files[rest]
		if !ok || !found {
			http.Error(w, "plugin does not exist in index", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(rest)))
		_, _ = w.Write(data)
	})
	mux.Handle("/v1/", steve)
	srv := httptest.NewUnstartedServer(mux)
	// Chromium first tries the test certificate and gives up on it before
	// it accepts it (acceptInsecureCerts): not worth a log line each.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// pageView is what drive.js read of the page.
type pageView struct {
	Heading, ReadOnly, Status, Channel string
	Errors                             []string
	Cards                              []struct {
		Component, Title, InEffect, Pending, Refused string
		Save, ChartDrawn                             bool
		Fields                                       []struct {
			Field, Value, Meta, Source, Reason string
			Disabled                           bool
		}
	}
	Clusters    string
	ClusterRows []string
}

// card is the view's card of component (it fails the test without one).
func (v pageView) card(t *testing.T, component string) int {
	t.Helper()
	for i, c := range v.Cards {
		if c.Component == component {
			return i
		}
	}
	t.Fatalf("no %s card: %+v", component, v.Cards)
	return -1
}

// seen is what the request interception saw (ui/test/browser/intercept.js).
type seen struct {
	Requests, Websockets, Violations []string
}

// action is an action the stand-in store dispatched (window.hostActions).
type action struct {
	Type    string                 `json:"type"`
	Payload map[string]interface{} `json:"payload"`
}

// browserResult is what ui/test/browser/drive.js saw.
type browserResult struct {
	Steps      []string
	Error      string
	HostErrors string
	Nav        []string
	Console    []string
	Seen       map[string]seen
	Editor     struct {
		View, After                      pageView
		Invalid, RefusedPreview, Refusal string
		RefusedWrites, PreviewWrites     []string
		SaveDisabledWhenInvalid          bool
		Preview, Saved, Pending          string
		PreviewChanges                   []string
		PreviewTriples, PreviewTotals    string
		PreviewLocks                     string
		CLIPlan                          *cliPlan
		LoggedOut                        bool
		Actions                          []action
	}
	Viewer struct {
		View   pageView
		Forced struct {
			Status int
			Body   map[string]interface{}
		}
		LoggedOut bool
		Actions   []action
	}
}

// cliPlan is the part of `leasetune plan --output json` (pkg/plan
// Report.JSON) the page's save preview shows.
type cliPlan struct {
	Changes []struct {
		Object, Field, Old, New, Restarts string
	} `json:"changes"`
	Totals struct {
		Rollouts      int     `json:"deploymentRollouts"`
		FleetAgents   int     `json:"fleetAgentRedeploys"`
		ClusterAgents int     `json:"clusterAgentRedeploys"`
		NodePlans     int     `json:"nodePlanClusters"`
		CtrlBefore    float64 `json:"controllerLockRequestsPerHourBefore"`
		Ctrl          float64 `json:"controllerLockRequestsPerHour"`
		AgentsBefore  float64 `json:"agentLockRequestsPerHourBefore"`
		Agents        float64 `json:"agentLockRequestsPerHour"`
		RancherBefore float64 `json:"rancherLockRequestsPerHourBefore"`
		Rancher       float64 `json:"rancherLockRequestsPerHour"`
	} `json:"totals"`
}

// perHour formats n as the page does (ui/pkg/leasetune/format.js perHour:
// rounded, en-US digit groups): "3,600 requests/h".
func perHour(n float64) string {
	d := strconv.FormatInt(int64(math.Round(n)), 10)
	for i := len(d) - 3; i > 0; i -= 3 {
		d = d[:i] + "," + d[i:]
	}
	return d + " requests/h"
}

// triple formats t as the page shows a triple: "1m0s / 30s / 15s".
func triple(t election.Timings) string {
	return election.FormatDuration(t.LeaseDuration) + " / " + election.FormatDuration(t.RenewDeadline) + " / " + election.FormatDuration(t.RetryPeriod)
}

// slashed formats t as drive.js reads a triple: "60s/30s/15s".
func slashed(t election.Timings) string {
	return t.LeaseDuration.String() + "/" + t.RenewDeadline.String() + "/" + t.RetryPeriod.String()
}

// TestBrowser loads the embedded bundle, as Rancher would fetch it from the
// UIPlugin the chart installs, in a headless Chromium (Debian's chromium,
// driven by puppeteer-core) inside the stand-in shell, whose store talks
// to the steve double, which acts on the real kube-apiserver as each user:
// Kubernetes RBAC (the chart's leasetune-edit and leasetune-view roles) and
// leasetune's webhook decide. As the editor it reads the page (the
// Settings, and the ElectionStatus leasetune's leader keeps: in effect,
// the chart, the clusters that differ), types an invalid value and sees the
// message the webhook gives for it, tries a triple only the webhook can
// refuse (it would break a cluster's agent) and sees that refusal as it
// came, previews a valid triple (the page's plan: changes, restarts, lock
// requests, equal to what `leasetune plan --set` prints for the page's
// writes on the same installation at that moment), saves it and sees it pending, then in effect, through
// the store's watch alone (no request after the page's first reads but its
// writes); the Setting objects then hold it. As the viewer the page is
// read-only and says why, and a PUT forced through the page's own path
// answers 403 with the Setting unchanged. Every request of the browser is
// intercepted: no token minted, no proxy path, no header of the page's
// own, no call of a leasetune API. Screenshots go to ui/test-output/browser
// (docs/ui.md's is the real Rancher dashboard's: tests/upstream/rancher).
func TestBrowser(t *testing.T) {
	chromium, err := exec.Command("bash", filepath.Join(root, "scripts/chromium.sh")).Output()
	if err != nil {
		var why string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			why = strings.TrimSpace(string(ee.Stderr))
		}
		kit.SkipUnlessRequired(t, "browser", fmt.Sprintf("SKIPPED: no chromium for the browser test (scripts/chromium.sh: %v: %s); on Debian as root it installs it itself", err, why))
	}
	deps := exec.Command("bash", filepath.Join(root, "scripts/ui.sh"), "deps")
	if out, err := deps.CombinedOutput(); err != nil {
		t.Fatalf("scripts/ui.sh deps (node and ui/node_modules, for puppeteer-core): %v\n%s", err, out)
	}

	// A settle time long enough to see a saved triple pending.
	s := startServer(t, serverOptions{channel: fleet.ChannelAgentManagement, settle: 15 * time.Second,
		env: map[string]string{"CATTLE_RANCHER_LEADER_ELECTION_LEASE_DURATION": "60s"}})
	installChartUIPlugin(t, s.ns, "http://"+s.uiAddr)
	cp.InstallFleet(t, s.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	workspace := cp.Namespace(t)
	fleetCluster(t, workspace, "edge-1")
	fleetCluster(t, workspace, "edge-2", "CATTLE_ELECTION_LEASE_DURATION=35s")
	users := setUpUsers(t, s.ns)
	steve := newSteve(t)
	framework.Eventually(t, "the ElectionStatus with both clusters", func() bool {
		u, err := dyn().Resource(statusGVR).Get(context.Background(), electionstatus.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "agents", "clusters")
		return n == 2
	})
	srv := standIn(t, steve)

	// The triples: one the webhook refuses (edge-2's own 35s lease would
	// run with a 40s renew deadline), one it accepts.
	refused := election.Timings{LeaseDuration: 60 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 15 * time.Second}
	valid := election.Timings{LeaseDuration: 60 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 15 * time.Second}
	const forced = "fleet-agent-leader-election-retry-period"

	out := filepath.Join(root, "ui/test-output/browser")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "ui/test/browser/drive.js"))
	cmd.Dir = filepath.Join(root, "ui")
	cmd.Env = append(os.Environ(), "LT_URL="+srv.URL, "LT_OUT="+out, "CHROMIUM="+strings.TrimSpace(string(chromium)),
		"LT_EDITOR="+login(t, steve, users.editor), "LT_VIEWER="+login(t, steve, users.viewer),
		"LT_INVALID=999ms", "LT_REFUSED="+slashed(refused), "LT_VALID="+slashed(valid), "LT_VALID_SHOWN="+triple(valid),
		"LT_FORCED="+forced+"=5s", "LT_PLAN="+planArgv(t, s))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("drive.js: %v\n%s", err, &stderr)
	}
	var res browserResult
	if err := json.Unmarshal(bytes.TrimSpace(raw), &res); err != nil {
		t.Fatalf("drive.js printed %q: %v\n%s", raw, err, &stderr)
	}
	t.Logf("steps: %s", strings.Join(res.Steps, "; "))
	// What the page must never do, first: an aborted request may also be
	// why a step failed.
	for who, sn := range res.Seen {
		for _, v := range sn.Violations {
			t.Errorf("%s: %s", who, v)
		}
	}
	if res.Error != "" {
		t.Fatalf("in the browser: %s\nconsole:\n%s", res.Error, strings.Join(res.Console, "\n"))
	}
	if res.HostErrors != "" {
		t.Errorf("the stand-in shell did not load the extension: %s", res.HostErrors)
	}

	t.Run("one websocket, and no failed request but the refused ones", func(t *testing.T) {
		for who, sn := range res.Seen {
			if len(sn.Websockets) != 1 || !strings.Contains(sn.Websockets[0], "/v1/subscribe") {
				t.Errorf("%s: websockets %q, want the store's one /v1/subscribe", who, sn.Websockets)
			}
		}
		// The browser console: the only failed requests are the refused
		// write (the editor) and the forced one (the viewer), which the
		// browser logs as errors.
		expected := map[string]int{"editor error: Failed to load resource: the server responded with a status of 422": 1,
			"viewer error: Failed to load resource: the server responded with a status of 403": 1}
		for _, l := range res.Console {
			bad := strings.Contains(l, " error:") || strings.Contains(l, " pageerror:") || strings.Contains(l, " warn") || strings.Contains(l, " requestfailed:")
			if !bad {
				continue
			}
			key := strings.SplitN(l, " (", 2)[0]
			if expected[key] > 0 {
				expected[key]--
				continue
			}
			t.Errorf("browser console: %s", l)
		}
		for l, n := range expected {
			if n > 0 {
				t.Errorf("browser console: no %q", l)
			}
		}
	})

	t.Run("the page reads once and then follows the store's watch: no polling", func(t *testing.T) {
		for who, sn := range res.Seen {
			gets := map[string]int{}
			var other []string
			for _, r := range sn.Requests {
				method, raw, _ := strings.Cut(r, " ")
				u, err := url.Parse(raw)
				if err != nil || !strings.HasPrefix(u.Path, "/v1/") || strings.HasPrefix(u.Path, "/v1/uiplugins") {
					continue
				}
				switch method {
				case http.MethodGet:
					gets[u.Path]++
				case http.MethodPut:
					if !strings.HasPrefix(u.Path, "/v1/management.cattle.io.settings/fleet-agent-leader-election-") {
						other = append(other, r)
					}
				default:
					other = append(other, r)
				}
			}
			want := map[string]int{"/v1/schemas": 1, "/v1/leasetune.io.electionstatuses/leasetune": 1}
			for _, d := range settings.Registry {
				want["/v1/management.cattle.io.settings/"+d.Name] = 1
			}
			if fmt.Sprint(gets) != fmt.Sprint(want) {
				t.Errorf("%s: GETs of /v1 %v, want each of the page's reads once %v", who, gets, want)
			}
			if len(other) > 0 {
				t.Errorf("%s: other requests of /v1: %q", who, other)
			}
		}
		for who, acts := range map[string][]action{"editor": res.Editor.Actions, "viewer": res.Viewer.Actions} {
			finds := 0
			for _, a := range acts {
				opt, _ := a.Payload["opt"].(map[string]interface{})
				switch {
				case a.Type == "management/find":
					finds++
					if opt["redirectUnauthorized"] != false {
						t.Errorf("%s: find without redirectUnauthorized: false: %v", who, a.Payload)
					}
				case a.Type == "management/request" && a.Payload["url"] != "/v1/schemas":
					if opt == nil {
						opt = a.Payload
					}
					if opt["redirectUnauthorized"] != false {
						t.Errorf("%s: request without redirectUnauthorized: false: %v", who, a.Payload)
					}
				}
			}
			if finds != 10 {
				t.Errorf("%s: %d finds, want the nine Settings and the ElectionStatus", who, finds)
			}
		}
		if res.Editor.LoggedOut || res.Viewer.LoggedOut {
			t.Errorf("the store logged a user out (editor %v, viewer %v)", res.Editor.LoggedOut, res.Viewer.LoggedOut)
		}
	})

	t.Run("the editor reads the page: Settings, what is in effect, the costs, the clusters that differ", func(t *testing.T) {
		v := res.Editor.View
		if !has(res.Nav, "Leader election") || v.Heading != "Leader election" {
			t.Errorf("menu %q, heading %q", res.Nav, v.Heading)
		}
		if len(v.Cards) != 3 || v.Cards[0].Title != "Fleet controllers" || v.Cards[1].Title != "Fleet agents" || v.Cards[2].Title != "Rancher server" {
			t.Fatalf("cards: %+v", v.Cards)
		}
		if v.ReadOnly != "" || v.Status != "" || len(v.Errors) > 0 {
			t.Errorf("banners of an editor: read-only %q, status %q, errors %q", v.ReadOnly, v.Status, v.Errors)
		}
		if !strings.Contains(v.Channel, "agentmanagement") {
			t.Errorf("channel %q", v.Channel)
		}
		agent := v.Cards[v.card(t, "fleet-agent")]
		if agent.InEffect != "In effect: 30s / 25s / 10s" || !agent.Save {
			t.Errorf("fleet-agent: in effect %q, save %v", agent.InEffect, agent.Save)
		}
		for _, f := range agent.Fields {
			if f.Disabled || f.Source != "default" || !strings.Contains(f.Meta, "Default "+f.Value) || !strings.Contains(f.Meta, "in effect "+f.Value) {
				t.Errorf("fleet-agent %s: %+v", f.Field, f)
			}
		}
		lease := v.Cards[v.card(t, "rancher")].Fields[0]
		if !lease.Disabled || lease.Source != "env" || !strings.Contains(lease.Reason, "CATTLE_RANCHER_LEADER_ELECTION_LEASE_DURATION") {
			t.Errorf("the env-set Rancher lease: %+v", lease)
		}
		for _, c := range v.Cards {
			if !c.ChartDrawn {
				t.Errorf("%s: no chart drawn", c.Component)
			}
		}
		if !strings.Contains(v.Clusters, "1 of 2 fleet Cluster(s) listed") || len(v.ClusterRows) != 1 ||
			!strings.Contains(v.ClusterRows[0], "edge-2") || !strings.Contains(v.ClusterRows[0], "35s") {
			t.Errorf("clusters: %q %q", v.Clusters, v.ClusterRows)
		}
	})

	t.Run("an invalid value gets the webhook's message", func(t *testing.T) {
		// What the webhook says of the same value, as the editor through
		// steve.
		steveSrv := serveSteve(t, steve)
		ed := steveClient{base: steveSrv.URL, session: login(t, steve, users.editor)}
		_, setting := ed.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+forced, nil)
		setting["value"] = "999ms"
		code, body := ed.do(t, http.MethodPut, "/v1/management.cattle.io.settings/"+forced, setting)
		const rule = "retryPeriod 999ms must be at least 1s"
		if code != http.StatusUnprocessableEntity || !strings.Contains(str(body, "message"), rule) {
			t.Fatalf("the webhook on 999ms: %d %v", code, body)
		}
		if !strings.Contains(res.Editor.Invalid, rule) || !res.Editor.SaveDisabledWhenInvalid {
			t.Errorf("the page on 999ms: %q (save disabled %v), want the webhook's %q", res.Editor.Invalid, res.Editor.SaveDisabledWhenInvalid, rule)
		}
	})

	t.Run("the webhook's refusal is shown as it came, with what was written", func(t *testing.T) {
		e := res.Editor
		for _, want := range []string{`admission webhook "settings.leasetune.io" denied the request`, "would leave the fleet-agent of 1 cluster(s) with an invalid triple",
			workspace + "/edge-2", "CATTLE_ELECTION_LEASE_DURATION=35s", "Written before the refusal: fleet-agent-leader-election-lease-duration"} {
			if !strings.Contains(e.Refusal, want) {
				t.Errorf("the refusal %q lacks %q", e.Refusal, want)
			}
		}
		if joined(e.RefusedWrites) != "fleet-agent-leader-election-lease-duration=1m0s,fleet-agent-leader-election-renew-deadline=40s,fleet-agent-leader-election-retry-period=15s" ||
			!strings.Contains(e.RefusedPreview, "The page writes 3 settings") {
			t.Errorf("the preview before the refusal: %q %q", e.RefusedWrites, e.RefusedPreview)
		}
	})

	t.Run("the page's plan for the proposed triple is leasetune plan --set's on the same installation", func(t *testing.T) {
		e := res.Editor
		p := e.CLIPlan
		if p == nil {
			t.Fatal("drive.js ran no leasetune plan")
		}
		var want []string
		for _, c := range p.Changes {
			old := c.Old
			if old == "" {
				old = "(absent)"
			}
			want = append(want, strings.Join([]string{c.Object, c.Field, old, c.New, c.Restarts}, " "))
		}
		if len(want) == 0 || joined(want) != joined(e.PreviewChanges) {
			t.Errorf("the page's changes:\n%s\nleasetune plan's:\n%s", strings.Join(e.PreviewChanges, "\n"), strings.Join(want, "\n"))
		}
		x := p.Totals
		restarts := fmt.Sprintf("Restarts: %d Deployment rollout(s), %d fleet-agent redeploy(s), %d cattle-cluster-agent redeploy(s), %d cluster(s) whose nodes are re-planned.",
			x.Rollouts, x.FleetAgents, x.ClusterAgents, x.NodePlans)
		if e.PreviewTotals != restarts {
			t.Errorf("the page's restarts %q, leasetune plan's %q", e.PreviewTotals, restarts)
		}
		locks := fmt.Sprintf("Lock requests: Fleet controllers %s (now %s), fleet-agents %s (now %s), Rancher %s (now %s).",
			perHour(x.Ctrl), perHour(x.CtrlBefore), perHour(x.Agents), perHour(x.AgentsBefore), perHour(x.Rancher), perHour(x.RancherBefore))
		if e.PreviewLocks != locks {
			t.Errorf("the page's lock requests %q, leasetune plan's %q", e.PreviewLocks, locks)
		}
		if x.Agents >= x.AgentsBefore || x.FleetAgents == 0 {
			t.Errorf("leasetune plan: agents' lock requests %v → %v, %d fleet-agent redeploys; want fewer requests and redeploys for a longer retry period", x.AgentsBefore, x.Agents, x.FleetAgents)
		}
	})

	t.Run("a saved triple is pending, then in effect, and in the Settings", func(t *testing.T) {
		e := res.Editor
		if !strings.Contains(e.Preview, "Deployment rollout(s)") || !strings.Contains(strings.Join(e.PreviewChanges, "\n"), "FLEET_AGENT_ELECTION_") {
			t.Errorf("the save preview: %q %q", e.Preview, e.PreviewChanges)
		}
		// The refused save left its first write, the lease, written: the
		// save writes the other two.
		writes := append([]string(nil), e.PreviewWrites...)
		sort.Strings(writes)
		if joined(writes) != "fleet-agent-leader-election-renew-deadline=30s,fleet-agent-leader-election-retry-period=15s" {
			t.Errorf("the writes of the save: %q", e.PreviewWrites)
		}
		if !strings.Contains(e.Saved, triple(valid)) || !strings.Contains(e.Pending, "Pending: "+triple(valid)) {
			t.Errorf("saved %q, pending %q", e.Saved, e.Pending)
		}
		agent := e.After.Cards[e.After.card(t, "fleet-agent")]
		if agent.InEffect != "In effect: "+triple(valid) || agent.Pending != "" {
			t.Errorf("after the settle time: in effect %q, pending %q", agent.InEffect, agent.Pending)
		}
		// The page writes each duration as Go formats it (1m0s).
		for i, f := range agent.Fields {
			want := []string{"1m0s", "30s", "15s"}[i]
			if f.Value != want || f.Source != "user" || !strings.Contains(f.Meta, "value "+want+" from") {
				t.Errorf("fleet-agent %s after the save: %+v", f.Field, f)
			}
		}
		for n, v := range map[string]string{"fleet-agent-leader-election-lease-duration": "1m0s", "fleet-agent-leader-election-renew-deadline": "30s",
			"fleet-agent-leader-election-retry-period": "15s"} {
			if got := settingValue(t, n); got != v {
				t.Errorf("Setting %s = %q, want %q", n, got, v)
			}
		}
	})

	t.Run("the viewer's page is read-only, and a forced PUT is refused with the Setting unchanged", func(t *testing.T) {
		v := res.Viewer.View
		if !strings.Contains(v.ReadOnly, "You can see these settings but not change them") {
			t.Errorf("read-only banner %q", v.ReadOnly)
		}
		for _, c := range v.Cards {
			if c.Save {
				t.Errorf("%s: a Save button for the viewer", c.Component)
			}
			for _, f := range c.Fields {
				if !f.Disabled {
					t.Errorf("%s %s: editable for the viewer", c.Component, f.Field)
				}
			}
		}
		if agent := v.Cards[v.card(t, "fleet-agent")]; agent.InEffect != "In effect: "+triple(valid) {
			t.Errorf("the viewer's fleet-agent in effect %q (the ElectionStatus through leasetune-view)", agent.InEffect)
		}
		f := res.Viewer.Forced
		if f.Status != http.StatusForbidden || str(f.Body, "code") != "PermissionDenied" || str(f.Body, "message") != "can not update management.cattle.io.setting" {
			t.Errorf("the forced PUT: %d %v", f.Status, f.Body)
		}
		if got := settingValue(t, forced); got != "15s" {
			t.Errorf("Setting %s = %q after the viewer's forced PUT, want 15s", forced, got)
		}
	})

	shot := filepath.Join(out, "leader-election.png")
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshots in %s", out)
}

// planArgv is the argv of `leasetune plan --output json` on s's
// installation (JSON, for drive.js's LT_PLAN).
func planArgv(t *testing.T, s *server) string {
	t.Helper()
	kc, err := cp.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	argv, _ := json.Marshal([]string{buildBinary(t), "plan", "--output", "json", "--kubeconfig", kc,
		"--namespace", s.ns, "--fleet-namespace", s.fleetNS, "--rancher-namespace", s.rancherNS})
	return string(argv)
}

// fleetCluster creates a standalone fleet Cluster with spec.agentEnvVars
// env (none: no such field), deleted when the test ends.
func fleetCluster(t *testing.T, ns, name string, env ...string) {
	t.Helper()
	var opts []kit.ClusterOption
	if len(env) > 0 {
		opts = append(opts, kit.WithEnv(kit.Env(env...)...))
	}
	cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(ns, name, opts...))
}
