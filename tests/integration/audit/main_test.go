// Package audit_test reads a real kube-apiserver audit log, written while
// real client-go electors with known timings ran against the test control
// plane, with pkg/audit.
package audit_test

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
	code := framework.Main(m, &cp, framework.Options{AuditLog: auditLog, RepoCRDs: []string{framework.SettingCRD}})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
