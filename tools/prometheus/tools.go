//go:build tools

// Package tools records what scripts/prometheus.sh and scripts/promtool.sh
// build from this module: the Prometheus server (cmd/prometheus) for
// tests/integration/prometheus, with the build tags remove_all_sd and
// enable_kubernetes_sd (of the service-discovery plugins, Kubernetes beside
// file and HTTP: the test of the chart's ServiceMonitor runs the scrape
// configuration the Prometheus Operator generates, which discovers its
// targets from Endpoints), and promtool (cmd/promtool) for the alert rules'
// tests, tests/promrules, with remove_all_sd alone (only file and HTTP
// discovery; the rules' tests use none). So `go mod tidy` keeps their
// requirements in go.mod/go.sum. Never imported.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
