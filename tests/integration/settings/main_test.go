// Package settings_test checks pkg/settings' Provider against a real
// kube-apiserver with the Setting CRD installed. Setting objects are
// cluster-scoped, so the tests run one after another and each starts from
// no Setting objects; each test keeps its state ConfigMap in a namespace of
// its own.
package settings_test

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
