// Package duplicates_test checks, on a real kube-apiserver, that no change
// leasetune makes to a cluster's spec.agentEnvVars gives Fleet's agent
// workload a second env entry of a name, for every Fleet release and both
// kinds of cluster, and that helm's own upgrade of the agent (the three-way
// strategic merge patch of helm v3.16) then succeeds and leaves one entry
// per name. Fleet's rendering is the double in tests/fleetagent.
package duplicates_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{}))
}
