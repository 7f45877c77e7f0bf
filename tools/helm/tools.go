//go:build tools

// Package tools pins the helm CLI that scripts/helm.sh builds for `make
// chart-lint` and the RBAC test (helm lint, helm template).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
