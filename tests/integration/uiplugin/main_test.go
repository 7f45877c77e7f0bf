// Package uiplugin_test checks the Rancher UI extension end to end on a
// real kube-apiserver: the Helm chart renders the UIPlugin (only where its
// kind is served) with the embedded bundle's name, version and metadata and
// an endpoint that leads to the bundle server; installed as helm install
// does, Rancher's cache fetches the embedded bundle from that endpoint;
// leasetune itself never writes a UIPlugin and cleanup leaves it to helm;
// and a headless Chromium loads the embedded bundle in a stand-in for
// Rancher's shell (skipped until the page is rewritten for issue 25).
package uiplugin_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp   *framework.ControlPlane
	root string
)

func TestMain(m *testing.M) {
	// The UIPlugin CRD is not installed here: the tests install it when
	// they need a Rancher (installUIPluginCRD).
	os.Exit(framework.MainAtRoot(m, &cp, &root, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD, framework.StatusCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}
