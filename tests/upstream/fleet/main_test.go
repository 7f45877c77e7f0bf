//go:build upstream

// Package fleet_test runs leasetune, installed by its chart, beside the
// real Fleet v0.14.10 standalone (its chart's defaults; the local cluster
// bootstrapped by fleet-agentmanagement, its fleet-agent applying its own
// agent Bundle with helm), every Deployment run by the Kubelet double.
// (Fleet v0.13.14, the one Rancher v2.12.12 ships, runs beside the real
// Rancher in tests/upstream/rancher.)
package fleet_test

import (
	"fmt"
	"os"
	"testing"

	"leasetune.io/leasetune/tests/upstream/framework"
)

var in *framework.Installation

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	in, err = framework.Start(framework.Options{Fleet: framework.FleetV014})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer in.Stop()
	code := m.Run()
	framework.Hold(in)
	return code
}
