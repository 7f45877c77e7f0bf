package dashboard_test

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/tests/dashboard"
	"leasetune.io/leasetune/tests/integration/framework"
)

func load(t *testing.T) (*dashboard.Dashboard, []byte) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d, raw, err := dashboard.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return d, raw
}

// TestDashboardModel: the file is a Grafana dashboard whose panels all
// query the data source chosen in its "datasource" variable (type
// datasource, Prometheus), as rancher-monitoring's own dashboards do; ids
// are unique, panels fit the 24-column grid without overlapping, every
// panel says what it shows, and every query uses no variable but the
// range ones.
func TestDashboardModel(t *testing.T) {
	d, _ := load(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and schemaVersion 36+ (datasource references by uid)", d.UID, d.Title, d.SchemaVersion)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == dashboard.DatasourceVariable {
			dsVar = v.Type == "datasource" && v.Query == "prometheus"
		}
	}
	if !dsVar {
		t.Errorf("templating: no variable %q of type datasource and query prometheus: %+v", dashboard.DatasourceVariable, d.Templating.List)
	}
	want := dashboard.Datasource{Type: "prometheus", UID: "${" + dashboard.DatasourceVariable + "}"}
	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	queries := 0
	for _, p := range d.AllPanels() {
		if other, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or also %q's", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps %q at (%d,%d)", p.Title, other, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		if p.Datasource == nil || *p.Datasource != want {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			queries++
			if q.RefID == "" || refs[q.RefID] {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			if q.Datasource == nil || *q.Datasource != want {
				t.Errorf("panel %q query %s: datasource %+v, want %+v", p.Title, q.RefID, q.Datasource, want)
			}
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q query %s: empty expr", p.Title, q.RefID)
			}
			if _, err := dashboard.Expand(q.Expr, time.Minute); err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
			}
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no query")
	}
}

// leasetuneName finds the leasetune metric names in a query: every
// identifier with the project's metric prefix.
var leasetuneName = regexp.MustCompile(`\bleasetune_[a-z0-9_]+\b`)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// registered returns the names of every metric pkg/metrics registers,
// vectors without a child yet included (from the collectors' descriptors,
// not from a gather, which shows only the series made so far).
func registered() map[string]bool {
	ch := make(chan *prometheus.Desc)
	go func() { metrics.Registry.Describe(ch); close(ch) }()
	names := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// TestDashboardNamesLeasetuneMetrics: every leasetune_* name a query uses
// is a metric pkg/metrics registers (the apiserver's are checked against a
// real kube-apiserver in tests/integration/prometheus), and the writes,
// the restart ledger, the propagation time and the clusters left alone are
// among them.
func TestDashboardNamesLeasetuneMetrics(t *testing.T) {
	d, _ := load(t)
	known := registered()
	if !known["leasetune_writes_total"] {
		t.Fatalf("reading the registry's descriptors found no leasetune_writes_total: %v", known)
	}
	used := map[string]bool{}
	for _, q := range d.Queries() {
		for _, n := range leasetuneName.FindAllString(q.Expr, -1) {
			used[n] = true
			if !known[n] {
				t.Errorf("%s: %s is not a metric of pkg/metrics", q, n)
			}
		}
	}
	for _, n := range []string{"leasetune_writes_total", "leasetune_restarts_total", "leasetune_last_propagation_duration_seconds", "leasetune_clusters_left_alone"} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("leasetune metrics on the dashboard: %v", names)
}

// configMaps returns the ConfigMaps among the rendered documents.
func configMaps(t *testing.T, docs [][]byte) map[string]corev1.ConfigMap {
	t.Helper()
	out := map[string]corev1.ConfigMap{}
	for _, doc := range docs {
		if !strings.Contains(string(doc), "kind: ConfigMap") {
			continue
		}
		var cm corev1.ConfigMap
		if err := utilyaml.Unmarshal(doc, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Kind == "ConfigMap" {
			out[cm.Name] = cm
		}
	}
	return out
}

// TestDashboardConfigMap: the chart renders the dashboard's ConfigMap only
// with monitoring.dashboards.enabled, in cattle-dashboards (or the
// namespace set) with the label grafana_dashboard "1" that
// rancher-monitoring's Grafana sidecar selects, holding the file
// unchanged.
func TestDashboardConfigMap(t *testing.T) {
	_, raw := load(t)
	if _, ok := configMaps(t, framework.RenderChart(t))["leasetune-dashboard"]; ok {
		t.Error("the dashboard ConfigMap is rendered by default; want it only with monitoring.dashboards.enabled")
	}
	for _, tc := range []struct {
		set       []string
		namespace string
	}{
		{[]string{"monitoring.dashboards.enabled=true"}, "cattle-dashboards"},
		{[]string{"monitoring.dashboards.enabled=true", "monitoring.dashboards.namespace=grafana"}, "grafana"},
	} {
		cm, ok := configMaps(t, framework.RenderChart(t, tc.set...))["leasetune-dashboard"]
		if !ok {
			t.Errorf("%v: no ConfigMap leasetune-dashboard", tc.set)
			continue
		}
		if cm.Namespace != tc.namespace || cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("%v: namespace %q, label grafana_dashboard %q; want %q and \"1\"", tc.set, cm.Namespace, cm.Labels["grafana_dashboard"], tc.namespace)
		}
		if len(cm.Data) != 1 || strings.TrimSpace(cm.Data["leasetune.json"]) != strings.TrimSpace(string(raw)) {
			t.Errorf("%v: data keys %d; leasetune.json is not the file %s", tc.set, len(cm.Data), dashboard.RelPath)
		}
		if !json.Valid([]byte(cm.Data["leasetune.json"])) {
			t.Errorf("%v: leasetune.json in the ConfigMap is not JSON", tc.set)
		}
	}
}
