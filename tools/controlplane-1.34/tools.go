//go:build tools

// Package tools records the control-plane binaries built by
// scripts/controlplane.sh (kube-apiserver and etcd for envtest, kubectl for
// `make run`), so that
// `go mod tidy` keeps their requirements in go.mod/go.sum. Never imported.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
