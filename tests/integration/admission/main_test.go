// Package admission_test checks the admission webhook and the /v3/settings
// API against a real kube-apiserver, with the chart's
// ValidatingWebhookConfiguration (its matchConditions included) pointed at
// the server the manager runs.
package admission_test

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
	os.Exit(framework.Main(m, &cp, framework.Options{
		RepoCRDs: []string{framework.SettingCRD, framework.ManagementCRD}, SharedCRDs: []string{framework.FleetClusterCRD},
	}))
}
