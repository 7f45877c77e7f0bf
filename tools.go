//go:build tools

// This file pins the code generators and Rancher libraries the project
// builds with, so that `go mod tidy` keeps their exact versions in go.mod
// (see README, "Pinned stack"). It is never compiled into the binary.
package tools

import (
	_ "github.com/golang/mock/mockgen"
	_ "github.com/rancher/lasso/pkg/controller"
	_ "github.com/rancher/norman/types"
	_ "github.com/rancher/wrangler/v2/pkg/controller-gen"
)
