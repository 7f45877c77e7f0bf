//go:build upstream

// Package rancher_test runs leasetune, installed by its chart, beside the
// real Rancher v2.12.12 and the Fleet it ships (v0.13.14, installed with
// the values Rancher gives Fleet's chart), each run from its Deployment by
// the Kubelet double on one real kube-apiserver with an audit log. The
// tests share the installation and run in order (go test runs the files
// in name order, then each file's tests as declared: 1_settings_test.go,
// 2_clusters_test.go, 3_double_test.go, 4_dashboard_test.go,
// 5_apps_test.go); each leaves it converged.
package rancher_test

import (
	"os"
	"testing"

	"leasetune.io/leasetune/tests/upstream/framework"
)

var in *framework.Installation

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, "tests/upstream/rancher", framework.Options{}, &in))
}
