//go:build upstream

// Package fleet016_test runs leasetune, installed by its chart, beside the
// real Fleet v0.16.1 standalone on kube-apiserver v1.36 (Fleet v0.16's
// chart wants >= 1.34), as tests/upstream/fleet does beside v0.14.10; and
// measures what a duplicate env name does to the agent that Fleet v0.15+
// deploys with helm v4.
package fleet016_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/upstream/framework"
)

var in *framework.Installation

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, "tests/upstream/fleet016", framework.Options{}, &in))
}
