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

// Webhook is a rancher-webhook release: the server and the tag's chart
// (charts/rancher-webhook, which Rancher installs as a system chart).
func Webhook(tag string) Release {
	return Release{Repo: "rancher/webhook", Tag: tag, Contains: []string{"bin/webhook", "charts/rancher-webhook/Chart.yaml"}}
}

// The releases the suite runs, with what each Rancher ships
// (rancher/rancher build.yaml at its tag, fleetVersion and webhookVersion):
// v2.12.12 Fleet v0.13.14; v2.13.8 Fleet v0.14.9 and rancher-webhook
// v0.9.7; v2.14.4 Fleet v0.15.5 and rancher-webhook v0.10.9; v2.15.0 Fleet
// v0.16.0 and rancher-webhook v0.11.0. Where a newer patch of that Fleet
// line exists, the suite runs it (v0.14.10, v0.15.6, v0.16.1).
var (
	RancherV21212 = Rancher("v2.12.12")
	RancherV2138  = Rancher("v2.13.8")
	RancherV2144  = Rancher("v2.14.4")
	RancherV2150  = Rancher("v2.15.0")
	FleetV01314   = Fleet("v0.13.14")
	FleetV01410   = Fleet("v0.14.10")
	FleetV0156    = Fleet("v0.15.6")
	FleetV0161    = Fleet("v0.16.1")
	WebhookV097   = Webhook("v0.9.7")
	WebhookV0109  = Webhook("v0.10.9")
	WebhookV0110  = Webhook("v0.11.0")
)

// Suite is one installation of releases that the cases of one package of
// tests/upstream share, in order. A package may have several (the
// Rancher package runs on each Rancher line the suite covers); Name tells
// them apart.
type Suite struct {
	// Name names the suite (LEASETUNE_UPSTREAM_SUITE selects it).
	Name string
	// Package is the package's path from the repository's root.
	Package string
	// Rancher is the Rancher release it runs, if any; Fleet its Fleet;
	// Webhook the rancher-webhook beside Rancher, if any.
	Rancher *Release
	Fleet   Release
	Webhook *Release
	// Cases are its tests, in the order they run.
	Cases []string
	// Kube is the control plane it runs on (scripts/controlplane.sh's
	// LEASETUNE_KUBE): one every chart it installs accepts.
	Kube string
	// Shell is the @rancher/shell version of the dashboard Rancher serves
	// (tests/upstream/dashboard/shell-<Shell>, scripts/dashboard.sh):
	// rancher/dashboard's shell/package.json at the Rancher tag, or the
	// nearest release npm serves. "" without Rancher.
	Shell string
	// Downstream is the flavour of the downstream cluster it imports
	// (scripts/controlplane.sh's LEASETUNE_KUBE_FLAVOUR, at Kube): "rke2"
	// where Rancher renders an imported RKE2 cluster's agentEnvVars into
	// system-agent Plans (v2.15+, case 12), "" for none.
	Downstream string
}

// Releases are the suite's releases, Rancher first.
func (s Suite) Releases() []Release {
	var out []Release
	if s.Rancher != nil {
		out = append(out, *s.Rancher)
	}
	out = append(out, s.Fleet)
	if s.Webhook != nil {
		out = append(out, *s.Webhook)
	}
	return out
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
	return fmt.Sprintf("upstream: skip %s %s (%s): %s (docs/upstream.md)", s.Package, c, s.Name, s.Missing())
}

// rancherCases are the cases of tests/upstream/rancher.
var rancherCases = []string{
	"Test01Fleet", "Test02RancherStartRestoresTheSettings", "Test03SettingsAPI", "Test04RancherLock",
	"Test05UIPlugin", "Test06ManagedClusters", "Test07DoubleAgrees", "Test08Dashboard", "Test09AppsPage", "Test10RancherWebhook",
	"Test11AppsInstallAndUpgrade", "Test12ImportedDay2OpsPlans"}

// Suites are the installations of tests/upstream. Dashboards
// (rancher/dashboard shell/package.json at the Rancher tag): v2.12.12 is
// @rancher/shell 3.0.5, v2.13.8 3.0.8, v2.14.4 3.0.9, v2.15.0 3.0.12
// (Node >= 24); npm serves neither 3.0.9 nor 3.0.12: 3.0.10 and 3.0.13
// are the nearest.
// Kubernetes: Rancher's chart/Chart.yaml kubeVersion wants < 1.34
// (v2.12.12), < 1.35 (v2.13.8), < 1.36 (v2.14.4), < 1.37 (v2.15.0);
// Fleet's charts/fleet/Chart.yaml catalog.cattle.io/kube-version
// >= 1.32 (v0.14), >= 1.33 (v0.15), >= 1.34 (v0.16). 1.34 fits v2.13 and
// v2.14 both.
var Suites = []Suite{
	{Name: "fleet-v0.14.10", Package: "tests/upstream/fleet", Fleet: FleetV01410, Cases: []string{"TestRealFleet"}, Kube: "1.32"},
	{Name: "fleet-v0.16.1", Package: "tests/upstream/fleet016", Fleet: FleetV0161, Cases: []string{"TestRealFleet", "TestAgentDuplicateName"}, Kube: "1.36"},
	{Name: "rancher-v2.12.12", Package: "tests/upstream/rancher", Rancher: &RancherV21212, Fleet: FleetV01314, Cases: rancherCases, Kube: "1.32", Shell: "3.0.5"},
	{Name: "rancher-v2.13.8", Package: "tests/upstream/rancher", Rancher: &RancherV2138, Fleet: FleetV01410, Webhook: &WebhookV097, Cases: rancherCases, Kube: "1.34", Shell: "3.0.8"},
	{Name: "rancher-v2.14.4", Package: "tests/upstream/rancher", Rancher: &RancherV2144, Fleet: FleetV0156, Webhook: &WebhookV0109, Cases: rancherCases, Kube: "1.34", Shell: "3.0.10"},
	{Name: "rancher-v2.15.0", Package: "tests/upstream/rancher", Rancher: &RancherV2150, Fleet: FleetV0161, Webhook: &WebhookV0110, Cases: rancherCases, Kube: "1.36", Shell: "3.0.13", Downstream: "rke2"},
}

// SuiteEnv names the suite a test binary runs when its package has more
// than one (make test-upstream sets it for each).
const SuiteEnv = "LEASETUNE_UPSTREAM_SUITE"

// Of returns the suite of package pkg (a path from the repository's root)
// named name; with name "", the package's only suite, or else its first
// whose folders are all there, or else its first.
func Of(pkg, name string) (Suite, bool) {
	var of []Suite
	for _, s := range Suites {
		if s.Package == pkg && (name == "" || s.Name == name) {
			of = append(of, s)
		}
	}
	if len(of) == 0 {
		return Suite{}, false
	}
	for _, s := range of {
		if s.Missing() == "" {
			return s, true
		}
	}
	return of[0], true
}

// Newest is the last suite of package pkg: its newest Rancher or Fleet
// (Suites lists each package's oldest first).
func Newest(pkg string) (Suite, bool) {
	var last Suite
	found := false
	for _, s := range Suites {
		if s.Package == pkg {
			last, found = s, true
		}
	}
	return last, found
}
