//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// rancherSA is the user Rancher's chart runs Rancher as.
const rancherSA = "system:serviceaccount:" + framework.RancherNamespace + ":rancher"

func nine() []string {
	var out []string
	for _, d := range settings.Registry {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// Test01Fleet is case 4 on Fleet v0.13.14 as Rancher v2.12.12 installs it:
// the local cluster's agent comes from Rancher's fleet-local/local Cluster
// and runs in cattle-fleet-local-system (rancher/rancher v2.12.12
// pkg/controllers/provisioningv2/fleetcluster/fleetcluster.go createCluster:
// AgentNamespace fleetconst.ReleaseLocalNamespace for the internal
// cluster). It leaves both Fleet triples set to 20s/15s/5s.
func Test01Fleet(t *testing.T) {
	framework.Need(t, in)
	framework.FleetCase(t, in, framework.FleetLocalNamespace)
}

// Test02RancherStartRestoresTheSettings is case 1: Rancher v2.12.12 starts
// (a rollout restart of its Deployment, as `kubectl rollout restart` makes
// it) beside leasetune, with the users' values set. At start Rancher
// deletes every Setting it does not know (rancher/rancher v2.12.12
// pkg/controllers/dashboardapi/settings/settings.go SetAll →
// cleanupUnknownSettings); leasetune puts the nine back with the users'
// values, and nothing in effect changes: leasetune writes no Deployment
// and no cluster object, and nothing but Rancher itself restarts.
func Test02RancherStartRestoresTheSettings(t *testing.T) {
	framework.Need(t, in)
	users := in.SettingValues(t, nine())
	if len(users) != 9 {
		t.Fatalf("want the nine settings before Rancher restarts, got %v", users)
	}
	before := in.Rollouts(t)
	mark, _ := in.Audit.Mark()
	rancherHash := hashOf(t, framework.RancherNamespace, framework.RancherDeployment)
	restart(t, framework.RancherNamespace, framework.RancherDeployment)
	framework.Within(t, time.Minute, "Rancher's new pod", func() bool {
		ps := in.Kubelet.Pods(framework.RancherNamespace, framework.RancherDeployment)
		return len(ps) == 1 && ps[0].Hash != rancherHash
	})
	if err := in.WaitRunning(framework.RancherNamespace, framework.RancherDeployment, 5*time.Minute); err != nil {
		t.Fatalf("Rancher after the restart: %v\n%s", err, in.Logs(framework.RancherNamespace, framework.RancherDeployment, 40))
	}
	deleted := func() map[string]int {
		rs, _ := in.Audit.Since(mark)
		return framework.Count(rs, func(r framework.Request) bool {
			return r.Verb == "delete" && r.Resource == "settings" && r.User == rancherSA && r.Code < 400
		}, func(r framework.Request) string { return r.Name })
	}
	framework.Within(t, 3*time.Minute, "Rancher deletes the nine settings at its start", func() bool {
		d := deleted()
		for _, n := range nine() {
			if d[n] == 0 {
				return false
			}
		}
		return true
	}, func() string { return "deleted:\n" + framework.Format(deleted()) })
	framework.Within(t, 2*time.Minute, "leasetune restores the users' values", func() bool {
		got := in.SettingValues(t, nine())
		return fmt.Sprint(got) == fmt.Sprint(users)
	}, func() string { return fmt.Sprintf("now %v, want %v", in.SettingValues(t, nine()), users) })
	in.Calm(t, 20*time.Second, 3*time.Minute)
	rs, _ := in.Audit.Since(mark)
	wantCreates := map[string]int{}
	for _, n := range nine() {
		if d := deleted()[n]; d != 1 {
			t.Errorf("Rancher deleted %s %d times at its start, want once", n, d)
		}
		wantCreates["create settings.management.cattle.io /"+n] = 1
	}
	framework.LeasetuneWrites(t, rs, wantCreates)
	t.Logf("Rancher deleted:\n%sleasetune wrote:\n%s", framework.Format(deleted()), framework.Format(framework.WritesBy(rs, framework.Leasetune)))
	in.WantRollouts(t, before, map[string]int{framework.RancherNamespace + "/" + framework.RancherDeployment: 1})
	in.NoCrashes(t)
}

// Test03SettingsAPI is case 2: Rancher's own /v3/settings (Norman) with the
// admin's login token lists the nine settings; a PUT of a valid value
// propagates with one write of each target; a PUT of a value leasetune's
// webhook refuses answers Rancher's error carrying the webhook's message
// and changes nothing; a Rancher user without the right gets 403 from
// steve.
func Test03SettingsAPI(t *testing.T) {
	framework.Need(t, in)
	ctx := context.Background()
	code, body, err := in.Admin.Do(ctx, http.MethodGet, "/v3/settings?limit=-1", nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v3/settings: %d %v %s", code, err, body)
	}
	var list struct {
		Data []struct {
			ID, Value, Default, Source string
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, s := range list.Data {
		listed[s.ID] = true
	}
	for _, n := range nine() {
		if !listed[n] {
			t.Errorf("GET /v3/settings does not list %s", n)
		}
	}

	// A valid value: the fleet-controller triple's retry period 6s (after
	// case 4: 20s/15s/5s → 20s/15s/6s).
	want := in.SettingsTriple(t, "fleet-leader-election", election.FleetDefaults).With(election.RetryPeriod, 6*time.Second)
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	before := in.Rollouts(t)
	mark, _ := in.Audit.Mark()
	code, body, err = in.Admin.Do(ctx, http.MethodPut, "/v3/settings/fleet-leader-election-retry-period", map[string]string{"value": "6s"})
	if err != nil || code != http.StatusOK {
		t.Fatalf("PUT /v3/settings/fleet-leader-election-retry-period 6s: %d %v %s", code, err, body)
	}
	for _, d := range framework.FleetDeployments {
		d := d
		framework.Within(t, 2*time.Minute, "the triple on "+d, func() bool {
			got, found := in.ContainerTriple(t, framework.FleetNamespace, d, d, election.CattlePrefix)
			if d == "fleet-controller" {
				got, found = in.ContainerTriple(t, framework.FleetNamespace, d, "fleet-controller", election.CattlePrefix)
			}
			return found && got == want
		})
	}
	in.Calm(t, 20*time.Second, 3*time.Minute)
	rs, _ := in.Audit.Since(mark)
	wantWrites := map[string]int{"patch configmaps " + framework.RancherNamespace + "/rancher-config": 1}
	wantRollouts := map[string]int{}
	for _, d := range framework.FleetDeployments {
		wantWrites["patch deployments.apps "+framework.FleetNamespace+"/"+d] = 1
		wantRollouts[framework.FleetNamespace+"/"+d] = 1
	}
	framework.LeasetuneWrites(t, rs, wantWrites)
	in.WantRollouts(t, before, wantRollouts)

	// A value the webhook refuses: a retry period equal to the renew
	// deadline (client-go: renewDeadline > 1.2 × retryPeriod).
	mark, _ = in.Audit.Mark()
	code, body, err = in.Admin.Do(ctx, http.MethodPut, "/v3/settings/fleet-leader-election-retry-period", map[string]string{"value": want.RenewDeadline.String()})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr struct{ Code, Message string }
	_ = json.Unmarshal(body, &apiErr)
	if code < 400 || !strings.Contains(apiErr.Message, `admission webhook "settings.leasetune.io" denied the request`) ||
		!strings.Contains(apiErr.Message, "fleet-leader-election-retry-period") {
		t.Errorf("PUT of a refused value: want Rancher's error carrying the webhook's message, got %d %s", code, body)
	} else {
		t.Logf("Rancher answered %d: %s", code, body)
	}
	time.Sleep(15 * time.Second) // longer than the settle time: a change would have been written by now
	if v := in.SettingValues(t, []string{"fleet-leader-election-retry-period"}); v["fleet-leader-election-retry-period"] != "6s" {
		t.Errorf("the refused PUT changed the setting: %v", v)
	}
	rs, _ = in.Audit.Since(mark)
	framework.LeasetuneWrites(t, rs, nil)

	// A Rancher user with the standard user role: steve answers 403.
	user := newRancherUser(t, "leasetune-no-settings")
	code, body, err = user.Do(ctx, http.MethodGet, "/v1/management.cattle.io.settings/fleet-leader-election-retry-period", nil)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]interface{}
	if code != http.StatusOK || json.Unmarshal(body, &s) != nil {
		t.Fatalf("GET the setting through steve as a standard user (settings are readable by every user): %d %s", code, body)
	}
	s["value"] = "7s"
	code, body, err = user.Do(ctx, http.MethodPut, "/v1/management.cattle.io.settings/fleet-leader-election-retry-period", s)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusForbidden {
		t.Errorf("PUT through steve as a user without the right: want 403, got %d %s", code, body)
	}
	if v := in.SettingValues(t, []string{"fleet-leader-election-retry-period"}); v["fleet-leader-election-retry-period"] != "6s" {
		t.Errorf("the forbidden PUT changed the setting: %v", v)
	}
	in.NoCrashes(t)
}

// newRancherUser creates a Rancher user with the standard user global role
// through /v3 (POST /v3/users, then a globalRoleBinding to "user", as
// Rancher's UI creates users) and logs it in.
func newRancherUser(t *testing.T, name string) *framework.RancherAPI {
	t.Helper()
	ctx := context.Background()
	const pw = "leasetune-user-password"
	code, body, err := in.Admin.Do(ctx, http.MethodPost, "/v3/users", map[string]interface{}{
		"type": "user", "username": name, "password": pw, "mustChangePassword": false, "enabled": true})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("POST /v3/users: %d %v %s", code, err, body)
	}
	var u struct{ ID string }
	_ = json.Unmarshal(body, &u)
	code, body, err = in.Admin.Do(ctx, http.MethodPost, "/v3/globalrolebindings", map[string]interface{}{
		"type": "globalRoleBinding", "globalRoleId": "user", "userId": u.ID})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("POST /v3/globalrolebindings: %d %v %s", code, err, body)
	}
	var api *framework.RancherAPI
	framework.Within(t, time.Minute, "the new user logs in", func() bool {
		api, err = framework.Login(ctx, in.Rancher.URL(), name, pw)
		return err == nil
	}, func() string { return fmt.Sprint(err) })
	return api
}

// hashOf returns the pod-template hash the Kubelet double runs for ns/name.
func hashOf(t *testing.T, ns, name string) string {
	t.Helper()
	ps := in.Kubelet.Pods(ns, name)
	if len(ps) == 0 {
		t.Fatalf("%s/%s runs no pod", ns, name)
	}
	return ps[0].Hash
}

// restart does what `kubectl rollout restart` does: it sets the pod
// template annotation kubectl.kubernetes.io/restartedAt (k8s.io/kubectl
// v0.32 pkg/polymorphichelpers/objectrestarter.go).
func restart(t *testing.T, ns, name string) {
	t.Helper()
	p := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
	if _, err := in.CP.Client.AppsV1().Deployments(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "kubectl-rollout"}); err != nil {
		t.Fatal(err)
	}
}

// Test04RancherLock is case 5: Rancher's own lock kube-system/cattle-controllers
// with the chart's rancherElection on. Rancher here runs with
// CATTLE_DEV_MODE, whose lease is 45h/30h (wrangler v3.3.5
// pkg/leader/leader.go computeConfig: developmentLeaseDuration,
// developmentRenewDeadline) and whose retry period stays 2s; leasetune's
// rancher-leader-election-* settings start at wrangler's 45s/30s/2s and so
// write nothing. Setting 45s/30s/10s writes the rancher container's
// CATTLE_ELECTION_* once (computeConfig reads each of them over the dev
// values), Rancher rolls out once, and the lock's requests per hour before
// and after are the model's (one replica: a leader and no follower;
// Rancher v2.12.12 builds with client-go v0.33.13, go.mod, so the leader
// updates without reading).
func Test04RancherLock(t *testing.T) {
	framework.Need(t, in)
	lock := map[string][]string{"kube-system": {"cattle-controllers"}}
	devMode := election.Timings{LeaseDuration: 45 * time.Hour, RenewDeadline: 30 * time.Hour, RetryPeriod: 2 * time.Second}
	if _, found := in.ContainerTriple(t, framework.RancherNamespace, framework.RancherDeployment, "rancher", election.CattlePrefix); found {
		t.Fatal("the Rancher Deployment has CATTLE_ELECTION_* before the settings are set")
	}
	in.Steady(t, devMode, lock, 2*time.Minute)
	w := in.Measure(t, framework.WindowFor(devMode))
	in.CheckLocks(t, w, devMode, election.LeaderOnlyUpdates, lock)

	want := election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 10 * time.Second}
	before := in.Rollouts(t)
	mark, _ := in.Audit.Mark()
	in.SetTriple(t, "rancher-leader-election", election.WranglerDefaults, want)
	framework.Within(t, 2*time.Minute, "CATTLE_ELECTION_* on the rancher container", func() bool {
		got, found := in.ContainerTriple(t, framework.RancherNamespace, framework.RancherDeployment, "rancher", election.CattlePrefix)
		return found && got == want
	})
	if err := in.WaitRunning(framework.RancherNamespace, framework.RancherDeployment, 5*time.Minute); err != nil {
		t.Fatalf("Rancher after the change: %v\n%s", err, in.Logs(framework.RancherNamespace, framework.RancherDeployment, 40))
	}
	// Rancher deletes the nine settings again at its start; leasetune
	// restores them (case 1).
	framework.Within(t, 3*time.Minute, "the rancher settings restored", func() bool {
		v := in.SettingValues(t, []string{"rancher-leader-election-retry-period"})
		return v["rancher-leader-election-retry-period"] == "10s"
	})
	in.Calm(t, 20*time.Second, 3*time.Minute)
	rs, _ := in.Audit.Since(mark)
	got := framework.WritesBy(rs, framework.Leasetune)
	for w := range got {
		if strings.Contains(w, " settings.management.cattle.io /") {
			delete(got, w) // the restores after Rancher's start
		}
	}
	if want := map[string]int{"patch deployments.apps " + framework.RancherNamespace + "/" + framework.RancherDeployment: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("leasetune's writes besides the Settings:\n%swant:\n%s", framework.Format(got), framework.Format(want))
	}
	in.WantRollouts(t, before, map[string]int{framework.RancherNamespace + "/" + framework.RancherDeployment: 1})
	if d := in.DuplicateEnvNames(t); len(d) > 0 {
		t.Errorf("duplicate env names: %v", d)
	}
	in.Steady(t, want, lock, 3*time.Minute)
	w = in.Measure(t, framework.WindowFor(want))
	in.CheckLocks(t, w, want, election.LeaderOnlyUpdates, lock)
	in.NoCrashes(t)
}

// Test05UIPlugin is case 6: the real Rancher fetches leasetune's UI
// bundle from the endpoint the chart's UIPlugin names (uiPlugin.endpoint
// here: the UI Service's address), marks the UIPlugin cached, and serves its
// JavaScript at /v1/uiplugins/<name>/<version>/plugin/<file>, the same
// bytes leasetune serves. rancher/rancher v2.12.12:
// pkg/controllers/dashboard/plugin/controller.go OnPluginChange (status
// cacheState cached, ready), fscache.go (package.json, files.txt and each
// file fetched from the endpoint), pkg/api/steve/catalog/plugin.go
// pluginHandler (served from the cache).
func Test05UIPlugin(t *testing.T) {
	framework.Need(t, in)
	ctx := context.Background()
	gvr := framework.UIPluginGVR
	var name, version, endpoint string
	framework.Within(t, 3*time.Minute, "the UIPlugin cached by Rancher", func() bool {
		u, err := in.Dyn.Resource(gvr).Namespace("cattle-ui-plugin-system").Get(ctx, "leasetune", metav1.GetOptions{})
		if err != nil {
			return false
		}
		name = str(u.Object, "spec", "plugin", "name")
		version = str(u.Object, "spec", "plugin", "version")
		endpoint = str(u.Object, "spec", "plugin", "endpoint")
		ready, _ := u.Object["status"].(map[string]interface{})["ready"].(bool)
		return str(u.Object, "status", "cacheState") == "cached" && ready
	}, func() string {
		u, _ := in.Dyn.Resource(gvr).Namespace("cattle-ui-plugin-system").Get(ctx, "leasetune", metav1.GetOptions{})
		if u == nil {
			return "no UIPlugin"
		}
		return fmt.Sprintf("status %v", u.Object["status"])
	})
	if endpoint != in.Leasetune.UIEndpoint()+"/uiplugin/"+name+"/"+version && !strings.HasPrefix(endpoint, in.Leasetune.UIEndpoint()) {
		t.Errorf("the UIPlugin's endpoint %q is not leasetune's UI server %s", endpoint, in.Leasetune.UIEndpoint())
	}
	file := "/plugin/" + name + "-" + version + ".umd.min.js"
	direct, err := httpGet(endpoint + file)
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := in.Admin.Do(ctx, http.MethodGet, "/v1/uiplugins/"+name+"/"+version+file, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET the bundle through Rancher: %d %v", code, err)
	}
	if string(body) != string(direct) {
		t.Errorf("Rancher serves %d bytes for %s, leasetune %d", len(body), file, len(direct))
	}
	code, body, err = in.Admin.Do(ctx, http.MethodGet, "/v1/uiplugins", nil)
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"`+name+`"`) {
		t.Errorf("Rancher's plugin index does not list %s: %d %v %s", name, code, err, body)
	}
	t.Logf("Rancher serves %s %s from its cache (%d bytes of JavaScript), fetched from %s", name, version, len(direct), endpoint)
}

func str(obj map[string]interface{}, path ...string) string {
	s, _, _ := unstructured.NestedString(obj, path...)
	return s
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url) //nolint:gosec // a test's loopback URL
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}
