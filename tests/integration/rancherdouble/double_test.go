package rancherdouble_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/rancher"
)

// An imported (non-legacy) cluster: env and annotations flow provisioning →
// management → fleet, changes follow, and keys the double applied before and
// no longer wants are removed while keys others set are kept.
func TestImportedClusterFlows(t *testing.T) {
	h := newHarness(t)
	h.start("v2.10.3", 0)
	h.create(prov, provCluster(h.ns, "imported", map[string]interface{}{
		"example.com/owner": "team-a", "example.com/gone": "soon",
	}, map[string]interface{}{"agentEnvVars": envList("A", "1", "B", "2")}))

	m := h.mgmtName(h.ns, "imported")
	if !regexp.MustCompile(`^c-m-[a-z0-9]{8}$`).MatchString(m) {
		t.Fatalf("management name %q, want c-m-xxxxxxxx", m)
	}
	framework.Eventually(t, "management env and annotations", func() bool {
		u := h.get(mgmt, "", m)
		a := ann(u)
		return equal(kit.AgentEnv(u), "A=1", "B=2") && a["example.com/owner"] == "team-a" &&
			a[rancher.AdministratedAnnotation] == "false" && a[rancher.AppliedAnnotation] != ""
	})
	framework.Eventually(t, "fleet Cluster env, label and annotations", func() bool {
		u := h.get(fleet, h.ns, "imported")
		return u != nil && equal(kit.AgentEnv(u), "A=1", "B=2") && labels(u)[rancher.ClusterNameLabel] == m &&
			ann(u)["example.com/owner"] == "team-a"
	})
	f := h.get(fleet, h.ns, "imported")
	for k := range ann(f) {
		if strings.Contains(k, "cattle.io/") && k != rancher.AppliedAnnotation { // apply's own record
			t.Errorf("fleet Cluster has annotation %s: CleanAnnotationsForExport drops keys containing cattle.io/", k)
		}
	}

	// Someone else annotates the management Cluster: kept there (never
	// applied) and, from v2.9.3, copied to the fleet Cluster.
	h.patch(mgmt, "", m, map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{"other.example/x": "y"}}})
	// The provisioning Cluster changes: env reordered and changed, one
	// annotation removed.
	h.patch(prov, h.ns, "imported", map[string]interface{}{
		"metadata": map[string]interface{}{"annotations": map[string]interface{}{"example.com/gone": nil}},
		"spec":     map[string]interface{}{"agentEnvVars": envList("B", "3", "A", "1")},
	})
	framework.Eventually(t, "change reaches management and fleet", func() bool {
		mu, fu := h.get(mgmt, "", m), h.get(fleet, h.ns, "imported")
		_, mGone := ann(mu)["example.com/gone"]
		_, fGone := ann(fu)["example.com/gone"]
		return equal(kit.AgentEnv(mu), "B=3", "A=1") && equal(kit.AgentEnv(fu), "B=3", "A=1") && !mGone && !fGone &&
			ann(mu)["other.example/x"] == "y" && ann(fu)["other.example/x"] == "y"
	})
	h.stable(3 * time.Second)
	if u := h.get(mgmt, "", m); ann(u)["other.example/x"] != "y" {
		t.Errorf("an annotation the double never applied was removed from the management Cluster")
	}
}

// A direct edit of a generated field is put back: the management Cluster at
// once (its change enqueues the provisioning Cluster), the fleet Cluster at
// the next resync; then the double stops writing.
func TestDirectEditsPutBack(t *testing.T) {
	h := newHarness(t)
	d := h.start("v2.10.3", 2*time.Second)
	h.create(prov, provCluster(h.ns, "edited", nil, map[string]interface{}{"agentEnvVars": envList("A", "1")}))
	m := h.mgmtName(h.ns, "edited")
	framework.Eventually(t, "fleet env", func() bool { return equal(kit.AgentEnv(h.get(fleet, h.ns, "edited")), "A=1") })
	h.stable(3 * time.Second)
	before := d.Writes(mgmt, "", m)

	h.patch(mgmt, "", m, map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": envList("A", "1", "CATTLE_ELECTION_RETRY_PERIOD", "10s")}})
	framework.Eventually(t, "management env put back", func() bool { return equal(kit.AgentEnv(h.get(mgmt, "", m)), "A=1") })
	h.stable(3 * time.Second)
	t.Logf("writes of the management Cluster: %d to create and keep it, %d to put one edit back", before, d.Writes(mgmt, "", m)-before)
	if w := d.Writes(mgmt, "", m) - before; w < 1 || w > 3 {
		t.Errorf("%d writes of the management Cluster to put one edit back, want 1–3", w)
	}

	h.patch(fleet, h.ns, "edited", map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": envList("A", "2")}})
	framework.Eventually(t, "fleet env put back", func() bool { return equal(kit.AgentEnv(h.get(fleet, h.ns, "edited")), "A=1") })
	h.stable(3 * time.Second)
}

// A legacy cluster (c-xxxxx): the management Cluster is the source; the
// generated provisioning Cluster has no env; the fleet Cluster gets the
// management env. One without a workspace is given fleet-default.
func TestLegacyCluster(t *testing.T) {
	h := newHarness(t)
	h.start("v2.10.3", 0)
	name := legacyName(t)
	h.create(mgmt, mgmtCluster(name, map[string]interface{}{"example.com/a": "b", "management.cattle.io/x": "y"},
		map[string]interface{}{"displayName": "legacy", "fleetWorkspaceName": h.ns, "agentEnvVars": envList("CATTLE_X", "1")}))
	framework.Eventually(t, "generated provisioning Cluster", func() bool {
		u := h.get(prov, h.ns, name)
		if u == nil {
			return false
		}
		n, _, _ := unstructuredString(u.Object, "status", "clusterName")
		return n == name && ann(u)["example.com/a"] == "b"
	})
	p := h.get(prov, h.ns, name)
	if e := kit.AgentEnv(p); e != nil {
		t.Errorf("generated provisioning Cluster has env %v, want none", e)
	}
	if _, ok := ann(p)["management.cattle.io/x"]; ok {
		t.Errorf("generated provisioning Cluster has a cattle.io annotation: %v", keys(ann(p)))
	}
	framework.Eventually(t, "fleet Cluster env", func() bool {
		u := h.get(fleet, h.ns, name)
		return u != nil && equal(kit.AgentEnv(u), "CATTLE_X=1") && labels(u)[rancher.ClusterNameLabel] == name
	})
	// The management env changes: it reaches fleet.
	h.patch(mgmt, "", name, map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": envList("CATTLE_X", "2")}})
	framework.Eventually(t, "changed env reaches fleet", func() bool { return equal(kit.AgentEnv(h.get(fleet, h.ns, name)), "CATTLE_X=2") })
	if e := kit.AgentEnv(h.get(mgmt, "", name)); !equal(e, "CATTLE_X=2") {
		t.Errorf("legacy management env %v was not left as written", e)
	}

	// No workspace: assignWorkspace sets fleet-default.
	h.ensureNamespace("fleet-default")
	bare := legacyName(t)
	h.create(mgmt, mgmtCluster(bare, nil, map[string]interface{}{"agentEnvVars": envList("Y", "1")}))
	framework.Eventually(t, "fleet-default workspace", func() bool {
		u := h.get(mgmt, "", bare)
		if u == nil {
			return false
		}
		ws, _, _ := unstructuredString(u.Object, "spec", "fleetWorkspaceName")
		return ws == "fleet-default" && h.get(prov, "fleet-default", bare) != nil &&
			equal(kit.AgentEnv(h.get(fleet, "fleet-default", bare)), "Y=1")
	})
	h.stable(3 * time.Second)
}

// Annotation copying to fleet and the data-dir variable by version; a
// version switch on the same objects removes what the earlier version
// applied and the later one no longer wants.
func TestVersions(t *testing.T) {
	rke := map[string]interface{}{"agentEnvVars": envList("A", "1"),
		"rkeConfig": map[string]interface{}{"dataDirectories": map[string]interface{}{"systemAgent": "/opt/agent"}}}
	for _, c := range []struct {
		version     string
		annotations bool // fleet gets the management annotations
		dataDir     bool
	}{
		{"v2.8.5", false, false},
		{"v2.9.0", false, false},
		{"v2.9.3", true, true},
		{"v2.10.3", true, true},
		{"v2.11.3", true, true},
	} {
		t.Run(c.version, func(t *testing.T) {
			h := newHarness(t)
			h.start(c.version, 0)
			h.create(prov, provCluster(h.ns, "rke", map[string]interface{}{"example.com/a": "b"}, rke))
			m := h.mgmtName(h.ns, "rke")
			want := []string{"A=1"}
			if c.dataDir {
				want = append(want, rancher.SystemAgentDataDirEnvVar+"=/opt/agent")
			}
			framework.Eventually(t, "management env", func() bool { return equal(kit.AgentEnv(h.get(mgmt, "", m)), want...) })
			framework.Eventually(t, "fleet env", func() bool { return equal(kit.AgentEnv(h.get(fleet, h.ns, "rke")), want...) })
			h.stable(2 * time.Second)
			f := h.get(fleet, h.ns, "rke")
			if got := ann(f)["example.com/a"] == "b"; got != c.annotations {
				t.Errorf("fleet Cluster annotations %v: example.com/a copied = %v, want %v", keys(ann(f)), got, c.annotations)
			}
			if ann(h.get(mgmt, "", m))[rancher.AdministratedAnnotation] != "true" {
				t.Errorf("management Cluster of an rkeConfig cluster lacks %s=true", rancher.AdministratedAnnotation)
			}
		})
	}

	t.Run("v2.10.3 then v2.8.5", func(t *testing.T) {
		h := newHarness(t)
		h.start("v2.10.3", 0)
		h.create(prov, provCluster(h.ns, "switch", map[string]interface{}{"example.com/a": "b"}, nil))
		h.mgmtName(h.ns, "switch")
		framework.Eventually(t, "v2.10.3 copies the annotation", func() bool {
			u := h.get(fleet, h.ns, "switch")
			return u != nil && ann(u)["example.com/a"] == "b"
		})
		h.start("v2.8.5", 0)
		framework.Eventually(t, "v2.8.5 removes the annotation v2.10.3 applied", func() bool {
			_, ok := ann(h.get(fleet, h.ns, "switch"))["example.com/a"]
			return !ok
		})
		h.stable(2 * time.Second)
	})
}

// From v2.11.0 an imported cluster's management Cluster is its own source
// once it exists: a direct edit stays and the provisioning env no longer
// flows; the fleet Cluster follows the management Cluster.
func TestV211ImportedManagementIsSource(t *testing.T) {
	for _, c := range []struct {
		version string
		putBack bool
	}{{"v2.10.3", true}, {"v2.11.3", false}} {
		t.Run(c.version, func(t *testing.T) {
			h := newHarness(t)
			h.start(c.version, 0)
			h.create(prov, provCluster(h.ns, "imp", nil, map[string]interface{}{"agentEnvVars": envList("A", "1")}))
			m := h.mgmtName(h.ns, "imp")
			framework.Eventually(t, "management env", func() bool { return equal(kit.AgentEnv(h.get(mgmt, "", m)), "A=1") })
			h.stable(2 * time.Second)
			before := h.d.Writes(mgmt, "", m)
			h.patch(mgmt, "", m, map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": envList("A", "1", "E", "x")}})
			if c.putBack {
				framework.Eventually(t, "edit put back", func() bool {
					return h.d.Writes(mgmt, "", m) > before && equal(kit.AgentEnv(h.get(mgmt, "", m)), "A=1")
				})
				return
			}
			framework.Eventually(t, "edit reaches fleet", func() bool { return equal(kit.AgentEnv(h.get(fleet, h.ns, "imp")), "A=1", "E=x") })
			h.stable(2 * time.Second)
			if e := kit.AgentEnv(h.get(mgmt, "", m)); !equal(e, "A=1", "E=x") {
				t.Errorf("v2.11 management env %v, want the edit kept", e)
			}
		})
	}
}

// With several clusters and a short resync the double reconciles again and
// again without writing.
func TestConverges(t *testing.T) {
	h := newHarness(t)
	d := h.start("v2.10.3", time.Second)
	for _, n := range []string{"one", "two", "three"} {
		h.create(prov, provCluster(h.ns, n, map[string]interface{}{"example.com/n": n},
			map[string]interface{}{"agentEnvVars": envList("N", n)}))
	}
	for _, n := range []string{"one", "two", "three"} {
		h.mgmtName(h.ns, n)
		framework.Eventually(t, "fleet "+n, func() bool { return equal(kit.AgentEnv(h.get(fleet, h.ns, n)), "N="+n) })
	}
	w := h.stable(4 * time.Second)
	r := d.Reconciles()
	time.Sleep(5 * time.Second)
	if d.TotalWrites() != w || d.Reconciles() <= r {
		t.Errorf("writes %d → %d, reconciles %d → %d over 5 resyncs: want writes unchanged, reconciles growing",
			w, d.TotalWrites(), r, d.Reconciles())
	}
	t.Logf("%d writes in all, then none over %d reconciles", w, d.Reconciles()-r)
	for _, n := range []string{"one", "two", "three"} {
		if fw := d.Writes(fleet, h.ns, n); fw != 1 {
			t.Errorf("fleet Cluster %s written %d times, want 1 (its creation)", n, fw)
		}
	}
}

// What a Rancher replica's start does to Settings it does not know.
func TestRestartSettings(t *testing.T) {
	for _, c := range []struct {
		version string
		want    string // "kept", "labelled", "deleted"
	}{
		{"v2.8.2", "kept"}, {"v2.8.3", "labelled"}, {"v2.8.5", "labelled"},
		{"v2.9.0", "deleted"}, {"v2.10.3", "deleted"}, {"v2.11.3", "deleted"},
	} {
		t.Run(c.version, func(t *testing.T) {
			h := newHarness(t)
			d := h.start(c.version, 0)
			ctx := context.Background()
			sc := h.dyn.Resource(rancher.Settings)
			for _, n := range []string{"known-setting", "unknown-setting"} {
				h.createSetting(n, "v")
				t.Cleanup(func() { _ = sc.Delete(ctx, n, metav1.DeleteOptions{}) })
			}
			if err := d.RestartSettings(ctx, []string{"known-setting"}); err != nil {
				t.Fatal(err)
			}
			known := h.get(rancher.Settings, "", "known-setting")
			if known == nil || labels(known)[rancher.UnknownSettingLabel] != "" {
				t.Errorf("known setting changed: %v", known)
			}
			u := h.get(rancher.Settings, "", "unknown-setting")
			got := "kept"
			switch {
			case u == nil:
				got = "deleted"
			case labels(u)[rancher.UnknownSettingLabel] == "true":
				got = "labelled"
			}
			if got != c.want {
				t.Errorf("unknown setting %s, want %s", got, c.want)
			}
			if w := d.Writes(rancher.Settings, "", "known-setting"); w != 0 {
				t.Errorf("%d writes of the known setting", w)
			}
		})
	}
}
