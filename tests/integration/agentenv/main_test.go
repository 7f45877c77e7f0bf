// Package agentenv_test checks the agentenv controller against a real
// kube-apiserver with the real clusters.fleet.cattle.io and
// clusters.provisioning.cattle.io CRDs (../shared/fixtures) and a minimal
// management.cattle.io Cluster CRD.
package agentenv_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{
		RepoCRDs:   []string{framework.ManagementCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}
