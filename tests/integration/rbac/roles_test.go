package rbac_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

var statusGVR = electionstatus.GVR

// applyChartRBAC renders the chart for leasetune in a new namespace (its
// Fleet and Rancher namespaces new ones too), creates its RBAC objects and
// returns leasetune's namespace and the ClusterRoles by name.
func applyChartRBAC(t *testing.T) (string, map[string]rbacv1.ClusterRole) {
	t.Helper()
	ns := cp.Namespace(t)
	docs := render(t, "namespaceOverride="+ns, "fleetNamespace="+cp.Namespace(t), "rancherNamespace="+cp.Namespace(t))
	applyRBAC(t, docs)
	roles := map[string]rbacv1.ClusterRole{}
	for _, d := range docs {
		var meta metav1.TypeMeta
		mustDecode(t, d, &meta)
		if meta.Kind == "ClusterRole" {
			var r rbacv1.ClusterRole
			mustDecode(t, d, &r)
			roles[r.Name] = r
		}
	}
	return ns, roles
}

// TestServiceAccountHasNoRightOnUIPlugins asks the kube-apiserver, as
// `kubectl auth can-i --as=system:serviceaccount:<ns>:leasetune` does,
// whether leasetune's ServiceAccount may write UIPlugins with the chart's
// RBAC: no (the chart installs the UIPlugin; issue 25), nor read the
// UIPlugin CRD; and, so that the question is not answered "no" for
// another reason, yes for what it does write.
func TestServiceAccountHasNoRightOnUIPlugins(t *testing.T) {
	ns, _ := applyChartRBAC(t)
	cp.InstallUIPluginCRD(t) // so that kubectl finds "uiplugins" by discovery
	kc, err := cp.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := framework.KubectlPath()
	if err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:" + ns + ":leasetune"
	canI := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kc, "auth", "can-i", "--as=" + sa}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		answer := strings.TrimSpace(string(out))
		// can-i exits 0 for yes and 1 for no; anything else is a failure to ask.
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1 && answer == "no") {
			t.Fatalf("kubectl auth can-i %v: %v %q\n%s", args, err, answer, &stderr)
		}
		return answer
	}
	// RBAC follows new bindings through an informer: wait for the yes first.
	framework.Eventually(t, "the chart's rights in force", func() bool {
		return canI("patch", "settings.management.cattle.io/fleet-leader-election-retry-period") == "yes"
	})
	for _, q := range [][]string{
		{"create", "uiplugins"},
		{"create", "uiplugins", "-n", "cattle-ui-plugin-system"},
		{"create", "uiplugins.catalog.cattle.io", "--all-namespaces"},
		{"patch", "uiplugins/leasetune", "-n", "cattle-ui-plugin-system"},
		{"update", "uiplugins/leasetune", "-n", "cattle-ui-plugin-system"},
		{"delete", "uiplugins/leasetune", "-n", "cattle-ui-plugin-system"},
		{"get", "uiplugins/leasetune", "-n", "cattle-ui-plugin-system"},
		{"get", "customresourcedefinitions.apiextensions.k8s.io/uiplugins.catalog.cattle.io"},
	} {
		if got := canI(q...); got != "no" {
			t.Errorf("kubectl auth can-i --as=%s %s: %q, want no", sa, strings.Join(q, " "), got)
		}
	}
	// What it writes among the status resources: its ElectionStatus's
	// status, and nothing else of the kind.
	for q, want := range map[string]string{
		"patch electionstatuses.leasetune.io/leasetune --subresource=status": "yes",
		"patch electionstatuses.leasetune.io/other --subresource=status":     "no",
		"update electionstatuses.leasetune.io/leasetune":                     "no",
		"delete electionstatuses.leasetune.io/leasetune":                     "no",
	} {
		if got := canI(strings.Fields(q)...); got != want {
			t.Errorf("kubectl auth can-i --as=%s %s: %q, want %s", sa, q, got, want)
		}
	}
}

// TestViewAndEditRoles binds the chart's leasetune-view and leasetune-edit
// to two users and acts as each on the real kube-apiserver (impersonation
// with the envtest admin's config, as steve acts as the Rancher user): the
// viewer gets, lists and watches the ElectionStatus by name and nothing
// more, and a PUT of a Setting as the viewer is refused with the Setting
// unchanged; the editor updates and patches each of the nine Settings and
// no other Setting.
func TestViewAndEditRoles(t *testing.T) {
	ctx := context.Background()
	_, roles := applyChartRBAC(t)
	for _, name := range []string{"leasetune-view", "leasetune-edit"} {
		r, ok := roles[name]
		if !ok {
			t.Fatalf("the chart has no ClusterRole %s", name)
		}
		if r.Labels["app.kubernetes.io/name"] != "leasetune" {
			t.Errorf("%s labels %v", name, r.Labels)
		}
		for k := range r.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
				t.Errorf("%s is aggregated into Kubernetes' roles (%s)", name, k)
			}
		}
	}

	// The objects: the ElectionStatus (as the leader makes it), the nine
	// Settings, and one Setting that is not leasetune's.
	admin := dynamic.NewForConfigOrDie(cp.Config)
	ensure := func(gvr schema.GroupVersionResource, obj map[string]interface{}) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		if _, err := admin.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ensure(statusGVR, map[string]interface{}{"apiVersion": electionstatus.APIGroup + "/" + electionstatus.Version, "kind": electionstatus.Kind,
		"metadata": map[string]interface{}{"name": electionstatus.Name}})
	setting := func(name, def string) map[string]interface{} {
		return map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Setting",
			"metadata": map[string]interface{}{"name": name}, "default": def, "value": ""}
	}
	for _, d := range settings.Registry {
		ensure(framework.SettingsGVR, setting(d.Name, d.Default))
	}
	ensure(framework.SettingsGVR, setting("server-url", ""))
	valueOf := func(name string) string {
		t.Helper()
		u, err := admin.Resource(framework.SettingsGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedString(u.Object, "value")
		return v
	}

	bind := func(role, user string) dynamic.Interface {
		t.Helper()
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-" + user},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
		if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
		c := rest.CopyConfig(cp.Config)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		d := dynamic.NewForConfigOrDie(c)
		framework.Eventually(t, role+" in force for "+user, func() bool {
			_, err := d.Resource(statusGVR).Get(ctx, electionstatus.Name, metav1.GetOptions{})
			return err == nil
		})
		return d
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want 403 Forbidden", what, err)
		}
	}
	byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", electionstatus.Name).String()}

	t.Run("leasetune-view", func(t *testing.T) {
		viewer := bind("leasetune-view", "jane-viewer")
		res := viewer.Resource(statusGVR)
		if l, err := res.List(ctx, byName); err != nil || len(l.Items) != 1 {
			t.Errorf("list by name: %v", err)
		}
		// The watch by name sees the object, then a change of its status.
		w, err := res.Watch(ctx, byName)
		if err != nil {
			t.Fatalf("watch by name: %v", err)
		}
		defer w.Stop()
		if ev := next(t, w); ev.Type != watch.Added {
			t.Errorf("first event %s, want ADDED", ev.Type)
		}
		patch := `{"status":{"clustersNotListed":7}}`
		if _, err := admin.Resource(statusGVR).Patch(ctx, electionstatus.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		if ev := next(t, w); ev.Type != watch.Modified {
			t.Errorf("after a status change: %s, want MODIFIED", ev.Type)
		}
		// Nothing beyond the one object, and no write.
		_, err = res.List(ctx, metav1.ListOptions{})
		forbidden("list of every ElectionStatus", err)
		_, err = res.Get(ctx, "other", metav1.GetOptions{})
		forbidden("get of another ElectionStatus", err)
		_, err = res.Patch(ctx, electionstatus.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		forbidden("patch of the ElectionStatus's status", err)

		// The page's path in Rancher is steve's PUT as the user: the
		// kube-apiserver refuses it, and the Setting is as it was.
		name := settings.Registry[0].Name
		before := valueOf(name)
		u, err := admin.Resource(framework.SettingsGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(u.Object, "31s", "value")
		_, err = viewer.Resource(framework.SettingsGVR).Update(ctx, u, metav1.UpdateOptions{})
		forbidden("PUT of "+name+" as a viewer", err)
		if after := valueOf(name); after != before {
			t.Errorf("%s changed from %q to %q", name, before, after)
		}
	})

	t.Run("leasetune-edit", func(t *testing.T) {
		editor := bind("leasetune-edit", "sam-editor")
		res := editor.Resource(framework.SettingsGVR)
		if l, err := res.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) < len(settings.Registry)+1 {
			t.Errorf("list of the Settings: %v", err)
		}
		w, err := res.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch of the Settings: %v", err)
		}
		w.Stop()
		for _, d := range settings.Registry {
			// PUT, as steve's Update sends the page's save.
			u, err := res.Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get %s: %v", d.Name, err)
			}
			_ = unstructured.SetNestedField(u.Object, d.Default, "value")
			if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				t.Errorf("PUT of %s as an editor: %v", d.Name, err)
				continue
			}
			if got := valueOf(d.Name); got != d.Default {
				t.Errorf("%s = %q after the editor's PUT, want %q", d.Name, got, d.Default)
			}
			// PATCH, as kubectl, Rancher's dashboard and /v3/settings send:
			// back to the default.
			if _, err := res.Patch(ctx, d.Name, types.MergePatchType, []byte(`{"value":""}`), metav1.PatchOptions{}); err != nil {
				t.Errorf("PATCH of %s as an editor: %v", d.Name, err)
			}
			if got := valueOf(d.Name); got != "" {
				t.Errorf("%s = %q after the editor's PATCH, want empty", d.Name, got)
			}
		}
		// Another Setting: neither written nor made nor deleted.
		u, err := res.Get(ctx, "server-url", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get server-url: %v", err)
		}
		_ = unstructured.SetNestedField(u.Object, "https://elsewhere.example", "value")
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		forbidden("PUT of server-url as an editor", err)
		_, err = res.Patch(ctx, "server-url", types.MergePatchType, []byte(`{"value":"https://elsewhere.example"}`), metav1.PatchOptions{})
		forbidden("PATCH of server-url as an editor", err)
		if v := valueOf("server-url"); v != "" {
			t.Errorf("server-url = %q", v)
		}
		_, err = res.Create(ctx, &unstructured.Unstructured{Object: setting("leasetune-test-new", "")}, metav1.CreateOptions{})
		forbidden("create of a Setting as an editor", err)
		err = res.Delete(ctx, settings.Registry[0].Name, metav1.DeleteOptions{})
		forbidden("delete of "+settings.Registry[0].Name+" as an editor", err)
		// And the view role's part.
		if l, err := editor.Resource(statusGVR).List(ctx, byName); err != nil || len(l.Items) != 1 {
			t.Errorf("list of the ElectionStatus by name as an editor: %v", err)
		}
		_, err = editor.Resource(statusGVR).Patch(ctx, electionstatus.Name, types.MergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status")
		forbidden("patch of the ElectionStatus's status as an editor", err)
	})
}

// next returns the watch's next event within 30 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return watch.Event{}
}

// TestServiceAccountWatchesOnlyItsStatusCRD: with the chart's RBAC,
// leasetune's ServiceAccount lists and watches the CRD
// electionstatuses.leasetune.io by name (a metadata.name field selector,
// which the kube-apiserver authorizes against resourceNames), as the
// leader does while that CRD is missing; and lists no other CRD, nor all
// of them.
func TestServiceAccountWatchesOnlyItsStatusCRD(t *testing.T) {
	ns, _ := applyChartRBAC(t)
	ctx := context.Background()
	c := rest.CopyConfig(cp.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":leasetune",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	crds := dynamic.NewForConfigOrDie(c).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	const own = "electionstatuses.leasetune.io"
	// RBAC follows new bindings through an informer: wait for the yes first.
	framework.Eventually(t, "the chart's rights in force", func() bool {
		_, err := crds.List(ctx, byName(own))
		return err == nil
	})
	w, err := crds.Watch(ctx, byName(own))
	if err != nil {
		t.Fatalf("watch of %s by name: %v", own, err)
	}
	w.Stop()
	if _, err := crds.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list of every CRD: %v, want Forbidden", err)
	}
	for _, other := range []string{"uiplugins.catalog.cattle.io", "clusters.fleet.cattle.io"} {
		if _, err := crds.List(ctx, byName(other)); !apierrors.IsForbidden(err) {
			t.Errorf("list of %s by name: %v, want Forbidden", other, err)
		}
		if _, err := crds.Watch(ctx, byName(other)); !apierrors.IsForbidden(err) {
			t.Errorf("watch of %s by name: %v, want Forbidden", other, err)
		}
	}
	if _, err := crds.Get(ctx, own, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get of %s: %v, want Forbidden (list and watch only)", own, err)
	}
}
