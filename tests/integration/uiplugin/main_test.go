// Package uiplugin_test checks the Rancher UI extension end to end on a
// real kube-apiserver: the bundle is served in the layout Rancher's
// extension cache fetches, at the path the UIPlugin names; the UIPlugin is
// created with that endpoint and Rancher's metadata when (and only when)
// its CRD exists, kept current without needless writes, and removed by
// cleanup, all with the chart's RBAC; the page's API (pkg/uiapi) answers
// with the caller's token; and a headless Chromium loads the embedded
// bundle in a stand-in for Rancher's shell, refuses an invalid value and
// shows the server's refusal, and saves a triple into the Settings.
package uiplugin_test

import (
	"fmt"
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp   *framework.ControlPlane
	root string
)

func TestMain(m *testing.M) {
	var err error
	if root, err = framework.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The UIPlugin CRD is not installed here: the tests install it when
	// they need a Rancher (installUIPluginCRD), after checking that nothing
	// happens without it.
	os.Exit(framework.Main(m, &cp, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}
