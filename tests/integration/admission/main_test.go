// Package admission_test checks the admission webhook and the /v3/settings
// API against a real kube-apiserver, with the chart's
// ValidatingWebhookConfiguration (its matchConditions included) pointed at
// the server the manager runs.
package admission_test

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
	os.Exit(framework.MainAtRoot(m, &cp, &root, framework.Options{
		RepoCRDs: []string{framework.SettingCRD, framework.ManagementCRD}, SharedCRDs: []string{framework.FleetClusterCRD},
	}))
}
