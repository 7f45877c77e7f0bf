//go:build tools

// Package tools records the golangci-lint version in go.mod.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
