package chart_test

import (
	"reflect"
	"testing"

	"leasetune.io/leasetune/tests/helmchart"
)

var monitoringAPIs = []string{"--api-versions", helmchart.ServiceMonitor, "--api-versions", helmchart.PrometheusRule}

// kinds counts the ServiceMonitors and PrometheusRules of a render.
func kinds(t *testing.T, args ...string) (serviceMonitors, rules int) {
	t.Helper()
	objs := helmchart.Objects(t, helmchart.Render(t, args...))
	return len(helmchart.Find(objs, "ServiceMonitor")), len(helmchart.Find(objs, "PrometheusRule"))
}

// TestMonitoringGated: the ServiceMonitor and the PrometheusRule are
// rendered only with monitoring.enabled, each only where its kind is
// served.
func TestMonitoringGated(t *testing.T) {
	on := []string{"--set", "monitoring.enabled=true"}
	for _, c := range []struct {
		name          string
		args          []string
		wantSM, wantR int
	}{
		{"off (the default), kinds served", monitoringAPIs, 0, 0},
		{"on, kinds not served", on, 0, 0},
		{"on, kinds served", append(append([]string{}, on...), monitoringAPIs...), 1, 1},
		{"on, only ServiceMonitor served", append(append([]string{}, on...), "--api-versions", helmchart.ServiceMonitor), 1, 0},
		{"on, only PrometheusRule served", append(append([]string{}, on...), "--api-versions", helmchart.PrometheusRule), 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sm, r := kinds(t, c.args...)
			if sm != c.wantSM || r != c.wantR {
				t.Errorf("ServiceMonitors %d, PrometheusRules %d; want %d and %d", sm, r, c.wantSM, c.wantR)
			}
		})
	}
}

// nested walks m along keys.
func nested(m map[string]interface{}, keys ...string) interface{} {
	var cur interface{} = m
	for _, k := range keys {
		mm, ok := cur.(map[string]interface{})
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// TestServiceMonitorSelectsTheMetricsService: of the Services the chart
// renders, the ServiceMonitor's selector matches the leasetune-metrics
// Service alone, in the release namespace, and its endpoint names that
// Service's metrics port; monitoring.labels reach both objects.
func TestServiceMonitorSelectsTheMetricsService(t *testing.T) {
	args := append(append([]string{}, monitoringAPIs...), "--set", "monitoring.enabled=true",
		"--set", "monitoring.labels.release=kube-prometheus-stack", "--api-versions", helmchart.UIPlugin)
	objs := helmchart.Objects(t, helmchart.Render(t, args...))
	sms := helmchart.Find(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors", len(sms))
	}
	sm := sms[0].Doc
	sel, _ := nested(sm, "spec", "selector", "matchLabels").(map[string]interface{})
	if len(sel) == 0 {
		t.Fatal("the ServiceMonitor selects by no label")
	}
	var matched []string
	for _, svc := range helmchart.Find(objs, "Service") {
		labels, _ := nested(svc.Doc, "metadata", "labels").(map[string]interface{})
		all := true
		for k, v := range sel {
			all = all && labels[k] == v
		}
		if all {
			matched = append(matched, svc.Name)
			ports, _ := nested(svc.Doc, "spec", "ports").([]interface{})
			endpoints, _ := nested(sm, "spec", "endpoints").([]interface{})
			for _, e := range endpoints {
				want := e.(map[string]interface{})["port"]
				found := false
				for _, p := range ports {
					found = found || p.(map[string]interface{})["name"] == want
				}
				if !found {
					t.Errorf("the ServiceMonitor's endpoint port %v is not a port of %s", want, svc.Name)
				}
			}
		}
	}
	if !reflect.DeepEqual(matched, []string{"leasetune-metrics"}) {
		t.Errorf("the ServiceMonitor selects the Services %v, want only leasetune-metrics", matched)
	}
	if ns := nested(sm, "spec", "namespaceSelector", "matchNames"); !reflect.DeepEqual(ns, []interface{}{helmchart.Namespace}) {
		t.Errorf("namespaceSelector.matchNames %v, want [%s]", ns, helmchart.Namespace)
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		for _, o := range helmchart.Find(objs, kind) {
			if got := nested(o.Doc, "metadata", "labels", "release"); got != "kube-prometheus-stack" {
				t.Errorf("%s: label release %v, want monitoring.labels' kube-prometheus-stack", kind, got)
			}
		}
	}
}

// TestMonitoringAddsNoRights: turning monitoring on renders the same RBAC
// (Helm makes the ServiceMonitor and the PrometheusRule; the operator's
// Prometheus reads the Endpoints with its own rights).
func TestMonitoringAddsNoRights(t *testing.T) {
	rbac := func(args ...string) map[string]interface{} {
		out := map[string]interface{}{}
		for _, o := range helmchart.Objects(t, helmchart.Render(t, args...)) {
			switch o.Kind {
			case "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount":
				out[o.Kind+"/"+o.Name] = o.Doc
			}
		}
		return out
	}
	off := rbac(monitoringAPIs...)
	on := rbac(append(append([]string{}, monitoringAPIs...), "--set", "monitoring.enabled=true")...)
	if !reflect.DeepEqual(off, on) {
		t.Error("monitoring.enabled=true changes the chart's RBAC")
	}
}
