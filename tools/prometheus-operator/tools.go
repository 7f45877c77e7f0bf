//go:build tools

// Package tools records what scripts/prometheus-operator.sh builds from this
// module: the Prometheus Operator (cmd/operator) for the test of the chart's
// ServiceMonitor and PrometheusRule through a real operator
// (tests/integration/prometheus, operator_test.go). So `go mod tidy` keeps
// its requirements in go.mod/go.sum. Never imported.
package tools

import _ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
