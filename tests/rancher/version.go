package rancher

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a Rancher release, e.g. v2.10.3 (pre-release and build
// suffixes are ignored).
type version struct{ major, minor, patch int }

func parseVersion(s string) (version, error) {
	t := strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return version{}, fmt.Errorf("rancher version %q: want vMAJOR.MINOR.PATCH", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return version{}, fmt.Errorf("rancher version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	if n[0] != 2 || n[1] < 8 {
		return version{}, fmt.Errorf("rancher version %q: the double follows v2.8.0 and later v2 releases", s)
	}
	return version{n[0], n[1], n[2]}, nil
}

// atLeast reports whether v is v2.minor.patch or later.
func (v version) atLeast(minor, patch int) bool {
	if v.minor != minor {
		return v.minor > minor
	}
	return v.patch >= patch
}

func (v version) String() string { return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch) }

// What changes between releases, each checked tag by tag in rancher/rancher:

// systemAgentDataDir: createNewCluster appends CATTLE_AGENT_VAR_DIR
// (capr.SystemAgentDataDirEnvVar, pkg/capr/common.go) to the management
// Cluster's env from v2.9.1 (absent in v2.8.x and v2.9.0).
func (v version) systemAgentDataDir() bool { return v.atLeast(9, 1) }

// fleetAnnotations: fleetcluster.go createCluster copies the management
// Cluster's annotations, through yaml.CleanAnnotationsForExport, onto the
// fleet Cluster from v2.9.3 (absent in v2.8.x and v2.9.0–v2.9.2).
func (v version) fleetAnnotations() bool { return v.atLeast(9, 3) }

// importedMgmtIsSource: from v2.11.0 createNewCluster calls
// updateImportedCluster for a provisioning Cluster without rkeConfig whose
// management Cluster exists: the management Cluster's own spec and
// annotations are the desired state, so the provisioning Cluster's env and
// annotations no longer flow and a direct edit of the management Cluster
// stays.
func (v version) importedMgmtIsSource() bool { return v.atLeast(11, 0) }

// legacyDisplayNameAnnotation: from v2.11.0
// generateProvisioningClusterFromLegacyCluster adds
// provisioning.cattle.io/management-cluster-display-name.
func (v version) legacyDisplayNameAnnotation() bool { return v.atLeast(11, 0) }

// unknownSettings is what SetAll (pkg/controllers/dashboardapi/settings/
// settings.go) does at start-up to Settings whose names Rancher does not know.
type unknownSettingsAction int

const (
	unknownKeep   unknownSettingsAction = iota // v2.8.0–v2.8.2: no cleanupUnknownSettings
	unknownLabel                               // v2.8.3–v2.8.x: markSettingAsUnknown, label cattle.io/unknown=true
	unknownDelete                              // v2.9.0+: s.settings.Delete
)

func (v version) unknownSettings() unknownSettingsAction {
	switch {
	case v.atLeast(9, 0):
		return unknownDelete
	case v.atLeast(8, 3):
		return unknownLabel
	default:
		return unknownKeep
	}
}

// importedSystemAgentPlans: from v2.15.0 the "imported-system-agent-setup"
// handler (pkg/controllers/management/systemagent/controller.go, Register
// :127-153, onChange :218-241) renders system-agent's upgrade Plans of an
// imported RKE2/K3s cluster with day-2 operations from its management
// Cluster's spec.agentEnvVars (installer :1147-1153, planEnv :1196-1230),
// and the management Cluster CRD has a status subresource
// (pkg/crds/dashboard/crds.go:71-72, c.Status = true; false at v2.14.4).
func (v version) importedSystemAgentPlans() bool { return v.atLeast(15, 0) }
