// Package rancher_test runs the agentenv controller beside the Rancher
// double (tests/rancher) on a real kube-apiserver with the real
// clusters.fleet.cattle.io and clusters.provisioning.cattle.io CRDs
// (../shared/fixtures) and the minimal management.cattle.io Cluster CRD.
//
// Both the double and the controller act on every object of the API
// server, so the tests run one after another, each with one double and one
// controller, and each deletes every object it created when it ends
// (envtest runs no namespace controller).
package rancher_test

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
