// Package election_test checks the timing model of pkg/election against a
// real kube-apiserver: what client-go stores in a Lease and how often it
// talks to the API server with a validated triple.
package election_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{}))
}
