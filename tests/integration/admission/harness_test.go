package admission_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// server is a manager running in this process, with its webhook on addr.
type server struct {
	ns, addr string
	fleetNS  string
	cancel   context.CancelFunc
	done     chan error
}

// startServer runs the manager as the project's service account (so its own
// writes are exempt, as in a real installation) with the given env for the
// settings, and installs the chart's webhook configuration pointed at it.
func startServer(t *testing.T, env map[string]string) *server {
	t.Helper()
	cp.ResetSettings(t)
	s := &server{ns: cp.Namespace(t), fleetNS: cp.Namespace(t), addr: framework.FreeAddr(t), done: make(chan error, 1)}
	installWebhookConfig(t, s)
	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + s.ns + ":leasetune", Groups: []string{"system:masters"}}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		s.done <- manager.Run(ctx, sa, manager.Config{
			Namespace: s.ns, FleetNamespace: s.fleetNS, RancherNamespace: cp.Namespace(t),
			QPS: 100, Burst: 200, Workers: 1,
			WebhookAddr: s.addr, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"}, CertCheckInterval: time.Second,
			WebhookConfigName: "leasetune", ServiceAccount: "system:serviceaccount:" + s.ns + ":leasetune",
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	t.Cleanup(func() { s.stop(t) })
	framework.Eventually(t, "settings created", func() bool {
		l, err := dyn().Resource(framework.SettingsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) >= len(settings.Registry)
	})
	framework.Eventually(t, "webhook answers", func() bool {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: time.Second}
		resp, err := c.Get("https://" + s.addr + "/v3/settings")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	framework.Eventually(t, "caBundle published", func() bool {
		v, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "leasetune", metav1.GetOptions{})
		return err == nil && len(v.Webhooks[0].ClientConfig.CABundle) > 0 && len(v.Webhooks[1].ClientConfig.CABundle) > 0
	})
	return s
}

// stop stops the server and fails t if it ended with an error.
func (s *server) stop(t testing.TB) {
	if s.cancel != nil {
		s.cancel()
		if err := <-s.done; err != nil {
			t.Errorf("the server after cancel: %v", err)
		}
		s.cancel = nil
	}
}

// installWebhookConfig renders the chart and installs its
// ValidatingWebhookConfiguration, pointed at s by URL.
func installWebhookConfig(t *testing.T, s *server) {
	t.Helper()
	cp.InstallWebhookConfig(t, framework.RenderChart(t, "namespaceOverride="+s.ns), s.addr)
}

func dyn() dynamic.Interface { return dynamic.NewForConfigOrDie(cp.Config) }

// patchValue writes value as an admin would with kubectl.
func patchValue(name, value string) error {
	body, _ := json.Marshal(map[string]string{"value": value})
	_, err := dyn().Resource(framework.SettingsGVR).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// token returns a bearer token for a new service account bound to a
// ClusterRole with the given verbs on settings (none: no binding).
func token(t *testing.T, ns, name string, verbs ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(verbs) > 0 {
		role := ns + "-" + name
		if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"management.cattle.io"}, Resources: []string{"settings"}, Verbs: verbs}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// call makes an API request and returns the status and the decoded body.
func call(t *testing.T, s *server, method, path, tok, body string) (int, map[string]interface{}) {
	t.Helper()
	req, _ := http.NewRequest(method, "https://"+s.addr+path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]interface{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
