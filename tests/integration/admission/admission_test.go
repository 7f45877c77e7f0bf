package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/admission"
	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

const (
	lease = "fleet-leader-election-lease-duration"
	renew = "fleet-leader-election-renew-deadline"
	retry = "fleet-leader-election-retry-period"
)

// invalid lists every kind of invalid value, with a part of the message the
// user must see.
var invalid = []struct{ name, setting, value, part string }{
	{"unparsable", retry, "10", `retryPeriod "10" is not a duration`},
	{"leading white space", retry, " 10s", "leading or trailing white space"},
	{"trailing white space", lease, "30s\n", "leading or trailing white space"},
	{"zero", retry, "0s", "retryPeriod 0s must be greater than 0"},
	{"negative", renew, "-1s", "renewDeadline -1s must be greater than 0"},
	{"sub-second lease", lease, "900ms", "leaseDuration 900ms must be at least 1s"},
	{"fractional lease", lease, "30.5s", "whole number of seconds"},
	{"over the upper bound", retry, "2h", "retryPeriod 2h0m0s must be at most 1h0m0s"},
	{"order: retry above renew", retry, "30s", "An order that works: set fleet-leader-election-lease-duration to 1m12s, then fleet-leader-election-renew-deadline to 1m0s, then this value"},
	{"order: lease below renew", lease, "20s", "An order that works: set fleet-leader-election-retry-period to 8s, then fleet-leader-election-renew-deadline to 16s, then this value"},
	// The floor: retryPeriod at least 1s, renewDeadline at least 2 × retryPeriod.
	{"retry below the floor", retry, "999ms", "retryPeriod 999ms must be at least 1s"},
	{"10ms typed for 10s", retry, "10ms", "retryPeriod 10ms must be at least 1s"},
	{"1ns", retry, "1ns", "retryPeriod 1ns must be at least 1s"},
	{"renew below two retry periods", renew, "19s", "renewDeadline 19s must be at least 2 × retryPeriod 10s = 20s, so the leader gets a second renewal attempt. An order that works: set fleet-leader-election-retry-period to 9s, then this value"},
	{"renew below its floor", renew, "1.5s", "No order of edits helps: renewDeadline 1.5s must be at least 2s (2 × the shortest retryPeriod, 1s)"},
	{"lease below its floor", lease, "2s", "No order of edits helps: leaseDuration 2s must be at least 3s"},
	// Rancher's own lock: the same rules, against its own triple (45s/30s/2s).
	{"rancher: renew below two retry periods", "rancher-leader-election-retry-period", "20s", "renewDeadline 30s must be at least 2 × retryPeriod 20s = 40s"},
	{"rancher: lease below renew", "rancher-leader-election-lease-duration", "30s", "leaseDuration 30s must exceed renewDeadline 30s"},
	{"rancher: unparsable", "rancher-leader-election-renew-deadline", "30", `renewDeadline "30" is not a duration`},
}

func TestDirectWritesAreRefusedAtTheDoor(t *testing.T) {
	startServer(t, nil)
	for _, c := range invalid {
		t.Run(c.name, func(t *testing.T) {
			err := patchValue(c.setting, c.value)
			if err == nil || !strings.Contains(err.Error(), c.part) {
				t.Fatalf("patch %s=%q: %v; want a denial containing %q", c.setting, c.value, err, c.part)
			}
		})
	}
	// Valid changes pass; an order of edits that works works.
	for _, step := range []struct{ name, value string }{{lease, "60s"}, {renew, "50s"}, {retry, "20s"}, {retry, "10s"}, {renew, "25s"}, {lease, "30s"}} {
		if err := patchValue(step.name, step.value); err != nil {
			t.Fatalf("valid step %s=%s refused: %v", step.name, step.value, err)
		}
	}
	// 60s/50s/20s → 30s/25s/10s in the wrong order is refused with the order that works.
	for _, step := range []struct{ name, value string }{{lease, "60s"}, {renew, "50s"}, {retry, "20s"}} {
		if err := patchValue(step.name, step.value); err != nil {
			t.Fatal(err)
		}
	}
	err := patchValue(lease, "30s")
	if err == nil || !strings.Contains(err.Error(), "An order that works: set fleet-leader-election-retry-period to 12s, then fleet-leader-election-renew-deadline to 25s, then this value") {
		t.Errorf("wrong order: %v", err)
	}
	// An empty value is checked as its default: 30s with renew 50s is invalid.
	if err := patchValue(lease, ""); err == nil || !strings.Contains(err.Error(), "leaseDuration 30s must exceed renewDeadline 50s") {
		t.Errorf("empty lease: %v", err)
	}
	// Writes of default and source by others pass (the webhook matches only value changes).
	body := []byte(`{"default":"11s"}`)
	if _, err := dyn().Resource(framework.SettingsGVR).Patch(context.Background(), retry, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Errorf("a write of default was refused: %v", err)
	}
}

func TestProjectServiceAccountIsExempt(t *testing.T) {
	s := startServer(t, nil)
	cfg := *cp.Config
	cfg.Impersonate.UserName = "system:serviceaccount:" + s.ns + ":leasetune"
	cfg.Impersonate.Groups = []string{"system:masters"}
	body, _ := json.Marshal(map[string]string{"value": "30s"})
	c, err := dynamicFor(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resource(framework.SettingsGVR).Patch(context.Background(), retry, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Errorf("the project's own write was refused: %v", err)
	}
}

func TestEnvSourcedSettingIsReadOnly(t *testing.T) {
	s := startServer(t, map[string]string{"CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD": "4s"})
	framework.Eventually(t, "source env", func() bool {
		u, err := dyn().Resource(framework.SettingsGVR).Get(context.Background(), retry, metav1.GetOptions{})
		return err == nil && u.Object["source"] == "env"
	})
	if err := patchValue(retry, "5s"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("direct write of an env-sourced setting: %v", err)
	}
	tok := token(t, s.ns, "editor", "get", "list", "patch")
	code, body := call(t, s, http.MethodPut, "/v3/settings/"+retry, tok, `{"value":"5s"}`)
	if code != http.StatusMethodNotAllowed {
		t.Errorf("PUT of an env-sourced setting: %d %v", code, body)
	}
}

func TestSettingsAPI(t *testing.T) {
	s := startServer(t, nil)
	editor := token(t, s.ns, "editor", "get", "list", "patch")
	viewer := token(t, s.ns, "viewer", "get", "list")
	nobody := token(t, s.ns, "nobody")

	code, body := call(t, s, http.MethodGet, "/v3/settings", "", "")
	if code != http.StatusUnauthorized || body["type"] != "error" || body["code"] != "Unauthorized" {
		t.Errorf("no token: %d %v", code, body)
	}
	if code, body = call(t, s, http.MethodGet, "/v3/settings", nobody, ""); code != http.StatusForbidden {
		t.Errorf("no rights: %d %v", code, body)
	}
	code, body = call(t, s, http.MethodGet, "/v3/settings", viewer, "")
	if code != http.StatusOK || body["type"] != "collection" || len(body["data"].([]interface{})) != len(settings.Registry) {
		t.Fatalf("list: %d %v", code, body)
	}
	code, body = call(t, s, http.MethodGet, "/v3/settings/"+retry, viewer, "")
	if code != http.StatusOK || body["id"] != retry || body["type"] != "setting" || body["name"] != retry ||
		body["default"] != "10s" || body["value"] != "10s" || body["customized"] != false || body["source"] != "default" || body["links"] == nil {
		t.Errorf("get (as Rancher shows a setting at its default: the default as value, source default): %d %v", code, body)
	}
	if code, body = call(t, s, http.MethodGet, "/v3/settings/server-url", viewer, ""); code != http.StatusNotFound {
		t.Errorf("unknown name: %d %v", code, body)
	}
	if code, body = call(t, s, http.MethodPut, "/v3/settings/"+retry, viewer, `{"value":"5s"}`); code != http.StatusForbidden {
		t.Errorf("PUT without the right: %d %v", code, body)
	}
	for _, c := range invalid {
		code, body := call(t, s, http.MethodPut, "/v3/settings/"+c.setting, editor, fmt.Sprintf(`{"value":%q}`, c.value))
		if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body["message"]), c.part) {
			t.Errorf("%s: %d %v; want 422 containing %q", c.name, code, body, c.part)
		}
	}
	code, body = call(t, s, http.MethodPut, "/v3/settings/"+retry, editor, `{"value":"5s"}`)
	if code != http.StatusOK || body["value"] != "5s" || body["customized"] != true || body["source"] != "db" {
		t.Errorf("valid PUT (as Rancher shows a set value: customized, source db): %d %v", code, body)
	}
	// It took effect: the provider's last good triple now has it.
	framework.Eventually(t, "propagated", func() bool {
		cm, err := cp.Client.CoreV1().ConfigMaps(s.ns).Get(context.Background(), "leasetune-state", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["effective"], `"fleet-controller":{"leaseDuration":"30s","renewDeadline":"25s","retryPeriod":"5s"}`)
	})
	if code, _ = call(t, s, http.MethodPut, "/v3/settings/server-url", editor, `{"value":"x"}`); code != http.StatusNotFound {
		t.Errorf("PUT unknown: %d", code)
	}
	if code, _ = call(t, s, http.MethodDelete, "/v3/settings/"+retry, editor, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", code)
	}
}

func TestWebhookDownBlocksOnlyOurSettings(t *testing.T) {
	s := startServer(t, nil)
	s.stop(t)
	// Rancher's own settings never reach the webhook.
	rancher := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Setting", "value": "https://rancher.example.com"}}
	rancher.SetName("server-url")
	if _, err := dyn().Resource(framework.SettingsGVR).Create(context.Background(), rancher, metav1.CreateOptions{}); err != nil {
		t.Errorf("Rancher's setting blocked while the webhook is down: %v", err)
	}
	if err := patchValue("server-url", "https://other.example.com"); err != nil {
		t.Errorf("Rancher's setting blocked while the webhook is down: %v", err)
	}
	// Ours fail closed (failurePolicy Fail).
	if err := patchValue(retry, "5s"); err == nil {
		t.Error("a change of our setting passed while the webhook was down")
	}
}

func TestOverrideAnnotations(t *testing.T) {
	s := startServer(t, nil)
	ns := cp.Namespace(t)
	cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(ns, "edge"))
	r := dyn().Resource(fleet.ClusterGVR).Namespace(ns)
	annotate := func(v interface{}) error {
		body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{agentenv.RetryPeriodAnnotation: v}}})
		_, err := r.Patch(context.Background(), "edge", types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	err := annotate("30s")
	if err == nil || !strings.Contains(err.Error(), "renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s") ||
		!strings.Contains(err.Error(), "leaseDuration=30s renewDeadline=25s retryPeriod=30s") {
		t.Errorf("invalid override (must name the triple it checked): %v", err)
	}
	// The message's order of edits works as given: those annotations with
	// the refused one, in one write.
	hint := map[string]interface{}{agentenv.RetryPeriodAnnotation: "30s"}
	if err != nil {
		_, after, _ := strings.Cut(err.Error(), "An order that works: set ")
		before, _, _ := strings.Cut(after, " on this cluster as well")
		for _, kv := range strings.Split(before, " and ") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				hint[k] = v
			}
		}
	}
	if len(hint) < 2 {
		t.Errorf("no order of edits in %v", err)
	} else {
		body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": hint}})
		if _, err := r.Patch(context.Background(), "edge", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Errorf("the hinted edits %v refused: %v", hint, err)
		}
		for k := range hint {
			hint[k] = nil
		}
		body, _ = json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": hint}})
		if _, err := r.Patch(context.Background(), "edge", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := annotate("ten"); err == nil || !strings.Contains(err.Error(), `annotation election.cattle.io/retry-period: retryPeriod "ten" is not a duration`) {
		t.Errorf("unparsable override: %v", err)
	}
	if err := annotate("5s"); err != nil {
		t.Errorf("valid override: %v", err)
	}
	if err := annotate(nil); err != nil {
		t.Errorf("removing an override: %v", err)
	}
	// Fleet's own writes (no override change) never reach the webhook; with it down, nothing is blocked.
	s.stop(t)
	if err := annotate("30s"); err != nil {
		t.Errorf("webhook down (failurePolicy Ignore) blocked a write: %v", err)
	}
}

func TestReplicasShareOneCertificate(t *testing.T) {
	ns := cp.Namespace(t)
	type res struct {
		ca  []byte
		err error
	}
	out := make(chan res, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, ca, err := admission.EnsureCerts(context.Background(), cp.Client, ns, "tls", []string{"leasetune-webhook." + ns + ".svc"})
			out <- res{ca, err}
		}()
	}
	a, b := <-out, <-out
	if a.err != nil || b.err != nil || string(a.ca) != string(b.ca) || len(a.ca) == 0 {
		t.Errorf("two replicas got different CAs: %v %v", a.err, b.err)
	}
}

// TestFloorAtTheDoor: both sides of the floor (retryPeriod ≥ 1s,
// renewDeadline ≥ 2 × retryPeriod) through kubectl's path (the webhook),
// the /v3 API and an override annotation; the hinted order down to the
// smallest triple, 3s/2s/1s, is followable.
func TestFloorAtTheDoor(t *testing.T) {
	s := startServer(t, nil)
	// kubectl (the webhook), from 30s/25s/10s.
	if err := patchValue(retry, "999ms"); err == nil || !strings.Contains(err.Error(), "retryPeriod 999ms must be at least 1s") {
		t.Errorf("retry 999ms: %v", err)
	}
	if err := patchValue(retry, "1s"); err != nil {
		t.Errorf("retry 1s, the floor, refused: %v", err)
	}
	if err := patchValue(retry, "10s"); err != nil {
		t.Fatal(err)
	}
	if err := patchValue(renew, "19.999s"); err == nil || !strings.Contains(err.Error(), "renewDeadline 19.999s must be at least 2 × retryPeriod 10s = 20s") {
		t.Errorf("renew 19.999s: %v", err)
	}
	if err := patchValue(renew, "20s"); err != nil {
		t.Errorf("renew exactly 2 × retry refused: %v", err)
	}
	// The order the message gives down to the smallest triple works.
	err := patchValue(lease, "3s")
	want := "An order that works: set fleet-leader-election-retry-period to 1s, then fleet-leader-election-renew-deadline to 2s, then this value"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("lease 3s from 30s/20s/10s: %v; want %q", err, want)
	}
	for _, step := range []struct{ name, value string }{{retry, "1s"}, {renew, "2s"}, {lease, "3s"}} {
		if err := patchValue(step.name, step.value); err != nil {
			t.Fatalf("hinted step %s=%s refused: %v", step.name, step.value, err)
		}
	}
	for _, bad := range []struct{ name, value, part string }{
		{retry, "999ms", "retryPeriod 999ms must be at least 1s"},
		{renew, "1.999s", "renewDeadline 1.999s must be at least 2s"},
		{lease, "2s", "leaseDuration 2s must exceed renewDeadline 2s"},
	} {
		if err := patchValue(bad.name, bad.value); err == nil || !strings.Contains(err.Error(), bad.part) {
			t.Errorf("%s=%s at 3s/2s/1s: %v; want %q", bad.name, bad.value, err, bad.part)
		}
	}
	for _, step := range []struct{ name, value string }{{lease, ""}, {renew, ""}, {retry, ""}} {
		if err := patchValue(step.name, step.value); err != nil {
			t.Fatalf("back to the defaults, %s: %v", step.name, err)
		}
	}

	// The /v3 API.
	editor := token(t, s.ns, "editor", "get", "list", "patch")
	code, body := call(t, s, http.MethodPut, "/v3/settings/"+retry, editor, `{"value":"999ms"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body["message"]), "retryPeriod 999ms must be at least 1s") {
		t.Errorf("PUT retry 999ms: %d %v", code, body)
	}
	code, body = call(t, s, http.MethodPut, "/v3/settings/"+renew, editor, `{"value":"19s"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body["message"]), "renewDeadline 19s must be at least 2 × retryPeriod 10s = 20s") {
		t.Errorf("PUT renew 19s: %d %v", code, body)
	}
	if code, body = call(t, s, http.MethodPut, "/v3/settings/"+retry, editor, `{"value":"1s"}`); code != http.StatusOK || body["value"] != "1s" {
		t.Errorf("PUT retry 1s: %d %v", code, body)
	}
	framework.Eventually(t, "retry 1s in effect", func() bool {
		cm, err := cp.Client.CoreV1().ConfigMaps(s.ns).Get(context.Background(), "leasetune-state", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["effective"], `"fleet-controller":{"leaseDuration":"30s","renewDeadline":"25s","retryPeriod":"1s"}`)
	})
	if code, body = call(t, s, http.MethodPut, "/v3/settings/"+retry, editor, `{"value":""}`); code != http.StatusOK {
		t.Errorf("PUT retry back to the default: %d %v", code, body)
	}

	// An override annotation, against the global agent triple 30s/25s/10s.
	ns := cp.Namespace(t)
	cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(ns, "edge"))
	r := dyn().Resource(fleet.ClusterGVR).Namespace(ns)
	annotate := func(key, v string) error {
		body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{key: v}}})
		_, err := r.Patch(context.Background(), "edge", types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	if err := annotate(agentenv.RetryPeriodAnnotation, "999ms"); err == nil || !strings.Contains(err.Error(), "retryPeriod 999ms must be at least 1s") {
		t.Errorf("override retry 999ms: %v", err)
	}
	if err := annotate(agentenv.RetryPeriodAnnotation, "1s"); err != nil {
		t.Errorf("override retry 1s refused: %v", err)
	}
	if err := annotate(agentenv.RetryPeriodAnnotation, "10s"); err != nil {
		t.Fatal(err)
	}
	if err := annotate(agentenv.RenewDeadlineAnnotation, "19s"); err == nil || !strings.Contains(err.Error(), "renewDeadline 19s must be at least 2 × retryPeriod 10s = 20s") {
		t.Errorf("override renew 19s: %v", err)
	}
	if err := annotate(agentenv.RenewDeadlineAnnotation, "20s"); err != nil {
		t.Errorf("override renew 20s refused: %v", err)
	}
}

// TestOverrideRefusedWhereFleetRendersTheNames: with a Fleet whose agent
// manifest renders CATTLE_ELECTION_* (v0.13+ here, as the leader records
// it), a new override is refused with the reason and the versions that
// allow one; with Fleet v0.9.1+ it passes. Rancher's copies on a
// management Cluster that is not legacy are never refused (its handler
// would retry without end).
func TestOverrideRefusedWhereFleetRendersTheNames(t *testing.T) {
	s := startServer(t, nil)
	ns := cp.Namespace(t)
	record := func(ch fleet.AgentChannel) {
		cms := cp.Client.CoreV1().ConfigMaps(s.ns)
		cm, err := cms.Get(context.Background(), fleetenv.ChannelConfigMapName, metav1.GetOptions{})
		if err != nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fleetenv.ChannelConfigMapName, Namespace: s.ns}}
			cm.Data = map[string]string{"channel": string(ch), "evidence": "test"}
			_, err = cms.Create(context.Background(), cm, metav1.CreateOptions{})
		} else {
			cm.Data = map[string]string{"channel": string(ch), "evidence": "test"}
			_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(ns, "edge"))
	r := dyn().Resource(fleet.ClusterGVR).Namespace(ns)
	cp.Create(t, rancher.ManagementClusterGVR, kit.ManagementCluster(ns+"-imported"))
	m := dyn().Resource(rancher.ManagementClusterGVR)
	patch := func(ri dynamic.ResourceInterface, name, v string) error {
		body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{agentenv.RetryPeriodAnnotation: v}}})
		_, err := ri.Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}

	record(fleet.ChannelAgentManagement)
	err := patch(r, "edge", "5s")
	if err == nil || !strings.Contains(err.Error(), "renders CATTLE_ELECTION_* itself") || !strings.Contains(err.Error(), "v0.9.1-v0.9.x") {
		t.Errorf("override on v0.13+: %v", err)
	}
	if err := patch(m, ns+"-imported", "5s"); err != nil {
		t.Errorf("Rancher's copy on a management Cluster refused: %v", err)
	}
	record(fleet.ChannelNoElection)
	if err := patch(r, "edge", "5s"); err == nil || !strings.Contains(err.Error(), "no leader election") {
		t.Errorf("override on a standalone cluster of v0.10-v0.11: %v", err)
	}
	record(fleet.ChannelClusterEnvV09)
	if err := patch(r, "edge", "5s"); err != nil {
		t.Errorf("override on v0.9.1+: %v", err)
	}
}
