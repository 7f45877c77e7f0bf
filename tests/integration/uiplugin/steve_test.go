package uiplugin_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
)

// TestSteveDouble checks the double of Rancher's steve API
// (tests/integration/framework/steve.go) that the browser test's
// stand-in store talks to, against what it copies from steve, on the real
// kube-apiserver with leasetune's webhook and the chart's roles: the
// schemas a user gets (PUT where the user may update any Setting, as
// steve's factory.go decides; no schema where the user may read nothing),
// an object's shape and its update link (only where the user may update
// that object), a PUT refused by the schema, by Kubernetes RBAC as the
// user and by the webhook, each answered as steve answers it, a conflict,
// the session and CSRF checks, and the watch over /v1/subscribe as the
// user.
func TestSteveDouble(t *testing.T) {
	s := startServer(t, serverOptions{channel: fleet.ChannelAgentManagement})
	users := setUpUsers(t, s.ns)
	steve := newSteve(t)
	srv := serveSteve(t, steve)
	ed := steveClient{base: srv.URL, session: login(t, steve, users.editor)}
	vw := steveClient{base: srv.URL, session: login(t, steve, users.viewer)}
	nb := steveClient{base: srv.URL, session: login(t, steve, users.nobody)}
	const nine, other = "fleet-agent-leader-election-retry-period", "server-url"
	// A Setting that is not one of leasetune's: Rancher's own server-url.
	cp.Create(t, framework.SettingsGVR, &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "management.cattle.io/v3", "kind": "Setting", "metadata": map[string]interface{}{"name": other}, "value": "https://rancher.example"}})
	framework.Eventually(t, "the ElectionStatus", func() bool {
		_, err := dyn().Resource(statusGVR).Get(context.Background(), electionstatus.Name, metav1.GetOptions{})
		return err == nil
	})
	const settingID, statusID = "management.cattle.io.setting", "leasetune.io.electionstatus"

	t.Run("schemas: PUT where the user may update any Setting, none where the user may read nothing", func(t *testing.T) {
		schemas := func(c steveClient) map[string]map[string]interface{} {
			code, body := c.do(t, http.MethodGet, "/v1/schemas", nil)
			if code != http.StatusOK || body["type"] != "collection" || body["resourceType"] != "schema" {
				t.Fatalf("GET /v1/schemas: %d %v", code, body)
			}
			out := map[string]map[string]interface{}{}
			data, _ := body["data"].([]interface{})
			for _, d := range data {
				m, _ := d.(map[string]interface{})
				out[str(m, "id")] = m
			}
			return out
		}
		es := schemas(ed)
		set := es[settingID]
		if set == nil || joined(strs(set, "resourceMethods")) != "GET,PUT,PATCH,PATCH" || joined(strs(set, "collectionMethods")) != "GET" {
			t.Errorf("the editor's Setting schema: %v", set)
		}
		if str(set, "links", "collection") != srv.URL+"/v1/management.cattle.io.settings" || str(set, "pluralName") != "management.cattle.io.settings" {
			t.Errorf("the editor's Setting schema's links and plural: %v", set)
		}
		attrs, _ := set["attributes"].(map[string]interface{})
		if verbs := strs(attrs, "verbs"); !has(verbs, "watch") || attrs["namespaced"] != false || attrs["access"] != nil {
			t.Errorf("the Setting schema's attributes: %v", attrs)
		}
		// steve's rule, not the kube-apiserver's question without a name:
		// the editor may update nine Settings by name, so the schema offers
		// PUT though "may the editor update settings?" is no.
		if canI(t, users.editor, "update", "settings", "") {
			t.Error("the editor may update every Setting: the test's premise is gone")
		}
		if st := es[statusID]; st == nil || joined(strs(st, "resourceMethods")) != "GET" {
			t.Errorf("the editor's ElectionStatus schema: %v", st)
		}
		vs := schemas(vw)
		if set := vs[settingID]; set == nil || joined(strs(set, "resourceMethods")) != "GET" {
			t.Errorf("the viewer's Setting schema: %v", set)
		}
		if st := vs[statusID]; st == nil || joined(strs(st, "resourceMethods")) != "GET" {
			t.Errorf("the viewer's ElectionStatus schema: %v", st)
		}
		if ns := schemas(nb); ns[settingID] != nil || ns[statusID] != nil {
			t.Errorf("nobody's schemas: %v", ns)
		}
		if code, body := nb.do(t, http.MethodGet, "/v1/schemas/"+settingID, nil); code != http.StatusNotFound || str(body, "code") != "NotFound" || str(body, "message") != "no such schema" {
			t.Errorf("nobody's GET of the Setting schema: %d %v", code, body)
		}
		if code, body := ed.do(t, http.MethodGet, "/v1/schemas/"+settingID, nil); code != http.StatusOK || str(body, "id") != settingID {
			t.Errorf("the editor's GET of the Setting schema: %d %v", code, body)
		}
	})

	t.Run("an object: its shape, and an update link only where the user may update it", func(t *testing.T) {
		code, body := ed.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+nine, nil)
		self := srv.URL + "/v1/management.cattle.io.settings/" + nine
		if code != http.StatusOK || str(body, "id") != nine || str(body, "type") != settingID || str(body, "value") != "" ||
			str(body, "metadata", "resourceVersion") == "" || str(body, "links", "self") != self || str(body, "links", "update") != self ||
			str(body, "links", "view") != self || str(body, "links", "patch") != self || str(body, "links", "remove") != "" {
			t.Errorf("the editor's GET of %s: %d %v", nine, code, body)
		}
		if code, body := ed.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+other, nil); code != http.StatusOK || str(body, "links", "update") != "" ||
			str(body, "links", "self") == "" {
			t.Errorf("the editor's GET of %s (not one of the nine): %d %v", other, code, body)
		}
		if code, body := vw.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+nine, nil); code != http.StatusOK || str(body, "links", "update") != "" {
			t.Errorf("the viewer's GET of %s: %d %v", nine, code, body)
		}
		code, body = vw.do(t, http.MethodGet, "/v1/leasetune.io.electionstatuses/leasetune", nil)
		if code != http.StatusOK || str(body, "id") != "leasetune" || body["status"] == nil || str(body, "links", "update") != "" ||
			str(body, "links", "view") != srv.URL+"/apis/leasetune.io/v1alpha1/electionstatuses/leasetune" {
			t.Errorf("the viewer's GET of the ElectionStatus: %d %v", code, body)
		}
		if code, body := nb.do(t, http.MethodGet, "/v1/leasetune.io.electionstatuses/leasetune", nil); code != http.StatusNotFound || body != nil {
			t.Errorf("nobody's GET of the ElectionStatus (no schema: 404, no body): %d %v", code, body)
		}
		if code, body := ed.do(t, http.MethodGet, "/v1/management.cattle.io.settings/no-such-setting", nil); code != http.StatusNotFound ||
			str(body, "code") != "NotFound" || !strings.Contains(str(body, "message"), `"no-such-setting" not found`) {
			t.Errorf("a missing Setting: %d %v", code, body)
		}
	})

	t.Run("PUT: refused by the schema, by RBAC as the user, by the webhook; a conflict; accepted", func(t *testing.T) {
		get := func(c steveClient, name string) map[string]interface{} {
			code, body := c.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+name, nil)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %v", name, code, body)
			}
			return body
		}
		put := func(c steveClient, name, value string, edit func(map[string]interface{})) (int, map[string]interface{}) {
			obj := get(c, name)
			obj["value"] = value
			if edit != nil {
				edit(obj)
			}
			return c.do(t, http.MethodPut, "/v1/management.cattle.io.settings/"+name, obj)
		}
		if code, body := put(vw, nine, "12s", nil); code != http.StatusForbidden || str(body, "code") != "PermissionDenied" ||
			str(body, "message") != "can not update management.cattle.io.setting" {
			t.Errorf("the viewer's PUT: %d %v", code, body)
		}
		if code, body := put(ed, other, "https://elsewhere.example", nil); code != http.StatusForbidden || str(body, "code") != "Forbidden" ||
			!strings.Contains(str(body, "message"), `User "`+users.editor.Name+`" cannot update resource "settings"`) {
			t.Errorf("the editor's PUT of %s (the kube-apiserver, as the editor): %d %v", other, code, body)
		}
		if code, body := put(ed, nine, "999ms", nil); code != http.StatusUnprocessableEntity ||
			!strings.HasPrefix(str(body, "message"), `admission webhook "settings.leasetune.io" denied the request`) {
			t.Errorf("the editor's PUT of 999ms (the webhook): %d %v", code, body)
		}
		if code, body := put(ed, nine, "12s", func(o map[string]interface{}) { delete(o["metadata"].(map[string]interface{}), "resourceVersion") }); code != http.StatusInternalServerError ||
			str(body, "message") != "metadata.resourceVersion is required for update" {
			t.Errorf("a PUT without resourceVersion: %d %v", code, body)
		}
		if got := settingValue(t, nine); got != "" {
			t.Fatalf("%s = %q after the refused PUTs", nine, got)
		}
		if got := settingValue(t, other); got != "https://rancher.example" {
			t.Fatalf("%s = %q after the refused PUT", other, got)
		}
		stale := get(ed, nine)
		code, body := put(ed, nine, "12s", nil)
		if code != http.StatusOK || str(body, "value") != "12s" || str(body, "links", "update") == "" ||
			str(body, "metadata", "resourceVersion") == str(stale, "metadata", "resourceVersion") {
			t.Errorf("the editor's PUT of 12s: %d %v", code, body)
		}
		if got := settingValue(t, nine); got != "12s" {
			t.Errorf("%s = %q after the editor's PUT, want 12s", nine, got)
		}
		stale["value"] = "13s"
		if code, body := ed.do(t, http.MethodPut, "/v1/management.cattle.io.settings/"+nine, stale); code != http.StatusConflict || str(body, "code") != "Conflict" {
			t.Errorf("a PUT of the object as read before another write: %d %v", code, body)
		}
	})

	t.Run("sessions and the CSRF check", func(t *testing.T) {
		if code, body := (steveClient{base: srv.URL}).do(t, http.MethodGet, "/v1/schemas", nil); code != http.StatusUnauthorized || str(body, "message") != "must authenticate" {
			t.Errorf("no session: %d %v", code, body)
		}
		if code, _ := (steveClient{base: srv.URL, session: "not-a-session"}).do(t, http.MethodGet, "/v1/schemas", nil); code != http.StatusUnauthorized {
			t.Errorf("an unknown session: %d", code)
		}
		// A browser's first request gets the CSRF cookie.
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/schemas", nil)
		req.Header.Set("User-Agent", "Mozilla/5.0")
		req.AddCookie(&http.Cookie{Name: framework.SessionCookie, Value: ed.session})
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var csrf string
		for _, c := range resp.Cookies() {
			if c.Name == "CSRF" && c.Secure && c.Path == "/" {
				csrf = c.Value
			}
		}
		if csrf == "" {
			t.Fatalf("no CSRF cookie for a browser: %v", resp.Header["Set-Cookie"])
		}
		browser := steveClient{base: srv.URL, session: ed.session, ua: "Mozilla/5.0", csrf: csrf}
		_, obj := browser.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+nine, nil)
		obj["value"] = "11s"
		if code, body := browser.do(t, http.MethodPut, "/v1/management.cattle.io.settings/"+nine, obj); code != http.StatusUnprocessableEntity ||
			str(body, "code") != "InvalidCSRFToken" {
			t.Errorf("a browser's PUT without X-API-CSRF: %d %v", code, body)
		}
		if got := settingValue(t, nine); got != "12s" {
			t.Errorf("%s = %q after a PUT refused for CSRF", nine, got)
		}
	})

	t.Run("subscribe: the watch of one object as the user", func(t *testing.T) {
		dial := func(session, origin string) (*websocket.Conn, error) {
			cfg, err := websocket.NewConfig("wss"+strings.TrimPrefix(srv.URL, "https")+"/v1/subscribe?sockId=1", origin)
			if err != nil {
				t.Fatal(err)
			}
			cfg.TlsConfig = &tls.Config{InsecureSkipVerify: true}
			cfg.Header = http.Header{"Cookie": {framework.SessionCookie + "=" + session}}
			return websocket.DialConfig(cfg)
		}
		if ws, err := dial(ed.session, "https://elsewhere.example"); err == nil {
			ws.Close()
			t.Error("a websocket from another origin was accepted")
		}
		ws, err := dial(ed.session, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		next := func() map[string]interface{} {
			t.Helper()
			_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			var m map[string]interface{}
			if err := websocket.JSON.Receive(ws, &m); err != nil {
				t.Fatalf("no event: %v", err)
			}
			return m
		}
		_, obj := ed.do(t, http.MethodGet, "/v1/management.cattle.io.settings/"+nine, nil)
		send := func(m map[string]interface{}) {
			if err := websocket.JSON.Send(ws, m); err != nil {
				t.Fatal(err)
			}
		}
		send(map[string]interface{}{"resourceType": settingID, "id": nine, "resourceVersion": str(obj, "metadata", "resourceVersion")})
		if e := next(); str(e, "name") != "resource.start" || str(e, "resourceType") != settingID || str(e, "id") != nine {
			t.Fatalf("first event %v, want resource.start", e)
		}
		patch, _ := json.Marshal(map[string]string{"value": "10s"})
		if _, err := dyn().Resource(framework.SettingsGVR).Patch(context.Background(), nine, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e := next()
		data, _ := e["data"].(map[string]interface{})
		if str(e, "name") != "resource.change" || str(data, "value") != "10s" || str(data, "id") != nine || str(data, "links", "update") == "" ||
			str(e, "revision") != str(data, "metadata", "resourceVersion") {
			t.Errorf("the change: %v", e)
		}
		// A type the user has no schema of: an error, then the stop.
		wn, err := dial(nb.session, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer wn.Close()
		if err := websocket.JSON.Send(wn, map[string]interface{}{"resourceType": statusID, "id": electionstatus.Name}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := 0; i < 2; i++ {
			_ = wn.SetReadDeadline(time.Now().Add(30 * time.Second))
			var m map[string]interface{}
			if err := websocket.JSON.Receive(wn, &m); err != nil {
				t.Fatalf("no event for nobody: %v", err)
			}
			d, _ := m["data"].(map[string]interface{})
			got = append(got, str(m, "name")+" "+str(d, "error"))
		}
		if joined(got) != "resource.error failed to find schema "+statusID+",resource.stop " {
			t.Errorf("nobody's subscription: %q", got)
		}
	})
}
