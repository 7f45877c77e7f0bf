package inventory

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// everyCall is what Read(All) asks, each once, in order per clientset.
var everyCall = []call{
	{"get", "", "configmaps", settings.DefaultStateName},
	{"get", "", "configmaps", fleetenv.ChannelConfigMapName},
	{"list", "apps", "deployments", ""},
	{"get", "", "configmaps", fleetenv.RancherConfigName},
	{"get", "apps", "deployments", "rancher"},
	{"list", "management.cattle.io", "settings", ""},
	{"list", "fleet.cattle.io", "clusters", ""},
	{"list", "provisioning.cattle.io", "clusters", ""},
	{"list", "management.cattle.io", "clusters", ""},
}

// TestReadEverything: every part of an installation, each read once; the
// Settings of other names left out; the channel detected from the
// fleet-controller image; the Rancher version and replicas from its
// Deployment; each fleet Cluster routed, and the one whose source is
// missing keeps its error.
func TestReadEverything(t *testing.T) {
	f := newFakes(installation())
	s, err := Read(context.Background(), f.cs, f.dyn, options(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.calls(); !reflect.DeepEqual(got, everyCall) {
		t.Errorf("calls\n%v, want\n%v", got, everyCall)
	}
	var names []string
	for _, o := range s.Settings {
		names = append(names, o.Name+"="+o.Value)
	}
	if got := strings.Join(names, " "); got != "fleet-agent-leader-election-lease-duration=60s fleet-agent-leader-election-retry-period=20s" {
		t.Errorf("settings %s", got)
	}
	if s.State == nil || s.StateData() == nil || s.ChannelRecord == nil || s.RancherConfig == nil {
		t.Errorf("state %v, channel record %v, rancher-config %v", s.State, s.ChannelRecord, s.RancherConfig)
	}
	if s.Channel != fleet.ChannelAgentManagement || s.Evidence != "image rancher/fleet:v0.14.10" {
		t.Errorf("channel %q (%s)", s.Channel, s.Evidence)
	}
	if len(s.FleetDeployments) != 2 || s.FleetLocks() != 3 {
		t.Errorf("%d Fleet Deployments, %d locks; want 2 and 3", len(s.FleetDeployments), s.FleetLocks())
	}
	if s.Rancher == nil || s.RancherReplicas != 3 || s.RancherVersion.String() != "v2.11.3" || !s.RancherVersion.Known {
		t.Errorf("Rancher %v, %d replicas, version %v", s.Rancher != nil, s.RancherReplicas, s.RancherVersion)
	}
	if s.FleetClusterCount != 3 || len(s.Clusters) != 3 || len(s.ProvisioningClusters) != 1 || len(s.ManagementClusters) != 1 {
		t.Fatalf("count %d, %d routed, %d provisioning, %d management", s.FleetClusterCount, len(s.Clusters), len(s.ProvisioningClusters), len(s.ManagementClusters))
	}
	want := []string{ // in list order: by name
		"clusters.fleet.cattle.io fleet-default/edge-1",
		`fleet Cluster fleet-default/gone-1: no provisioning Cluster with status.clusterName "c-m-gone"`,
		"clusters.provisioning.cattle.io fleet-default/rke2-1",
	}
	for i, c := range s.Clusters {
		got := c.Routing.TargetRef.String()
		if c.Err != nil {
			got = c.Err.Error()
		}
		if got != want[i] || c.Fleet != &s.FleetClusters[i] {
			t.Errorf("cluster %d: %s, want %s", i, got, want[i])
		}
	}
	if s.Absent != 0 || len(s.Unread) != 0 {
		t.Errorf("absent %s, unread %v", s.Absent, s.Unread)
	}
}

// TestReadParts: only the parts asked for are read; Clusters without a
// given Rancher version also reads the Rancher Deployment (the routing
// follows it), with one it does not; ClusterCount alone is one list of one;
// the Settings by name are nine GETs.
func TestReadParts(t *testing.T) {
	v2113, _ := rancher.Parse("v2.11.3")
	for _, tc := range []struct {
		name  string
		opts  Options
		calls []call
	}{
		{"settings and state", options(Settings|State, 0), []call{
			{"get", "", "configmaps", settings.DefaultStateName}, {"list", "management.cattle.io", "settings", ""}}},
		{"clusters, version unknown", options(Clusters, 0), []call{
			{"get", "apps", "deployments", "rancher"},
			{"list", "fleet.cattle.io", "clusters", ""}, {"list", "provisioning.cattle.io", "clusters", ""}, {"list", "management.cattle.io", "clusters", ""}}},
		{"clusters, version given", Options{Namespace: ns, RancherNamespace: rancherNS, RancherVersion: v2113, Parts: Clusters}, []call{
			{"list", "fleet.cattle.io", "clusters", ""}, {"list", "provisioning.cattle.io", "clusters", ""}, {"list", "management.cattle.io", "clusters", ""}}},
		{"cluster count", options(ClusterCount, 0), []call{{"list", "fleet.cattle.io", "clusters", ""}}},
		{"cluster count with the clusters", options(Clusters|ClusterCount, 0), []call{
			{"get", "apps", "deployments", "rancher"},
			{"list", "fleet.cattle.io", "clusters", ""}, {"list", "provisioning.cattle.io", "clusters", ""}, {"list", "management.cattle.io", "clusters", ""}}},
		{"settings by name", Options{Parts: Settings, SettingsByName: true}, func() []call {
			var out []call
			for _, d := range settings.Registry {
				out = append(out, call{"get", "management.cattle.io", "settings", d.Name})
			}
			return out
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(installation())
			s, err := Read(context.Background(), f.cs, f.dyn, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.calls(); !reflect.DeepEqual(got, tc.calls) {
				t.Errorf("calls\n%v, want\n%v", got, tc.calls)
			}
			if tc.opts.Parts&(Clusters|ClusterCount) != 0 && s.FleetClusterCount != 3 {
				t.Errorf("count %d, want 3", s.FleetClusterCount)
			}
			if tc.opts.SettingsByName && len(s.Settings) != 2 {
				t.Errorf("%d settings by name, want the 2 there", len(s.Settings))
			}
			if tc.opts.Parts&Clusters != 0 && s.RancherVersion != v2113 {
				t.Errorf("routed for %v, want v2.11.3", s.RancherVersion)
			}
		})
	}
}

// reads are the calls Read(All) makes, and SettingsByName's GET, each
// with the part it reads and the words its error names it by.
var reads = []struct {
	call call
	part Part
	what string
}{
	{call{"list", "management.cattle.io", "settings", ""}, Settings, "list settings.management.cattle.io: "},
	{call{"get", "management.cattle.io", "settings", "fleet-leader-election-lease-duration"}, Settings, "get setting fleet-leader-election-lease-duration: "},
	{call{"get", "", "configmaps", settings.DefaultStateName}, State, "get ConfigMap leasetune-system/leasetune-state: "},
	{call{"get", "", "configmaps", fleetenv.ChannelConfigMapName}, ChannelRecord, "get ConfigMap leasetune-system/leasetune-fleet-channel: "},
	{call{"list", "apps", "deployments", ""}, FleetDeployments, "list Deployments in cattle-fleet-system: "},
	{call{"get", "", "configmaps", fleetenv.RancherConfigName}, RancherConfig, "get ConfigMap cattle-system/rancher-config: "},
	{call{"get", "apps", "deployments", "rancher"}, RancherDeployment, "get Deployment cattle-system/rancher: "},
	{call{"list", "fleet.cattle.io", "clusters", ""}, Clusters, "list clusters.fleet.cattle.io: "},
	{call{"list", "provisioning.cattle.io", "clusters", ""}, Clusters, "list clusters.provisioning.cattle.io: "},
	{call{"list", "management.cattle.io", "clusters", ""}, Clusters, "list clusters.management.cattle.io: "},
}

// optionsFor reads every part, the Settings by name where the call is a
// Setting's GET.
func optionsFor(c call, optional Part) Options {
	o := options(0, optional)
	o.SettingsByName = c.verb == "get" && c.resource == "settings"
	return o
}

// TestReadReturnsEveryOtherError: an error of any read that is neither
// NotFound nor an optional part's Forbidden fails Read, keeps the API
// server's status, and names what was read; a Forbidden part that is not
// optional fails it too.
func TestReadReturnsEveryOtherError(t *testing.T) {
	for _, r := range reads {
		for _, e := range []struct {
			err      error
			optional Part
			is       func(error) bool
		}{
			{apierrors.NewInternalError(errors.New("etcd is gone")), All, apierrors.IsInternalError},
			{apierrors.NewServiceUnavailable("try later"), All, apierrors.IsServiceUnavailable},
			{apierrors.NewForbidden(schema.GroupResource{Resource: r.call.resource}, r.call.name, errors.New("no")), 0, apierrors.IsForbidden},
			{apierrors.NewForbidden(schema.GroupResource{Resource: r.call.resource}, r.call.name, errors.New("no")), All &^ r.part, apierrors.IsForbidden},
		} {
			f := newFakes(installation())
			f.fail(r.call, e.err)
			s, err := Read(context.Background(), f.cs, f.dyn, optionsFor(r.call, e.optional))
			if s != nil || err == nil || !e.is(err) || !strings.HasPrefix(err.Error(), r.what) {
				t.Errorf("%v answering %v (optional %s): %v, want an error %q…", r.call, e.err, e.optional, err, r.what)
			}
		}
	}
}

// TestReadToleratesNotFound: an object or a kind that is not there is
// absent, not an error; the other parts are read as ever.
func TestReadToleratesNotFound(t *testing.T) {
	for _, tc := range []struct {
		call   call
		absent Part
		check  func(*Snapshot) bool
	}{
		{call{"list", "management.cattle.io", "settings", ""}, Settings, func(s *Snapshot) bool { return len(s.Settings) == 0 }},
		{call{"get", "management.cattle.io", "settings", "fleet-agent-leader-election-retry-period"}, 0, func(s *Snapshot) bool {
			return len(s.Settings) == 1 && s.Settings[0].Name == "fleet-agent-leader-election-lease-duration"
		}},
		{call{"get", "", "configmaps", settings.DefaultStateName}, State, func(s *Snapshot) bool { return s.State == nil && s.StateData() == nil }},
		{call{"get", "", "configmaps", fleetenv.ChannelConfigMapName}, ChannelRecord, func(s *Snapshot) bool {
			return s.ChannelRecord == nil && s.Channel == fleet.ChannelAgentManagement
		}},
		{call{"get", "", "configmaps", fleetenv.RancherConfigName}, RancherConfig, func(s *Snapshot) bool { return s.RancherConfig == nil }},
		{call{"get", "apps", "deployments", "rancher"}, RancherDeployment, func(s *Snapshot) bool {
			return s.Rancher == nil && s.RancherReplicas == 0 && !s.RancherVersion.Known
		}},
		{call{"list", "fleet.cattle.io", "clusters", ""}, Clusters | ClusterCount, func(s *Snapshot) bool {
			return len(s.Clusters) == 0 && s.FleetClusterCount == 0 && len(s.ProvisioningClusters) == 1
		}},
		// No Rancher: the managed fleet Clusters cannot be routed, each
		// says why.
		{call{"list", "provisioning.cattle.io", "clusters", ""}, 0, func(s *Snapshot) bool {
			return len(s.Clusters) == 3 && s.Clusters[0].Err == nil && s.Clusters[1].Err != nil && s.Clusters[2].Err != nil
		}},
		{call{"list", "management.cattle.io", "clusters", ""}, 0, func(s *Snapshot) bool { return len(s.ManagementClusters) == 0 && len(s.Clusters) == 3 }},
	} {
		f := newFakes(installation())
		f.fail(tc.call, apierrors.NewNotFound(schema.GroupResource{Resource: tc.call.resource}, tc.call.name))
		s, err := Read(context.Background(), f.cs, f.dyn, optionsFor(tc.call, 0))
		if err != nil {
			t.Errorf("%v not found: %v", tc.call, err)
			continue
		}
		if s.Absent != tc.absent || !tc.check(s) || len(f.calls()) != len(everyCall)+boolInt(optionsFor(tc.call, 0).SettingsByName)*8 {
			t.Errorf("%v not found: absent %q (want %q), check %v, %d calls", tc.call, s.Absent, tc.absent, tc.check(s), len(f.calls()))
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReadRecordsForbiddenOptionalParts: a Forbidden read of a part the
// caller named optional is recorded in Unread with its error (naming what
// was read), the part is empty, and Read goes on with the others.
func TestReadRecordsForbiddenOptionalParts(t *testing.T) {
	for _, r := range reads {
		f := newFakes(installation())
		f.fail(r.call, apierrors.NewForbidden(schema.GroupResource{Resource: r.call.resource}, r.call.name, errors.New("no")))
		s, err := Read(context.Background(), f.cs, f.dyn, optionsFor(r.call, r.part))
		if err != nil {
			t.Errorf("%v forbidden, optional: %v", r.call, err)
			continue
		}
		got := s.Unread[r.part]
		if len(s.Unread) != 1 || !apierrors.IsForbidden(got) || !strings.HasPrefix(got.Error(), r.what) || !errors.Is(s.Missing(All), got) || s.Missing(All&^r.part) != nil {
			t.Errorf("%v forbidden: unread %v", r.call, s.Unread)
		}
		empty := map[Part]bool{
			Settings: len(s.Settings) == 0, State: s.State == nil, ChannelRecord: s.ChannelRecord == nil, FleetDeployments: len(s.FleetDeployments) == 0,
			RancherConfig: s.RancherConfig == nil, RancherDeployment: s.Rancher == nil,
			Clusters: len(s.Clusters)+len(s.FleetClusters)+len(s.ProvisioningClusters)+len(s.ManagementClusters) == 0,
		}
		for p, e := range empty {
			if e != (p == r.part) {
				t.Errorf("%v forbidden: part %s empty %v", r.call, p, e)
			}
		}
	}
}

// TestReadRejectsASettingThatDoesNotConvert: a Setting whose value is not
// a string fails Read, naming the Setting.
func TestReadRejectsASettingThatDoesNotConvert(t *testing.T) {
	kube, dyn := installation()
	f := newFakes(kube, append(dyn, setting("fleet-leader-election-lease-duration", int64(30))))
	if _, err := Read(context.Background(), f.cs, f.dyn, options(Settings, 0)); err == nil || !strings.HasPrefix(err.Error(), "setting fleet-leader-election-lease-duration: ") {
		t.Errorf("err %v", err)
	}
}

// TestReadCountsWithoutListingAll: ClusterCount takes the API server's
// remainingItemCount; a server that gives a continue token but no count is
// listed in full; a forbidden count of an optional part is Unread.
func TestReadCountsWithoutListingAll(t *testing.T) {
	page := func(remaining *int64, cont string) func(k8stesting.Action) (bool, runtime.Object, error) {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetResource() != fleet.ClusterGVR {
				return false, nil, nil
			}
			out := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*cluster(fleet.ClusterGVR, workspace, "a", "")}}
			out.SetRemainingItemCount(remaining)
			out.SetContinue(cont)
			return true, out, nil
		}
	}
	remaining := int64(9999)
	f := newFakes(installation())
	f.dyn.PrependReactor("list", "clusters", page(&remaining, "more"))
	s, err := Read(context.Background(), f.cs, f.dyn, options(ClusterCount, 0))
	if err != nil || s.FleetClusterCount != 10000 || len(f.calls()) != 1 {
		t.Errorf("remainingItemCount: %v, count %d, %d calls", err, s.FleetClusterCount, len(f.calls()))
	}
	// The fake answers the first list (a continue token, no count), then
	// lists the three clusters.
	f = newFakes(installation())
	first := true
	f.dyn.PrependReactor("list", "clusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		return page(nil, "more")(a)
	})
	s, err = Read(context.Background(), f.cs, f.dyn, options(ClusterCount, 0))
	if err != nil || s.FleetClusterCount != 3 || len(f.calls()) != 2 {
		t.Errorf("no count: %v, count %d, %d calls", err, s.FleetClusterCount, len(f.calls()))
	}
	f = newFakes(installation())
	f.fail(call{"list", "fleet.cattle.io", "clusters", ""}, apierrors.NewForbidden(schema.GroupResource{Resource: "clusters"}, "", errors.New("no")))
	s, err = Read(context.Background(), f.cs, f.dyn, options(ClusterCount, ClusterCount))
	if err != nil || s.Unread[ClusterCount] == nil || s.FleetClusterCount != 0 {
		t.Errorf("forbidden: %v, unread %v", err, s.Unread)
	}
	f = newFakes(installation())
	f.fail(call{"list", "fleet.cattle.io", "clusters", ""}, apierrors.NewNotFound(schema.GroupResource{Resource: "clusters"}, ""))
	s, err = Read(context.Background(), f.cs, f.dyn, options(ClusterCount, 0))
	if err != nil || s.Absent != ClusterCount {
		t.Errorf("not served: %v, absent %s", err, s.Absent)
	}
}

// TestReadChannelOverride: the flag's channel wins over the record and the
// detection.
func TestReadChannelOverride(t *testing.T) {
	f := newFakes(installation())
	o := options(0, 0)
	o.ChannelOverride = fleet.ChannelClusterEnvV09
	s, err := Read(context.Background(), f.cs, f.dyn, o)
	if err != nil || s.Channel != fleet.ChannelClusterEnvV09 || s.Evidence != "--fleet-agent-channel" {
		t.Errorf("%v: %q (%s)", err, s.Channel, s.Evidence)
	}
}
