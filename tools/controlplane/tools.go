//go:build tools

// Package tools records the control-plane binaries built by
// scripts/controlplane.sh (kube-apiserver and etcd for envtest, kubectl for
// `make run`; kube-controller-manager, kube-scheduler, kubelet and
// kube-proxy for the single-node cluster of `make cluster`), so that
// `go mod tidy` keeps their requirements in go.mod/go.sum. Never imported.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
