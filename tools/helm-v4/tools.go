//go:build tools

// Package tools records the helm v4 CLI built by scripts/helm.sh, so that
// `go mod tidy` keeps its requirements in go.mod/go.sum. Never imported.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
