// Package agentenv_test checks the agentenv controller against a real
// kube-apiserver with the real clusters.fleet.cattle.io and
// clusters.provisioning.cattle.io CRDs (../shared/fixtures) and a minimal
// management.cattle.io Cluster CRD.
package agentenv_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	fleetCRD, err1 := framework.SharedFixture("fleet/fleet-v0.14.10-clusters-crd.yaml")
	provCRD, err2 := framework.SharedFixture("rancher/provisioning.cattle.io_clusters-crd.yaml")
	mgmtCRD, err3 := filepath.Abs("../../../hack/devenv/crds/clusters.management.cattle.io.yaml")
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(framework.Main(m, &cp, framework.Options{CRDDirectoryPaths: []string{fleetCRD, provCRD, mgmtCRD}}))
}
