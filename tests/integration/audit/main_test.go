// Package audit_test reads a real kube-apiserver audit log, written while
// real client-go electors with known timings ran against the test control
// plane, with pkg/audit.
package audit_test

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
	if os.Getenv(lockHolderEnv) != "" {
		// A child process of TestRancherLockBeforeAfter: it talks to its
		// parent's control plane, and wrangler's RunOrDie exits the
		// process, which would leave a control plane of its own behind.
		os.Exit(m.Run())
	}
	os.Exit(framework.MainWithAuditLog(m, &cp, &auditLog, framework.Options{RepoCRDs: []string{framework.SettingCRD}}))
}
