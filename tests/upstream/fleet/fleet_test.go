//go:build upstream

package fleet_test

import (
	"testing"

	"leasetune.io/leasetune/tests/upstream/framework"
)

// TestRealFleet is case 4 on Fleet v0.14.10 standalone, whose local agent
// runs in cattle-fleet-system (charts/fleet values.yaml
// bootstrap.agentNamespace: empty, the system namespace).
func TestRealFleet(t *testing.T) {
	framework.Need(t, in)
	framework.FleetCase(t, in, framework.FleetNamespace)
}
