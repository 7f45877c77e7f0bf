// Package footprint_test measures what the project itself costs the
// kube-apiserver, from the apiserver's own audit log.
package footprint_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp       *framework.ControlPlane
	auditLog string
)

func TestMain(m *testing.M) {
	os.Exit(framework.MainWithAuditLog(m, &cp, &auditLog, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD, framework.StatusCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}
