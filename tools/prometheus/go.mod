// Tools module that pins the Prometheus server (github.com/prometheus/prometheus,
// Prometheus 3.16.0), built from its Go module by scripts/prometheus.sh for
// tests/integration/prometheus, and whose PromQL parser checks the Grafana
// dashboard's queries (dashboard_test.go). Separate from the root module so
// Prometheus's dependencies (a newer client-go, client_golang and
// prometheus/common, every service-discovery SDK) never reach the project's
// go.mod.
module leasetune.io/leasetune/tools/prometheus

go 1.26.7

require github.com/prometheus/prometheus v0.316.0

// The dashboard test reads the dashboard with the root module's
// tests/dashboard package (standard library only).
require leasetune.io/leasetune v0.0.0-00010101000000-000000000000

replace leasetune.io/leasetune => ../..
