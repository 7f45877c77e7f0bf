package chart_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"

	"leasetune.io/leasetune/tests/helmchart"
)

// TestHelmMajors: helm v4 (what Rancher v2.15 installs apps with and Fleet
// v0.15+ deploys bundles with) lints the chart as strictly as helm v3 and
// renders the same objects from the same values, on the oldest and the
// newest Kubernetes the chart claims. Installs and upgrades with both run
// against a real kube-apiserver in tests/integration/helm.
func TestHelmMajors(t *testing.T) {
	paths := map[int]string{}
	for _, m := range helmchart.Majors {
		p, err := helmchart.PathOf(m)
		if err != nil {
			t.Fatal(err)
		}
		paths[m] = p
	}
	for _, m := range helmchart.Majors {
		out, err := exec.Command(paths[m], "version", "--short").Output()
		if err != nil || !strings.HasPrefix(string(out), fmt.Sprintf("v%d.", m)) {
			t.Fatalf("helm at %s: version %q (%v), want v%d", paths[m], out, err, m)
		}
	}
	for _, m := range helmchart.Majors {
		for _, set := range [][]string{nil, {"--set", "monitoring.enabled=true"}, {"--set", "installCRDs=false,replicaCount=1,podDisruptionBudget.enabled=false"}} {
			cmd := exec.Command(paths[m], append([]string{"lint", "--strict", helmchart.Chart(t)}, set...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("helm v%d lint --strict %v: %v\n%s", m, set, err, out)
			}
		}
	}
	cases := [][]string{
		nil,
		{"--kube-version", "1.28.0"},
		{"--kube-version", "1.36.0"},
		{"--api-versions", helmchart.UIPlugin},
		{"--set", "monitoring.enabled=true,monitoring.dashboards.enabled=true", "--api-versions", helmchart.ServiceMonitor, "--api-versions", helmchart.PrometheusRule},
		{"--set", "installCRDs=false,replicaCount=1,podDisruptionBudget.enabled=false"},
	}
	for _, args := range cases {
		var objs [][]helmchart.Object
		for _, m := range helmchart.Majors {
			out, err := helmchart.TemplateWith(t, paths[m], args...)
			if err != nil {
				t.Fatalf("helm v%d: %v", m, err)
			}
			docs, err := helmchart.Split(out)
			if err != nil {
				t.Fatal(err)
			}
			// The order of kinds helm does not know differs (UIPlugin,
			// ServiceMonitor, PrometheusRule: v3 puts them before the
			// ValidatingWebhookConfiguration, v4 after); the objects do not.
			o := helmchart.Objects(t, docs)
			sort.SliceStable(o, func(i, j int) bool { return o[i].Kind+"/"+o[i].Name < o[j].Kind+"/"+o[j].Name })
			objs = append(objs, o)
		}
		if len(objs[0]) == 0 {
			t.Fatalf("%v: helm v3 rendered nothing", args)
		}
		if !reflect.DeepEqual(objs[0], objs[1]) {
			t.Errorf("%s: helm v3 and v4 render different objects:\n%v\n%v", strings.Join(args, " "), names(objs[0]), names(objs[1]))
		}
	}
	// The chart refuses a Kubernetes it does not claim, on both.
	for _, m := range helmchart.Majors {
		for _, kv := range []string{"1.27.0", "1.37.0"} {
			_, err := helmchart.TemplateWith(t, paths[m], "--kube-version", kv)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte("kubeVersion")) {
				t.Errorf("helm v%d template on Kubernetes %s: %v, want the chart's kubeVersion refused", m, kv, err)
			}
		}
	}
}

func names(objs []helmchart.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind+"/"+o.Name)
	}
	return out
}
