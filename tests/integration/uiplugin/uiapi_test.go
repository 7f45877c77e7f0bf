package uiplugin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
)

// patchSetting writes a Setting's value as an admin would with kubectl.
func patchSetting(t *testing.T, name, value string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"value": value})
	if _, err := dyn().Resource(settingsGVR).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPageAPI checks the page's API (pkg/uiapi) on the real apiserver,
// with service-account tokens: Kubernetes RBAC decides what each caller
// gets, and the answers carry the values, their sources and the rules.
func TestPageAPI(t *testing.T) {
	s := startServer(t, serverOptions{channel: fleet.ChannelAgentManagement,
		env: map[string]string{"CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD": "10s"}})
	cp.InstallFleet(t, s.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	workspace := cp.Namespace(t)
	fleetCluster(t, workspace, "edge-1")
	fleetCluster(t, workspace, "edge-2")
	ns := cp.Namespace(t)
	admin := token(t, ns, "admin", adminRules...)
	nobody := token(t, ns, "nobody")
	settingsOnly := token(t, ns, "settings-only", rbacv1.PolicyRule{APIGroups: []string{"management.cattle.io"}, Resources: []string{"settings"}, Verbs: []string{"get"}})

	t.Run("no token is 401, no right is 403", func(t *testing.T) {
		if code, _ := call(t, s, http.MethodGet, "/leasetune/v1/overview", "", nil); code != http.StatusUnauthorized {
			t.Errorf("no token: %d", code)
		}
		code, body := call(t, s, http.MethodGet, "/leasetune/v1/overview", nobody, nil)
		if code != http.StatusForbidden || !strings.Contains(body["message"].(string), "cannot get resource \"settings\"") {
			t.Errorf("no right: %d %v", code, body)
		}
		if code, _ := call(t, s, http.MethodGet, "/leasetune/v1/nothing", admin, nil); code != http.StatusNotFound {
			t.Errorf("unknown path: %d", code)
		}
	})

	t.Run("overview: values, sources, read-only env settings", func(t *testing.T) {
		code, body := call(t, s, http.MethodGet, "/leasetune/v1/overview", admin, nil)
		if code != http.StatusOK {
			t.Fatalf("%d %v", code, body)
		}
		comps := body["components"].([]interface{})
		if len(comps) != 3 {
			t.Fatalf("components: %v", comps)
		}
		ctrl := comps[0].(map[string]interface{})
		retry := ctrl["settings"].([]interface{})[2].(map[string]interface{})
		if retry["readOnly"] != true || retry["source"] != "env" || !strings.Contains(retry["readOnlyReason"].(string), "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD") {
			t.Errorf("env-sourced retry period: %v", retry)
		}
		agent := comps[1].(map[string]interface{})
		lease := agent["settings"].([]interface{})[0].(map[string]interface{})
		if lease["source"] != "default" || lease["resolved"] != "30s" || lease["default"] != "30s" || lease["readOnly"] != false {
			t.Errorf("agent lease: %v", lease)
		}
		if ie := agent["inEffect"].(map[string]interface{}); ie["retryPeriod"] != "10s" || agent["inEffectFrom"] != "record" {
			t.Errorf("agent in effect: %v from %v", ie, agent["inEffectFrom"])
		}
		if body["channel"] != "agentmanagement" {
			t.Errorf("channel %v", body["channel"])
		}
		// With only the right to read the settings, the record and the Fleet
		// Deployments are notes, not failures.
		code, body = call(t, s, http.MethodGet, "/leasetune/v1/overview", settingsOnly, nil)
		if code != http.StatusOK || len(body["notes"].([]interface{})) == 0 {
			t.Errorf("settings-only: %d %v", code, body)
		}
		if from := body["components"].([]interface{})[1].(map[string]interface{})["inEffectFrom"]; from != "settings" {
			t.Errorf("settings-only: in effect from %v, want settings", from)
		}
	})

	t.Run("plan: the writes in an order each step accepts, and what they restart", func(t *testing.T) {
		code, body := call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "fleet-agent",
			"values": map[string]string{"leaseDuration": "60s", "renewDeadline": "50s", "retryPeriod": "20s"}})
		if code != http.StatusOK {
			t.Fatalf("%d %v", code, body)
		}
		if got := names(body["writes"]); got != "lease-duration,renew-deadline,retry-period" {
			t.Errorf("writes %s", got)
		}
		totals := body["totals"].(map[string]interface{})
		if totals["fleetAgentRedeploys"].(float64) != 2 || totals["deploymentRollouts"].(float64) != 1 {
			t.Errorf("totals %v", totals)
		}
		if !strings.Contains(toJSON(body["changes"]), "FLEET_AGENT_ELECTION_RETRY_PERIOD") {
			t.Errorf("changes %v", body["changes"])
		}
		// Back down from 60s/50s/20s the order reverses: the retry period
		// first, or each step would break a rule.
		for _, nv := range [][2]string{{"lease-duration", "60s"}, {"renew-deadline", "50s"}, {"retry-period", "20s"}} {
			patchSetting(t, "fleet-agent-leader-election-"+nv[0], nv[1])
		}
		code, body = call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "fleet-agent",
			"values": map[string]string{"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "10s"}})
		if code != http.StatusOK || names(body["writes"]) != "retry-period,renew-deadline,lease-duration" {
			t.Errorf("back down: %d %v", code, body["writes"])
		}
		// Nothing changes: no write.
		code, body = call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "fleet-agent",
			"values": map[string]string{"leaseDuration": "60s", "renewDeadline": "50s", "retryPeriod": "20s"}})
		if code != http.StatusOK || len(body["writes"].([]interface{})) != 0 {
			t.Errorf("no change: %d %v", code, body["writes"])
		}
	})

	t.Run("plan refusals name the rule, the numbers and the setting", func(t *testing.T) {
		code, body := call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "fleet-agent",
			"values": map[string]string{"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "999ms"}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body["message"].(string), "retryPeriod 999ms must be at least 1s") {
			t.Errorf("999ms: %d %v", code, body)
		}
		code, body = call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "fleet-agent",
			"values": map[string]string{"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "10"}})
		if code != http.StatusUnprocessableEntity || body["fieldName"] != "fleet-agent-leader-election-retry-period" ||
			!strings.Contains(body["message"].(string), `retryPeriod "10" is not a duration: time: missing unit in duration "10"`) {
			t.Errorf("10: %d %v", code, body)
		}
		code, body = call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "fleet-controller",
			"values": map[string]string{"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "5s"}})
		if code != http.StatusMethodNotAllowed || !strings.Contains(body["message"].(string), "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD") {
			t.Errorf("env-sourced: %d %v", code, body)
		}
		if code, _ := call(t, s, http.MethodPost, "/leasetune/v1/plan", admin, map[string]interface{}{"component": "gitjob"}); code != http.StatusUnprocessableEntity {
			t.Errorf("unknown component: %d", code)
		}
		// Planning needs the rights the plan reads with: settings alone are not enough.
		if code, _ := call(t, s, http.MethodPost, "/leasetune/v1/plan", settingsOnly, map[string]interface{}{"component": "fleet-agent",
			"values": map[string]string{"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "10s"}}); code != http.StatusForbidden {
			t.Errorf("settings-only plan: %d", code)
		}
	})

	t.Run("trade-off: the installation's locks, the curve, the recommendation", func(t *testing.T) {
		code, body := call(t, s, http.MethodGet, "/leasetune/v1/tradeoff?component=fleet-agent&maxFailover=90s", admin, nil)
		if code != http.StatusOK {
			t.Fatalf("%d %v", code, body)
		}
		locks := body["locks"].(map[string]interface{})
		if locks["count"].(float64) != 2 || locks["estimated"] != false {
			t.Errorf("locks %v", locks)
		}
		curve := body["curve"].([]interface{})
		first, last := curve[0].(map[string]interface{}), curve[len(curve)-1].(map[string]interface{})
		if first["retryPeriodSeconds"].(float64) != 1 || first["requestsPerHour"].(float64) <= last["requestsPerHour"].(float64) ||
			first["failoverSeconds"].(float64) >= last["failoverSeconds"].(float64) {
			t.Errorf("curve ends: %v .. %v", first, last)
		}
		rec := body["recommended"].(map[string]interface{})
		if rec["failoverSeconds"].(float64) > 90 || toJSON(rec["triple"]) != `{"leaseDuration":"32s","renewDeadline":"31s","retryPeriod":"13s"}` {
			t.Errorf("recommended %v", rec)
		}
		if code, body := call(t, s, http.MethodGet, "/leasetune/v1/tradeoff?component=fleet-agent&maxFailover=2s", admin, nil); code != http.StatusOK ||
			!strings.Contains(body["recommendError"].(string), "no valid triple meets the target") {
			t.Errorf("an unreachable target: %d %v", code, body)
		}
		if code, _ := call(t, s, http.MethodGet, "/leasetune/v1/tradeoff?component=fleet-agent&maxFailover=fast", admin, nil); code != http.StatusUnprocessableEntity {
			t.Errorf("a bad target: %d", code)
		}
	})

	t.Run("clusters: the ones whose agents differ, and why", func(t *testing.T) {
		fleetCluster(t, workspace, "edge-3", "CATTLE_ELECTION_RETRY_PERIOD=12s")
		code, body := call(t, s, http.MethodGet, "/leasetune/v1/clusters", admin, nil)
		if code != http.StatusOK {
			t.Fatalf("%d %v", code, body)
		}
		if body["total"].(float64) != 3 || body["differing"].(float64) != 1 {
			t.Fatalf("total %v, differing %v: %v", body["total"], body["differing"], body["clusters"])
		}
		c := body["clusters"].([]interface{})[0].(map[string]interface{})
		if c["cluster"] != workspace+"/edge-3" || c["problem"] != "foreign" || !strings.Contains(c["reason"].(string), "CATTLE_ELECTION_RETRY_PERIOD") {
			t.Errorf("edge-3: %v", c)
		}
		if code, _ := call(t, s, http.MethodGet, "/leasetune/v1/clusters", settingsOnly, nil); code != http.StatusForbidden {
			t.Errorf("settings-only clusters: %d", code)
		}
	})
}

// names returns the setting names of a plan's writes without their
// fleet-agent-leader-election- prefix, comma-separated.
func names(writes interface{}) string {
	var out []string
	for _, w := range writes.([]interface{}) {
		out = append(out, strings.TrimPrefix(w.(map[string]interface{})["name"].(string), "fleet-agent-leader-election-"))
	}
	return strings.Join(out, ",")
}

func toJSON(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}
