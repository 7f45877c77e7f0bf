package rancher_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/rancher"
)

// TestRancherStartDeletesTheSettings: Rancher 2.9+ deletes, at every
// replica's start, the Setting objects whose names it does not know
// (rancher/rancher v2.9.0 pkg/controllers/dashboardapi/settings/settings.go,
// cleanupUnknownSettings; the double's RestartSettings). With the whole
// controller running (manager.Run) on Fleet v0.14.10 and a standalone
// cluster, the nine Settings come back with the users' values, nothing in
// effect changes, and no Deployment or cluster is written.
func TestRancherStartDeletesTheSettings(t *testing.T) {
	ctx := context.Background()
	useFleetCRD(t, fleetCRDOf("agentmanagement"))
	ns, fleetNS, clusterNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	cp.InstallFleet(t, fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(clusterNS, "edge-1", kit.WithEnv(kit.Env("HTTPS_PROXY=http://proxy:3128")...)))

	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(mctx, cp.Config, manager.Config{
			Namespace: ns, FleetNamespace: fleetNS, RancherNamespace: cp.Namespace(t), QPS: 100, Burst: 200, Workers: 2,
			Settle: time.Second,
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager.Run after cancel: %v", err)
		}
	})

	value := func(name string) string {
		u, err := dyn.Resource(framework.SettingsGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "<absent>"
		}
		v, _, _ := unstructured.NestedString(u.Object, "value")
		return v
	}
	framework.Eventually(t, "settings created", func() bool { return value("fleet-agent-leader-election-retry-period") != "<absent>" })
	for name, v := range map[string]string{"fleet-agent-leader-election-retry-period": "12s", "fleet-leader-election-retry-period": "5s"} {
		if _, err := dyn.Resource(framework.SettingsGVR).Patch(ctx, name, types.MergePatchType, []byte(`{"value":"`+v+`"}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agentTriple := func() string {
		d, err := cp.Client.AppsV1().Deployments(fleetNS).Get(ctx, "fleet-controller", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "FLEET_AGENT_ELECTION_RETRY_PERIOD" {
					return e.Value
				}
			}
		}
		return ""
	}
	framework.Eventually(t, "the users' values in effect", func() bool { return agentTriple() == "12s" })
	// The resourceVersions of the Deployments and the cluster, as a
	// comparable string (fmt prints a map with its keys sorted).
	versions := func() string {
		out := map[string]string{}
		l, _ := cp.Client.AppsV1().Deployments(fleetNS).List(ctx, metav1.ListOptions{})
		for _, d := range l.Items {
			out["deployment/"+d.Name] = d.ResourceVersion
		}
		u, _ := dyn.Resource(fleet.ClusterGVR).Namespace(clusterNS).Get(ctx, "edge-1", metav1.GetOptions{})
		out["cluster/edge-1"] = u.GetResourceVersion()
		return fmt.Sprint(out)
	}
	// Let the writes of the change end.
	before := framework.WaitQuiet(t, "the Deployments and the cluster at rest", 3*time.Second, time.Minute,
		func() (string, bool) { return versions(), true }, func(time.Time) string { return "\n" + versions() })
	uid := func(name string) string {
		u, err := dyn.Resource(framework.SettingsGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(u.GetUID())
	}
	oldUID := uid("fleet-agent-leader-election-retry-period")

	d, err := rancher.Start(ctx, rancher.Options{Config: cp.Config, Version: "v2.9.0", Resync: doubleResync, FleetDefaultWorkspace: clusterNS})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	if err := d.RestartSettings(ctx, nil); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Settings restored with the users' values", func() bool {
		return value("fleet-agent-leader-election-retry-period") == "12s" && value("fleet-leader-election-retry-period") == "5s"
	})
	if uid("fleet-agent-leader-election-retry-period") == oldUID {
		t.Fatal("the Rancher double did not delete the Setting: the test proves nothing")
	}
	for _, def := range settings.Registry {
		if value(def.Name) == "<absent>" {
			t.Errorf("%s not restored", def.Name)
		}
	}
	if !framework.Consistently(t, "no Deployment or cluster written after Rancher deleted the Settings", 15*time.Second,
		func() bool { return versions() == before }) {
		t.Fatalf("a Deployment or cluster was written after Rancher deleted the Settings:\nbefore %v\nafter  %v", before, versions())
	}
	if agentTriple() != "12s" {
		t.Errorf("the agent triple in effect changed: %s", agentTriple())
	}
}
