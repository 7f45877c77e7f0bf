// Package fleetsettings_test checks the fleetsettings controller against a
// real kube-apiserver with the rendered Deployments of four Fleet releases
// (../shared/fixtures/fleet).
package fleetsettings_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{RepoCRDs: []string{framework.SettingCRD}}))
}
