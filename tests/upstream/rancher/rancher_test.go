//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	for w := range framework.WritesBy(rs, framework.Leasetune) {
		if !strings.Contains(w, " settings.management.cattle.io /") {
			t.Errorf("leasetune wrote more than the Settings while Rancher started: %s", w)
		}
	}
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

	// A valid value: the fleet-controller triple 20s/15s/5s → 20s/15s/6s.
	want := election.Timings{LeaseDuration: 20 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 6 * time.Second}
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

	// A value the webhook refuses: a retry period of 15s with the renew
	// deadline 15s (client-go: renewDeadline > 1.2 × retryPeriod).
	mark, _ = in.Audit.Mark()
	code, body, err = in.Admin.Do(ctx, http.MethodPut, "/v3/settings/fleet-leader-election-retry-period", map[string]string{"value": "15s"})
	if err != nil {
		t.Fatal(err)
	}
	if code < 400 || !strings.Contains(string(body), `admission webhook "settings.leasetune.io" denied the request`) ||
		!strings.Contains(string(body), "fleet-leader-election-retry-period") {
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
