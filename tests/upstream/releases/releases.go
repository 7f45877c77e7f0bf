// Package releases is the data of the suite beside the real Rancher and
// Fleet (tests/upstream): which release of each program a case runs on,
// the environment variable that names the folder a developer built it
// into by hand, and what that folder must hold. Nothing here builds
// anything; a case whose folders are missing is skipped with one line that
// says what it expects (docs/upstream.md).
package releases

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Release is one program at one release tag.
type Release struct {
	// Repo is the public repository the tag is of.
	Repo string
	// Tag is the release tag.
	Tag string
	// Contains are the paths the folder must hold: what the suite runs.
	Contains []string
}

// Env is the environment variable that names the release's folder, e.g.
// LEASETUNE_RANCHER_V2_12_12, LEASETUNE_FLEET_V0_14_10.
func (r Release) Env() string {
	name := r.Repo[strings.LastIndex(r.Repo, "/")+1:] + "_" + r.Tag
	return "LEASETUNE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(name))
}

// Dir returns the release's folder when its variable names one that holds
// everything in Contains; else an error that says what is expected.
func (r Release) Dir() (string, error) {
	dir := os.Getenv(r.Env())
	if dir == "" {
		return "", fmt.Errorf("%s unset (a folder with %s %s's %s)", r.Env(), r.Repo, r.Tag, strings.Join(r.Contains, ", "))
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s=%s is not an absolute path (the tests run in their package's folder)", r.Env(), dir)
	}
	var missing []string
	for _, p := range r.Contains {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s=%s lacks %s %s's %s", r.Env(), dir, r.Repo, r.Tag, strings.Join(missing, ", "))
	}
	return dir, nil
}

// Rancher is a Rancher server release: the server and the tag's chart/
// (its Chart.yaml still holding the %VERSION% placeholders a release build
// fills). FleetRelease is a Fleet release: the controller (which also runs
// agentmanagement and cleanup), the agent, and the tag's charts/.
func Rancher(tag string) Release {
	return Release{Repo: "rancher/rancher", Tag: tag, Contains: []string{"bin/rancher", "chart/Chart.yaml"}}
}

// Fleet is a Fleet release: see Rancher.
func Fleet(tag string) Release {
	return Release{Repo: "rancher/fleet", Tag: tag, Contains: []string{
		"bin/fleetcontroller", "bin/fleetagent", "charts/fleet/Chart.yaml", "charts/fleet-crd/templates/crds.yaml"}}
}

// The releases the suite runs. Rancher v2.12.12 ships Fleet v0.13.14
// (rancher/rancher v2.12.12 build.yaml, fleetVersion 107.0.14+up0.13.14);
// v0.14.10 is the newest Fleet v0.14.
// v0.16.1 is the newest Fleet v0.16 (Rancher v2.15.0 ships v0.16.0:
// build.yaml, fleetVersion 110.0.0+up0.16.0).
var (
	RancherV21212 = Rancher("v2.12.12")
	FleetV01314   = Fleet("v0.13.14")
	FleetV01410   = Fleet("v0.14.10")
	FleetV0161    = Fleet("v0.16.1")
)

// Suite is one package of tests/upstream: one installation of its
// releases, which its cases share in order.
type Suite struct {
	// Package is the package's path from the repository's root.
	Package string
	// Rancher is the Rancher release it runs, if any; Fleet its Fleet.
	Rancher *Release
	Fleet   Release
	// Cases are its tests, in the order they run.
	Cases []string
	// Kube is the control plane it runs on (scripts/controlplane.sh's
	// LEASETUNE_KUBE): one every chart it installs accepts.
	Kube string
}

// Releases are the suite's releases, Rancher first.
func (s Suite) Releases() []Release {
	if s.Rancher == nil {
		return []Release{s.Fleet}
	}
	return []Release{*s.Rancher, s.Fleet}
}

// Missing says why the suite cannot run here ("" when it can): every
// release whose folder is missing, and what it expects.
func (s Suite) Missing() string {
	var why []string
	for _, r := range s.Releases() {
		if _, err := r.Dir(); err != nil {
			why = append(why, err.Error())
		}
	}
	return strings.Join(why, "; ")
}

// SkipLine is the one line said for a case that cannot run.
func (s Suite) SkipLine(c string) string {
	return fmt.Sprintf("upstream: skip %s %s: %s (docs/upstream.md)", s.Package, c, s.Missing())
}

// Suites are the packages of tests/upstream.
// Kubernetes: Rancher v2.12.12's chart wants < 1.34 (chart/Chart.yaml
// kubeVersion), Fleet v0.16's >= 1.34 (charts/fleet/Chart.yaml
// catalog.cattle.io/kube-version '>= 1.34.0-0 < 1.37.0-0').
var Suites = []Suite{
	{Package: "tests/upstream/fleet", Fleet: FleetV01410, Cases: []string{"TestRealFleet"}, Kube: "1.32"},
	{Package: "tests/upstream/fleet016", Fleet: FleetV0161, Cases: []string{"TestRealFleet", "TestAgentDuplicateName"}, Kube: "1.36"},
	{Package: "tests/upstream/rancher", Rancher: &RancherV21212, Fleet: FleetV01314, Cases: []string{
		"Test01Fleet", "Test02RancherStartRestoresTheSettings", "Test03SettingsAPI", "Test04RancherLock",
		"Test05UIPlugin", "Test06ManagedClusters", "Test07DoubleAgrees", "Test08Dashboard", "Test09AppsPage"}, Kube: "1.32"},
}

// Of returns the suite of package pkg (a path from the repository's root).
func Of(pkg string) (Suite, bool) {
	for _, s := range Suites {
		if s.Package == pkg {
			return s, true
		}
	}
	return Suite{}, false
}
