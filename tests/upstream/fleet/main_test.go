//go:build upstream

package fleet_test

import (
	"fmt"
	"os"
	"testing"

	"leasetune.io/leasetune/tests/upstream/framework"
)

var in *framework.Installation

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	in, err = framework.Start(framework.Options{Fleet: os.Getenv("FLEET_TAG")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer in.Stop()
	return m.Run()
}
