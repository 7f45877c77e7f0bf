package uiplugin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/tests/integration/framework"
)

var statusGVR = schema.GroupVersionResource{Group: electionstatus.APIGroup, Version: electionstatus.Version, Resource: electionstatus.Resource}

// The page's users, as an administrator would set them up with the
// chart's ClusterRoles (charts/leasetune/templates/rbac-roles.yaml): each
// a Rancher user that Rancher's steve impersonates on the kube-apiserver.
type pageUsers struct {
	// editor has leasetune-edit; viewer has leasetune-view and the read of
	// the Settings every Rancher user has; nobody has no binding at all.
	editor, viewer, nobody framework.SteveUser
}

// userBaseSettings is the Settings rule of Rancher's "User Base" global
// role, which every Rancher user has (rancher/rancher v2.12.12
// pkg/data/management/role_data.go: settings get, list, watch).
var userBaseSettings = rbacv1.PolicyRule{APIGroups: []string{"management.cattle.io"}, Resources: []string{"settings"}, Verbs: []string{"get", "list", "watch"}}

// setUpUsers creates the chart's leasetune-view and leasetune-edit
// ClusterRoles (rendered for leasetune in ns), a ClusterRole with
// userBaseSettings, and binds them to three new users (names unique to
// ns); all of it is deleted when t ends.
func setUpUsers(t *testing.T, ns string) pageUsers {
	t.Helper()
	ctx := context.Background()
	roles := map[string]*rbacv1.ClusterRole{}
	for _, d := range render(t, "namespaceOverride="+ns) {
		var r rbacv1.ClusterRole
		if !bytes.Contains(d, []byte("kind: ClusterRole\n")) {
			continue
		}
		if err := utilyaml.Unmarshal(d, &r); err != nil {
			t.Fatal(err)
		}
		if r.Name == "leasetune-view" || r.Name == "leasetune-edit" {
			roles[r.Name] = &r
		}
	}
	if roles["leasetune-view"] == nil || roles["leasetune-edit"] == nil {
		t.Fatalf("the chart renders no leasetune-view or leasetune-edit ClusterRole (found %d)", len(roles))
	}
	roles[ns+"-user-base"] = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-user-base"}, Rules: []rbacv1.PolicyRule{userBaseSettings}}
	for _, r := range roles {
		r.ResourceVersion = ""
		_ = cp.Client.RbacV1().ClusterRoles().Delete(ctx, r.Name, metav1.DeleteOptions{})
		if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		name := r.Name
		t.Cleanup(func() {
			_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	u := pageUsers{
		editor: framework.SteveUser{Name: "editor-" + ns},
		viewer: framework.SteveUser{Name: "viewer-" + ns},
		nobody: framework.SteveUser{Name: "nobody-" + ns},
	}
	bind := func(user, role string) {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
		if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
	}
	bind(u.editor.Name, "leasetune-edit")
	bind(u.viewer.Name, "leasetune-view")
	bind(u.viewer.Name, ns+"-user-base")
	// RBAC takes effect at once, but wait until the kube-apiserver's
	// authorizer answers so (its informers), so that no step sees a stale
	// refusal.
	framework.Eventually(t, "the roles bound", func() bool {
		return canI(t, u.editor, "update", "settings", "fleet-agent-leader-election-retry-period") &&
			canI(t, u.viewer, "get", "electionstatuses", electionstatus.Name)
	})
	return u
}

// canI asks the kube-apiserver whether user may verb the named object of
// resource (a SubjectAccessReview).
func canI(t *testing.T, user framework.SteveUser, verb, resource, name string) bool {
	t.Helper()
	group := "management.cattle.io"
	if resource == electionstatus.Resource {
		group = electionstatus.APIGroup
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user.Name, Groups: user.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Name: name}}}
	r, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// newSteve starts the steve double over the Settings and the
// ElectionStatus on a TLS server of its own (for the double's own tests;
// the browser test mounts it in the stand-in).
func newSteve(t *testing.T) *framework.Steve {
	t.Helper()
	s, err := framework.NewSteve(cp.Config, framework.SettingsGVR, statusGVR)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// steveClient calls a steve double at base as the user of session, as a
// program would (no browser: no CSRF check).
type steveClient struct {
	base, session string
	ua, csrf      string
}

// do makes a request and decodes the JSON answer (nil when there is
// none).
func (c steveClient) do(t *testing.T, method, path string, body interface{}) (int, map[string]interface{}) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if c.session != "" {
		req.AddCookie(&http.Cookie{Name: framework.SessionCookie, Value: c.session})
	}
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
	if c.csrf != "" {
		req.AddCookie(&http.Cookie{Name: "CSRF", Value: c.csrf})
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if len(bytes.TrimSpace(raw)) == 0 {
		return resp.StatusCode, nil
	}
	var out map[string]interface{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON: %v", method, path, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out
}

// serveSteve serves s on a TLS test server.
func serveSteve(t *testing.T, s *framework.Steve) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// login starts a session of user on s.
func login(t *testing.T, s *framework.Steve, user framework.SteveUser) string {
	t.Helper()
	v, err := s.Login(user)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// str is v[path...] as a string ("" when absent).
func str(v map[string]interface{}, path ...string) string {
	var cur interface{} = v
	for _, p := range path {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// strs is v[key] as strings.
func strs(v map[string]interface{}, key string) []string {
	l, _ := v[key].([]interface{})
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func has(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func joined(l []string) string { return strings.Join(l, ",") }
