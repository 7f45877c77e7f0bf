// Package e2e_test runs the built leasetune binary as a process against a
// real kube-apiserver seeded with a Fleet installation (v0.14, or v0.9.9
// where leasetune writes cluster env), as an operator would run it: a
// setting change reaches the Fleet Deployments, and the clusters where
// Fleet's agent manifest renders no election names; SIGTERM stops it with
// exit 0; a restart writes nothing; two replicas elect one leader and never
// write twice; plan writes nothing; cleanup removes what leasetune wrote
// from the objects that are the clusters' sources and never writes
// Rancher's copies.
package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp         *framework.ControlPlane
	binary     string
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leasetune-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if binary, err = framework.BuildLeasetune(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := framework.Start(framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = c.Stop() }()
	cp = c
	if kubeconfig, err = c.Kubeconfig(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
