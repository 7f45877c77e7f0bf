// Package footprint_test measures what the project itself costs the
// kube-apiserver, from the apiserver's own audit log.
package footprint_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp       *framework.ControlPlane
	auditLog string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasetune-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	auditLog = filepath.Join(dir, "audit.log")
	code := framework.Main(m, &cp, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
		AuditLog:   auditLog,
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
