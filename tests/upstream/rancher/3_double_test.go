//go:build upstream

package rancher_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	itfw "leasetune.io/leasetune/tests/integration/framework"
	rancherdouble "leasetune.io/leasetune/tests/rancher"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// Test07DoubleAgrees is case 8: the Rancher double (tests/rancher) as
// v2.12.12, on a control plane of its own, given the source objects case
// 3 left on the real Rancher (the user's env and annotation, leasetune's
// entries and record), makes the same copies: the env and those
// annotations of every management and fleet Cluster, and of the
// provisioning Clusters it generates, as the real Rancher did.
func Test07DoubleAgrees(t *testing.T) {
	framework.Need(t, in)
	if len(snapshot) == 0 {
		t.Skip("case 3 (Test06ManagedClusters) did not reach its snapshot")
	}
	ctx := context.Background()
	cp, err := itfw.Start(itfw.Options{RepoCRDs: []string{itfw.ManagementCRD}, SharedCRDs: []string{itfw.FleetClusterCRD, itfw.ProvisioningCRD}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	for _, ns := range []string{"fleet-default", "fleet-local"} {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := rancherdouble.Start(ctx, rancherdouble.Options{Config: cp.Config, Version: in.RancherVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	create := func(gvr schema.GroupVersionResource, ns string, obj map[string]interface{}) {
		t.Helper()
		u := &unstructured.Unstructured{Object: obj}
		res := dyn.Resource(gvr)
		var err error
		if ns == "" {
			_, err = res.Create(ctx, u, metav1.CreateOptions{})
		} else {
			_, err = res.Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create %s: %v", gvr.Resource, err)
		}
	}
	envList := func(env []string) []interface{} {
		var out []interface{}
		for _, e := range env {
			n, v, _ := strings.Cut(e, "=")
			out = append(out, map[string]interface{}{"name": n, "value": v})
		}
		return out
	}
	ann := func(m map[string]string) map[string]interface{} {
		out := map[string]interface{}{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	// The double's names of each real cluster's objects.
	type names struct{ provNS, prov, mgmt string }
	got := map[string]*names{}
	for _, c := range snapshot {
		switch c.Kind {
		case "local":
			create(framework.ManagementClusters, "", map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
				"metadata": map[string]interface{}{"name": "local", "annotations": ann(c.MgmtAnn)},
				"spec":     map[string]interface{}{"internal": true, "displayName": "local", "agentEnvVars": envList(c.Mgmt)}})
			got[c.Kind] = &names{"fleet-local", "local", "local"}
		case "legacy":
			create(framework.ManagementClusters, "", map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
				"metadata": map[string]interface{}{"name": c.MgmtName, "annotations": ann(c.MgmtAnn)},
				"spec":     map[string]interface{}{"displayName": c.ProvName, "fleetWorkspaceName": "fleet-default", "agentEnvVars": envList(c.Mgmt)}})
			got[c.Kind] = &names{"fleet-default", c.MgmtName, c.MgmtName}
		case "imported", "rke2":
			spec := map[string]interface{}{"agentEnvVars": envList(c.Prov)}
			if c.Kind == "rke2" {
				spec["kubernetesVersion"], spec["rkeConfig"] = "v1.32.5+rke2r1", map[string]interface{}{}
			}
			create(framework.ProvisioningClusters, "fleet-default", map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
				"metadata": map[string]interface{}{"name": c.ProvName, "namespace": "fleet-default", "annotations": ann(c.ProvAnn)}, "spec": spec})
			got[c.Kind] = &names{provNS: "fleet-default", prov: c.ProvName}
		}
	}
	get := func(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
		res := dyn.Resource(gvr)
		var u *unstructured.Unstructured
		if ns == "" {
			u, _ = res.Get(ctx, name, metav1.GetOptions{})
		} else {
			u, _ = res.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		}
		return u
	}
	// An imported cluster's management Cluster is the source once made
	// (v2.11+): put the real one's env and annotations on the double's, as
	// leasetune wrote them there.
	for _, c := range snapshot {
		if c.Kind != "imported" {
			continue
		}
		n := got[c.Kind]
		framework.Within(t, time.Minute, "the double's management Cluster of "+c.ProvName, func() bool {
			if u := get(framework.ProvisioningClusters, n.provNS, n.prov); u != nil {
				n.mgmt, _, _ = unstructured.NestedString(u.Object, "status", "clusterName")
			}
			return n.mgmt != ""
		})
		var m *unstructured.Unstructured
		framework.Within(t, time.Minute, "the double's management Cluster "+n.mgmt, func() bool {
			m = get(framework.ManagementClusters, "", n.mgmt)
			return m != nil
		})
		_ = unstructured.SetNestedSlice(m.Object, envList(c.Mgmt), "spec", "agentEnvVars")
		a := m.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for k, v := range c.MgmtAnn {
			a[k] = v
		}
		m.SetAnnotations(a)
		if _, err := dyn.Resource(framework.ManagementClusters).Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var diffs string
	framework.Within(t, 2*time.Minute, "the double's copies equal the real Rancher's", func() bool {
		var b strings.Builder
		for _, c := range snapshot {
			n := got[c.Kind]
			if n.mgmt == "" {
				if u := get(framework.ProvisioningClusters, n.provNS, n.prov); u != nil {
					n.mgmt, _, _ = unstructured.NestedString(u.Object, "status", "clusterName")
				}
			}
			p := get(framework.ProvisioningClusters, n.provNS, n.prov)
			m := get(framework.ManagementClusters, "", n.mgmt)
			f := get(framework.FleetClusters, n.provNS, n.prov)
			if p == nil || m == nil || f == nil {
				fmt.Fprintf(&b, "%s: the double has not made every object yet (prov %v, mgmt %v, fleet %v)\n", c.Kind, p != nil, m != nil, f != nil)
				continue
			}
			for _, x := range []struct {
				what       string
				real, dbl  []string
				realA, dbA map[string]string
			}{
				{"provisioning", c.Prov, envNames(p), c.ProvAnn, keptAnnotations(p)},
				{"management", c.Mgmt, envNames(m), c.MgmtAnn, keptAnnotations(m)},
				{"fleet", c.Fleet, envNames(f), c.FAnn, keptAnnotations(f)},
			} {
				if fmt.Sprint(x.real) != fmt.Sprint(x.dbl) {
					fmt.Fprintf(&b, "%s %s Cluster env: real %v, double %v\n", c.Kind, x.what, x.real, x.dbl)
				}
				if fmt.Sprint(x.realA) != fmt.Sprint(x.dbA) {
					fmt.Fprintf(&b, "%s %s Cluster annotations: real %v, double %v\n", c.Kind, x.what, x.realA, x.dbA)
				}
			}
		}
		diffs = b.String()
		return diffs == ""
	}, func() string { return diffs })
	for _, c := range snapshot {
		t.Logf("%s (source %s): management %v %v; fleet %v %v", c.Kind, map[bool]string{true: "management", false: "provisioning"}[c.SourceIsMgmt], c.Mgmt, c.MgmtAnn, c.Fleet, c.FAnn)
	}
	if errs := d.Errors(); len(errs) > 0 {
		t.Errorf("the double's errors: %v", errs)
	}
}
