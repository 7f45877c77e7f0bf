package stayingup_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/tests/integration/framework"
)

// allButSecrets is a ClusterRole granting every verb on every resource the
// apiserver serves (read from its discovery, subresources included), and on
// the Settings, except Secrets: what a controller whose Secret rights are
// missing, or refused by an apiserver that is coming up, is left with.
func allButSecrets(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	_, lists, err := cp.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	byGroup := map[string]map[string]bool{"management.cattle.io": {"settings": true}}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if gv.Group == "" && (r.Name == "secrets" || strings.HasPrefix(r.Name, "secrets/")) {
				continue
			}
			if byGroup[gv.Group] == nil {
				byGroup[gv.Group] = map[string]bool{}
			}
			byGroup[gv.Group][r.Name] = true
		}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for g, rs := range byGroup {
		var names []string
		for r := range rs {
			names = append(names, r)
		}
		sort.Strings(names)
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: names, Verbs: []string{"*"}})
	}
	return role
}

// TestFailedCertificateLookRetries: the first look at the webhook Secret
// fails (here the apiserver refuses it: the controller's user may do
// everything but read or write Secrets, as during an outage or with RBAC
// not yet in place). The process does not exit: /readyz answers 503 naming
// the webhook certificate and the apiserver's refusal, /healthz stays ok,
// and it tries again with backoff. Once the rights are granted the Secret
// is made, the webhook serves it and the replica becomes ready.
func TestFailedCertificateLookRetries(t *testing.T) {
	installSettingCRD(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	user := "stayingup-" + ns
	role := allButSecrets(t, user)
	rbac := cp.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	asUser := rest.CopyConfig(cp.Config)
	asUser.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}

	webhook := framework.FreeAddr(t)
	r := start(t, asUser, manager.Config{
		Namespace: ns, InstallCRDs: true,
		WebhookAddr: webhook, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"},
		CertCheckInterval: 4 * time.Second, // the backoff's cap, for the test's pace
	})
	body := r.waitFor(t, time.Minute, "/readyz", http.StatusServiceUnavailable,
		"webhook certificate: not in place yet: webhook TLS Secret "+ns+"/leasetune-webhook-tls", "forbidden", "trying again with backoff")
	t.Logf("readyz: %q", body)
	if code, b := get("http://" + r.health + "/healthz"); code != http.StatusOK {
		t.Errorf("healthz %d %q: waiting for a certificate is no reason to restart", code, b)
	}
	// Several attempts, with backoff, and still waiting, not exited.
	time.Sleep(8 * time.Second)
	r.alive(t)
	if code, b := get("http://" + r.health + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(b, "webhook certificate: ") {
		t.Errorf("readyz %d %q while the Secret is still refused", code, b)
	}
	if n := strings.Count(r.logs.String(), "webhook certificate; trying again"); n < 3 {
		t.Errorf("%d failed attempts logged in 8s; want at least 3 (1s, 2s, 4s)", n)
	}

	// The cause fixed: rights on Secrets in its namespace.
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "secrets"}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secrets"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, time.Minute, "/readyz", http.StatusOK)
	if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, "leasetune-webhook-tls", metav1.GetOptions{}); err != nil {
		t.Errorf("the webhook Secret: %v", err)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", webhook, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the certificate is checked below
	if err != nil {
		t.Fatalf("the webhook does not serve a certificate once ready: %v", err)
	}
	defer c.Close()
	if cs := c.ConnectionState(); len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].VerifyHostname("leasetune-webhook."+ns+".svc") != nil {
		t.Errorf("served certificate not for leasetune-webhook.%s.svc", ns)
	}
	if !strings.Contains(r.logs.String(), "webhook certificate in place; ready") {
		t.Errorf("no log line says the certificate is in place")
	}
	r.alive(t)
}
