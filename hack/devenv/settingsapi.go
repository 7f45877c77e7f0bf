package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/admission"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/settings"
)

// settingsEditor is the ServiceAccount (in leasetune's namespace) whose
// token the printout gives for the /v3/settings API, and the name of its
// ClusterRole and binding.
const settingsEditor = "settings-editor"

// settingsAPIToken creates the ServiceAccount settingsEditor in ns with a
// ClusterRole for the nine settings (get, update and patch by name; list,
// which RBAC cannot limit by name, for GET /v3/settings) and returns a token
// for it from the TokenRequest API. The API acts with the caller's token, so
// these are the rights it needs.
func settingsAPIToken(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	var names []string
	for _, d := range settings.Registry {
		names = append(names, d.Name)
	}
	role := "leasetune-" + settingsEditor
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: settingsEditor}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"management.cattle.io"}, Resources: []string{"settings"}, ResourceNames: names, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{"management.cattle.io"}, Resources: []string{"settings"}, Verbs: []string{"list"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: settingsEditor, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	day := int64(24 * 60 * 60)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, settingsEditor,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", ns, settingsEditor, err)
	}
	return tr.Status.Token, nil
}

// webhookCA waits (up to a minute) for leasetune to create its webhook
// Secret in ns and writes the CA in it to dir/webhook-ca.crt, for curl
// --cacert; it returns the file's path.
func webhookCA(ctx context.Context, cs kubernetes.Interface, ns, dir string) (string, error) {
	var ca []byte
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, own.WebhookSecret, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ca = s.Data[admission.CAKey]
		return len(ca) > 0, nil
	})
	if err != nil {
		return "", fmt.Errorf("leasetune's webhook Secret %s/%s: %w", ns, own.WebhookSecret, err)
	}
	path := filepath.Join(dir, "webhook-ca.crt")
	return path, os.WriteFile(path, ca, 0o644)
}
