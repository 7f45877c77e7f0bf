//go:build upstream

// Package fleet_test runs leasetune, installed by its chart, beside the
// real Fleet v0.14.10 standalone (its chart's defaults; the local cluster
// bootstrapped by fleet-agentmanagement, its fleet-agent applying its own
// agent Bundle with helm), every Deployment run by the Kubelet double.
// (Fleet v0.13.14, the one Rancher v2.12.12 ships, runs beside the real
// Rancher in tests/upstream/rancher.)
package fleet_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/upstream/framework"
)

var in *framework.Installation

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, "tests/upstream/fleet", framework.Options{}, &in))
}
