//go:build tools

// Package tools records what scripts/prometheus.sh and scripts/promtool.sh
// build from this module, both with the build tag remove_all_sd (only file
// and HTTP service discovery; the tests use none): the Prometheus server
// (cmd/prometheus) for tests/integration/prometheus, and promtool
// (cmd/promtool) for the alert rules' tests, tests/promrules. So `go mod
// tidy` keeps their requirements in go.mod/go.sum. Never imported.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
