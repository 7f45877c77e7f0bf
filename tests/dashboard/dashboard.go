// Package dashboard reads the chart's Grafana dashboard
// (charts/leasetune/dashboards/leasetune.json, docs/monitoring.md) for the
// tests that check it: this package's own (the JSON, the ConfigMap the
// chart renders, the leasetune metrics it names), tools/prometheus's
// (every query parses with Prometheus's own PromQL parser) and
// tests/integration/prometheus (every query evaluated by a real Prometheus
// scraping leasetune and a real kube-apiserver).
//
// It models only the fields those tests read; Grafana's dashboard schema
// has many more.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// RelPath is the dashboard's path in the repository.
const RelPath = "charts/leasetune/dashboards/leasetune.json"

// DatasourceVariable is the name of the dashboard's data-source variable
// (type "datasource", query "prometheus"), which every panel and target
// uses as "${datasource}", as rancher-monitoring's dashboards do.
const DatasourceVariable = "datasource"

// Dashboard is the part of a Grafana dashboard model the tests read.
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	SchemaVersion int        `json:"schemaVersion"`
	Templating    Templating `json:"templating"`
	Panels        []Panel    `json:"panels"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable: Type "datasource" with Query
// "prometheus" lists the Prometheus data sources.
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// Datasource is a panel's or a target's data source reference.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// GridPos is a panel's place on Grafana's 24-column grid, in grid units.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is a panel or a row ("row", whose collapsed children are in
// Panels).
type Panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *Datasource `json:"datasource"`
	GridPos     GridPos     `json:"gridPos"`
	Targets     []Target    `json:"targets"`
	Panels      []Panel     `json:"panels"`
}

// Target is one query of a panel. Instant queries are evaluated once, at
// the end of the dashboard's time range; the others over the range.
type Target struct {
	RefID        string      `json:"refId"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Instant      bool        `json:"instant"`
	Datasource   *Datasource `json:"datasource"`
}

// Query is a target together with its panel.
type Query struct {
	PanelID    int
	PanelTitle string
	Target
}

// String names the query for a test's messages.
func (q Query) String() string {
	return fmt.Sprintf("panel %d %q, query %s: %s", q.PanelID, q.PanelTitle, q.RefID, q.Expr)
}

// Load reads and decodes the dashboard from the repository at root. It
// returns the file's bytes too (the chart must ship exactly them). An
// error names the file: it cannot be read, or is not JSON of this shape.
func Load(root string) (*Dashboard, []byte, error) {
	path := filepath.Join(root, RelPath)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, b, nil
}

// AllPanels returns every panel, rows and the panels inside collapsed rows
// included, in the file's order.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Queries returns every target of every panel, in the file's order.
func (d *Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{PanelID: p.ID, PanelTitle: p.Title, Target: t})
		}
	}
	return out
}

// RangeVariables are the Grafana variables the queries may use, each a
// duration Grafana puts in when it runs the query: $__rate_interval (of a
// time series panel: four scrape intervals at least) and $__range (the
// dashboard's time range, for instant queries).
var RangeVariables = []string{"$__rate_interval", "$__range"}

var variableRef = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

// Expand returns expr with every RangeVariables entry replaced by window,
// written as Prometheus writes a duration in whole seconds (window is
// rounded down to a second, at least 1s), as Grafana would for that time
// range. It returns an error naming any other variable left in expr.
func Expand(expr string, window time.Duration) (string, error) {
	secs := int64(window / time.Second)
	if secs < 1 {
		secs = 1
	}
	out := expr
	for _, v := range RangeVariables {
		out = strings.ReplaceAll(out, v, strconv.FormatInt(secs, 10)+"s")
	}
	if left := variableRef.FindAllString(out, -1); len(left) > 0 {
		return "", fmt.Errorf("query %q uses variables other than %v: %v", expr, RangeVariables, left)
	}
	return out, nil
}
