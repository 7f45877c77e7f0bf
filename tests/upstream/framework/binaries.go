// Package framework runs the real Rancher and the real Fleet beside
// leasetune for the tests under tests/upstream (`make test-upstream`): the
// binaries a developer built by hand from their release tags, in the
// folders the variables of package releases name, a double of the kubelet
// and of the Deployment controller that runs chosen Deployments'
// containers as local processes (Kubelet), a double of
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
	"leasetune.io/leasetune/tests/upstream/releases"
)

// Binaries are the upstream programs and the release trees their charts
// come from.
type Binaries struct {
	// Rancher is the Rancher server; RancherTree the folder that holds it
	// and the tag's chart/.
	Rancher, RancherTree string
	// fleet are the Fleet releases' folders by tag.
	fleet map[string]string
	// WebhookTree is the rancher-webhook release's folder (bin/webhook,
	// charts/rancher-webhook), "" when the suite runs none.
	WebhookTree string
	// Leasetune is leasetune built from this repository.
	Leasetune string
	// Dashboard is Rancher's dashboard of the suite's @rancher/shell as
	// Rancher serves it (a folder holding dashboard/index.html) when
	// scripts/dashboard.sh has built it, else "".
	Dashboard string
}

// FleetController is the fleetcontroller binary of Fleet release tag.
func (b Binaries) FleetController(tag string) string {
	return filepath.Join(b.fleet[tag], "bin", "fleetcontroller")
}

// FleetAgent is the fleetagent binary of Fleet release tag.
func (b Binaries) FleetAgent(tag string) string {
	return filepath.Join(b.fleet[tag], "bin", "fleetagent")
}

// FleetTree is the folder of Fleet release tag (its charts/).
func (b Binaries) FleetTree(tag string) string { return b.fleet[tag] }

// FindBinaries returns the folders of suite s's releases and builds
// leasetune into dir. It never builds Rancher or Fleet: a missing folder
// is an error that says which variable and release are expected.
func FindBinaries(dir string, s releases.Suite) (Binaries, error) {
	root, err := itfw.RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{fleet: map[string]string{}, Leasetune: filepath.Join(dir, "leasetune")}
	if b.fleet[s.Fleet.Tag], err = s.Fleet.Dir(); err != nil {
		return Binaries{}, err
	}
	if s.Rancher != nil {
		if b.RancherTree, err = s.Rancher.Dir(); err != nil {
			return Binaries{}, err
		}
		b.Rancher = filepath.Join(b.RancherTree, "bin", "rancher")
	}
	if s.Webhook != nil {
		if b.WebhookTree, err = s.Webhook.Dir(); err != nil {
			return Binaries{}, err
		}
	}
	if s.Shell != "" {
		dash := exec.Command("bash", filepath.Join(root, "scripts", "dashboard.sh"), "--check", s.Shell)
		if out, err := dash.Output(); err == nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			b.Dashboard = filepath.Join(lines[len(lines)-1], "ui-dashboard")
		}
	}
	var stderr bytes.Buffer
	build := exec.Command("go", "build", "-o", b.Leasetune, "./cmd/leasetune")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, &stderr
	if err := build.Run(); err != nil {
		return Binaries{}, fmt.Errorf("build leasetune: %w\n%s", err, stderr.String())
	}
	return b, nil
}
