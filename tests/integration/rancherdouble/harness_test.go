package rancherdouble_test

import (
	"context"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/rancher"
)

var (
	prov  = rancher.ProvisioningClusters
	mgmt  = rancher.ManagementClusters
	fleet = rancher.FleetClusters
)

// harness is one test's namespace, double and objects. Its cleanup stops
// the double, then deletes the provisioning and fleet Clusters of its
// namespaces and the management Clusters it names.
type harness struct {
	t     *testing.T
	ns    string
	dyn   dynamic.Interface
	d     *rancher.Double
	mgmts []string // cluster-scoped names to delete
	nss   []string // namespaces whose clusters to delete
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dc, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ns: cp.Namespace(t), dyn: dc}
	h.nss = []string{h.ns}
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) cleanup() {
	if h.d != nil {
		h.d.Stop()
	}
	ctx := context.Background()
	for _, ns := range h.nss {
		for _, gvr := range []schema.GroupVersionResource{prov, fleet} {
			l, err := h.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, o := range l.Items {
				if ns == h.ns || h.owns(o.GetName()) {
					_ = h.dyn.Resource(gvr).Namespace(ns).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
				}
			}
		}
	}
	for _, n := range h.mgmts {
		_ = h.dyn.Resource(mgmt).Delete(ctx, n, metav1.DeleteOptions{})
	}
}

func (h *harness) owns(name string) bool {
	for _, n := range h.mgmts {
		if n == name {
			return true
		}
	}
	return false
}

// start (re)starts the double as version.
func (h *harness) start(version string, resync time.Duration) *rancher.Double {
	h.t.Helper()
	if h.d != nil {
		h.d.Stop()
	}
	d, err := rancher.Start(context.Background(), rancher.Options{Config: cp.Config, Version: version, Resync: resync})
	if err != nil {
		h.t.Fatalf("start double %s: %v", version, err)
	}
	h.d = d
	return d
}

func (h *harness) create(gvr schema.GroupVersionResource, obj map[string]interface{}) *unstructured.Unstructured {
	h.t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	if gvr == mgmt {
		h.mgmts = append(h.mgmts, u.GetName())
	}
	got, err := h.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	return got
}

// get returns the object, or nil when it does not exist.
func (h *harness) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	h.t.Helper()
	u, err := h.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		h.t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

// patch sends a JSON merge patch, as someone other than the double.
func (h *harness) patch(gvr schema.GroupVersionResource, ns, name string, p map[string]interface{}) {
	h.t.Helper()
	b, _ := json.Marshal(p)
	if _, err := h.dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		h.t.Fatalf("patch %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

// ensureNamespace creates a namespace with a fixed name if absent (left in
// place: other tests may use it); the harness deletes its own clusters there.
func (h *harness) ensureNamespace(name string) {
	h.t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		h.t.Fatal(err)
	}
	h.nss = append(h.nss, name)
}

// mgmtName waits for the provisioning Cluster's status.clusterName.
func (h *harness) mgmtName(ns, name string) string {
	h.t.Helper()
	var n string
	framework.Eventually(h.t, "status.clusterName of "+ns+"/"+name, func() bool {
		if u := h.get(prov, ns, name); u != nil {
			n, _, _ = unstructured.NestedString(u.Object, "status", "clusterName")
		}
		return n != ""
	})
	h.mgmts = append(h.mgmts, n)
	return n
}

// stable waits until the double's writes stop growing over a window, and
// returns the count.
func (h *harness) stable(window time.Duration) int {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w := h.d.TotalWrites()
		time.Sleep(window)
		if w2 := h.d.TotalWrites(); w2 == w {
			return w
		} else if time.Now().After(deadline) {
			h.t.Fatalf("the double does not converge: writes %d → %d in %s; errors %v", w, w2, window, h.d.Errors())
		}
	}
}

func envList(kv ...string) []interface{} {
	var out []interface{}
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, map[string]interface{}{"name": kv[i], "value": kv[i+1]})
	}
	return out
}

func equal(a []string, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// legacyName returns a random legacy management name c-xxxxx.
func legacyName(t *testing.T) string { return framework.LegacyClusterName(t) }

func provCluster(ns, name string, annotations map[string]interface{}, spec map[string]interface{}) map[string]interface{} {
	md := map[string]interface{}{"name": name, "namespace": ns}
	if annotations != nil {
		md["annotations"] = annotations
	}
	if spec == nil {
		spec = map[string]interface{}{}
	}
	return map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster", "metadata": md, "spec": spec}
}

func mgmtCluster(name string, annotations map[string]interface{}, spec map[string]interface{}) map[string]interface{} {
	md := map[string]interface{}{"name": name}
	if annotations != nil {
		md["annotations"] = annotations
	}
	return map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster", "metadata": md, "spec": spec}
}

func unstructuredString(obj map[string]interface{}, fields ...string) (string, bool, error) {
	return unstructured.NestedString(obj, fields...)
}

func (h *harness) createSetting(name, value string) {
	h.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "management.cattle.io/v3", "kind": "Setting",
		"metadata": map[string]interface{}{"name": name}, "value": value,
	}}
	if _, err := h.dyn.Resource(rancher.Settings).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create setting %s: %v", name, err)
	}
}

// ann and labels are nil-safe.
func ann(u *unstructured.Unstructured) map[string]string {
	if u == nil {
		return nil
	}
	return u.GetAnnotations()
}

func labels(u *unstructured.Unstructured) map[string]string {
	if u == nil {
		return nil
	}
	return u.GetLabels()
}
