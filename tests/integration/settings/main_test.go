// Package settings_test checks pkg/settings' Provider against a real
// kube-apiserver with the Setting CRD installed. Setting objects are
// cluster-scoped, so the tests run one after another and each starts from
// no Setting objects; each test keeps its state ConfigMap in a namespace of
// its own.
package settings_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{RepoCRDs: []string{framework.SettingCRD}}))
}
