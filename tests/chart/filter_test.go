package chart_test

import (
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// listed is Rancher's rule for whether its Apps page lists a chart version
// (rancher/rancher v2.13.8, v2.14.4 and v2.15.0
// pkg/catalogv2/content/content.go filterReleases, the same function at
// the three tags; Masterminds/semver/v3 v3.4.0 to v3.5.0 in their go.mod):
//   - catalog.cattle.io/rancher-version is checked with Validate against
//     the server version; when it fails only because the constraint does
//     not look at prereleases, Check is asked again with the prerelease
//     removed;
//   - catalog.cattle.io/kube-version, then Chart.yaml's kubeVersion, are
//     checked with Check against the cluster's Kubernetes version;
//   - a constraint that does not parse is logged and lets the version pass.
//
// (v2.12.12 and older skip the filter on a server version that is not a
// release; the suite's Rancher runs as a release: docs/upstream.md.)
func listed(t *testing.T, annotations map[string]string, kubeVersion, rancherVersion, k8sVersion string) bool {
	t.Helper()
	rancher, err := semver.NewVersion(rancherVersion)
	if err != nil {
		t.Fatalf("Rancher version %q: %v", rancherVersion, err)
	}
	k8s, err := semver.NewVersion(k8sVersion)
	if err != nil {
		t.Fatalf("Kubernetes version %q: %v", k8sVersion, err)
	}
	if c, ok := annotations["catalog.cattle.io/rancher-version"]; ok {
		if constraint, err := semver.NewConstraint(c); err == nil {
			ok, errs := constraint.Validate(rancher)
			for _, e := range errs {
				if strings.Contains(e.Error(), "the constraint is only looking for release versions") {
					plain, _ := rancher.SetPrerelease("")
					ok = constraint.Check(&plain)
					break
				}
			}
			if !ok {
				return false
			}
		} else {
			t.Errorf("catalog.cattle.io/rancher-version %q does not parse, and Rancher ignores it: %v", c, err)
		}
	}
	for _, c := range []string{annotations["catalog.cattle.io/kube-version"], kubeVersion} {
		if c == "" {
			continue
		}
		constraint, err := semver.NewConstraint(c)
		if err != nil {
			t.Errorf("Kubernetes constraint %q does not parse, and Rancher ignores it: %v", c, err)
			continue
		}
		if !constraint.Check(k8s) {
			return false
		}
	}
	return true
}

// TestRancherListsTheChart applies Rancher's rule to the chart's
// Chart.yaml for the Rancher lines in support, each on the Kubernetes its
// own chart allows (rancher/rancher chart/Chart.yaml kubeVersion at each
// tag: v2.12.12 < 1.34, v2.13.8 < 1.35, v2.14.4 < 1.36, v2.15.0 < 1.37),
// and for versions outside them.
func TestRancherListsTheChart(t *testing.T) {
	chart := readChartYAML(t)
	for _, c := range []struct {
		rancher, k8s string
		want         bool
	}{
		{"v2.8.9", "v1.28.15", false},
		{"v2.9.0", "v1.28.0", true},
		{"v2.9.3", "v1.30.14", true},
		{"v2.10.7", "v1.31.9", true},
		{"v2.11.3", "v1.32.5", true},
		{"v2.12.12", "v1.33.5+rke2r1", true},
		{"v2.13.8", "v1.34.3+k3s1", true},
		{"v2.14.4", "v1.35.1", true},
		{"v2.15.0", "v1.36.3", true},
		{"v2.15.0", "v1.34.0", true},
		{"v2.15.1-rc2", "v1.36.0", true}, // a release candidate of a supported line
		{"v2.16.0", "v1.36.0", false},    // not yet tested beside
		{"v2.16.0-alpha1", "v1.36.0", false},
		{"v2.15.0", "v1.37.0", false}, // a Kubernetes no supported Rancher runs on
		{"v2.15.0", "v1.27.16", false},
	} {
		if got := listed(t, chart.Annotations, chart.KubeVersion, c.rancher, c.k8s); got != c.want {
			t.Errorf("Rancher %s on Kubernetes %s: listed %v, want %v (rancher-version %q, kube-version %q, kubeVersion %q)",
				c.rancher, c.k8s, got, c.want, chart.Annotations["catalog.cattle.io/rancher-version"],
				chart.Annotations["catalog.cattle.io/kube-version"], chart.KubeVersion)
		}
	}
}
