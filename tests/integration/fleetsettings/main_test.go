// Package fleetsettings_test checks the fleetsettings controller against a
// real kube-apiserver with the rendered Deployments of four Fleet releases
// (../shared/fixtures/fleet).
package fleetsettings_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m, &cp, framework.Options{
		CRDDirectoryPaths: []string{filepath.Join(root, crds.SettingPath)},
	}))
}
