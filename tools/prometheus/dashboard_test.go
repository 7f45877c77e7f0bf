// Package tools_test checks the Grafana dashboard's queries
// (charts/leasetune/dashboards/leasetune.json) with the PromQL parser of
// the Prometheus this module pins, the one tests/integration/prometheus
// runs. It lives here, not in the root module, because
// github.com/prometheus/prometheus requires newer client-go, client_golang
// and prometheus/common than the root module pins (docs/monitoring.md).
// `make test-unit` runs it.
package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"leasetune.io/leasetune/tests/dashboard"
)

// rangeFunctions take a range of a counter; on a gauge their result means
// nothing (a gauge going down reads as a counter reset).
var rangeFunctions = map[string]bool{"rate": true, "irate": true, "increase": true}

// TestDashboardQueriesParse: every query of the dashboard, with Grafana's
// range variables put in as Grafana does, parses as PromQL with
// Prometheus's default parser options (as cmd/prometheus runs without
// feature flags); every selector names its metric; and rate and increase
// are taken of counters only (a name ending in _total).
func TestDashboardQueriesParse(t *testing.T) {
	d, _, err := dashboard.Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	qs := d.Queries()
	if len(qs) == 0 {
		t.Fatal("the dashboard has no query")
	}
	for _, q := range qs {
		for _, window := range []time.Duration{30 * time.Second, 6 * time.Hour} {
			src, err := dashboard.Expand(q.Expr, window)
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			expr, err := p.ParseExpr(src)
			if err != nil {
				t.Errorf("%s: does not parse with range %s: %v", q, window, err)
				continue
			}
			selectors := 0
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				switch n := n.(type) {
				case *parser.VectorSelector:
					selectors++
					if n.Name == "" {
						t.Errorf("%s: a selector without a metric name: %s", q, n)
					}
				case *parser.Call:
					if !rangeFunctions[n.Func.Name] {
						break
					}
					for _, a := range n.Args {
						if m, ok := a.(*parser.MatrixSelector); ok {
							if vs, ok := m.VectorSelector.(*parser.VectorSelector); ok && !strings.HasSuffix(vs.Name, "_total") {
								t.Errorf("%s: %s of %s, which is not a counter", q, n.Func.Name, vs.Name)
							}
						}
					}
				}
				return nil
			})
			if selectors == 0 {
				t.Errorf("%s: selects no metric", q)
			}
		}
	}
}
