// Package framework runs the real Rancher and the real Fleet beside
// leasetune for the tests under tests/upstream (`make test-upstream`): the
// binaries built from ../shared/upstream (scripts/upstream.sh), a double
// of the kubelet and of the Deployment controller that runs chosen
// Deployments' containers as local processes (Kubelet), a double of
// kube-controller-manager's token controller (TokenFiller), the charts of
// Rancher, Fleet and leasetune installed by the real helm CLI, a Rancher
// API client that logs in as Rancher's UI does, and a reader of the
// kube-apiserver's audit log for the write counts (AuditLog).
//
// The control plane itself is tests/integration/framework's (envtest, a
// real kube-apiserver and etcd).
package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	itfw "leasetune.io/leasetune/tests/integration/framework"
)

// The releases the suite runs. Rancher v2.12.12 ships Fleet v0.13.14
// (rancher/rancher v2.12.12 build.yaml, fleetVersion 107.0.14+up0.13.14);
// v0.14.10 is the newest Fleet v0.14.
const (
	RancherVersion = "v2.12.12"
	FleetV013      = "v0.13.14"
	FleetV014      = "v0.14.10"
)

// Binaries are the built upstream programs and the trees their charts
// come from.
type Binaries struct {
	// Cache is the folder scripts/upstream.sh builds into.
	Cache string
	// Rancher is the Rancher server; RancherTree its source tree (chart/).
	Rancher, RancherTree string
	// Leasetune is leasetune built from this repository.
	Leasetune string
	// Dashboard is Rancher's dashboard as Rancher serves it (a folder
	// holding dashboard/index.html) when scripts/dashboard.sh has built
	// it, else "".
	Dashboard string
}

// FleetController, FleetAgent and FleetTree are the Fleet release's
// fleetcontroller and fleetagent and its source tree (charts/).
func (b Binaries) FleetController(tag string) string {
	return filepath.Join(b.Cache, "fleet-"+tag, "bin", "fleetcontroller")
}

// FleetAgent is the fleetagent binary of Fleet release tag.
func (b Binaries) FleetAgent(tag string) string {
	return filepath.Join(b.Cache, "fleet-"+tag, "bin", "fleetagent")
}

// FleetTree is the source tree of Fleet release tag (its charts/).
func (b Binaries) FleetTree(tag string) string { return filepath.Join(b.Cache, "fleet-"+tag, "tree") }

// FindBinaries returns the upstream binaries when scripts/upstream.sh
// --check finds the builds named in need (e.g. "rancher-v2.12.12",
// "fleet-v0.14.10") built, and builds leasetune into dir. It never builds
// Rancher or Fleet (make test-upstream does, before the tests).
func FindBinaries(dir string, need ...string) (Binaries, error) {
	root, err := itfw.RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "scripts", "upstream.sh"), "--check"}, need...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("the upstream binaries are not built (run make test-upstream, or scripts/upstream.sh): %s", strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	b := Binaries{Cache: lines[len(lines)-1]}
	b.Rancher = filepath.Join(b.Cache, "rancher-"+RancherVersion, "bin", "rancher")
	b.RancherTree = filepath.Join(b.Cache, "rancher-"+RancherVersion, "src")
	b.Leasetune = filepath.Join(dir, "leasetune")
	dash := exec.Command("bash", filepath.Join(root, "scripts", "dashboard.sh"), "--check")
	if out, err := dash.Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		b.Dashboard = filepath.Join(lines[len(lines)-1], "ui-dashboard")
	}
	build := exec.Command("go", "build", "-o", b.Leasetune, "./cmd/leasetune")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return Binaries{}, fmt.Errorf("build leasetune: %w", err)
	}
	return b, nil
}
