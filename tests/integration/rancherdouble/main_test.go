// Package rancherdouble_test checks the Rancher double (tests/rancher)
// against a real kube-apiserver with the real clusters.fleet.cattle.io and
// clusters.provisioning.cattle.io CRDs (../shared/fixtures), the minimal
// management.cattle.io Cluster CRD and the Setting CRD.
//
// The tests run one after another: each starts its own double, which sees
// every object on the API server, and removes its objects when it ends.
package rancherdouble_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{
		RepoCRDs:   []string{framework.ManagementCRD, framework.SettingCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}
