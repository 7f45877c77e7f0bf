//go:build tools

// Package tools records the Prometheus server that scripts/prometheus.sh
// builds (cmd/prometheus, with the build tag remove_all_sd: only file and
// HTTP service discovery, which the tests do not use either; static
// targets need none), so that `go mod tidy` keeps its requirements in
// go.mod/go.sum. Never imported.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
