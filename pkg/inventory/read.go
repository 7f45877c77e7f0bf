package inventory

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// SettingsGVR is the resource of Rancher's Setting objects.
var SettingsGVR = v3.SchemeGroupVersion.WithResource("settings")

// reader is one Read in progress.
type reader struct {
	ctx  context.Context
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	snap *Snapshot
}

// Read reads the parts opts.Parts names, in the order of the Part
// constants, into a Snapshot. Errors: every error of the API server but
// NotFound (recorded in Snapshot.Absent) and, for a part in opts.Optional,
// Forbidden (recorded in Snapshot.Unread), wrapped with what was read
// ("list settings.management.cattle.io", "get ConfigMap ns/name", ...); a
// Setting object that does not convert to v3.Setting ("setting NAME").
func Read(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Snapshot, error) {
	if opts.Parts == 0 {
		opts.Parts = All
	}
	if opts.RancherDeployment == "" {
		opts.RancherDeployment = rancher.DefaultDeployment
	}
	if opts.Parts&Clusters != 0 && !opts.RancherVersion.Known {
		opts.Parts |= RancherDeployment
	}
	r := &reader{ctx: ctx, cs: cs, dyn: dyn, snap: &Snapshot{Options: opts, Unread: map[Part]error{}, RancherVersion: opts.RancherVersion}}
	steps := []struct {
		part Part
		read func() error
	}{
		{Settings, r.settings},
		{State, func() error { return r.configMap(State, opts.Namespace, settings.DefaultStateName, &r.snap.State) }},
		{ChannelRecord, func() error {
			return r.configMap(ChannelRecord, opts.Namespace, fleetenv.ChannelConfigMapName, &r.snap.ChannelRecord)
		}},
		{FleetDeployments, r.fleetDeployments},
		{RancherConfig, func() error {
			return r.configMap(RancherConfig, opts.RancherNamespace, fleetenv.RancherConfigName, &r.snap.RancherConfig)
		}},
		{RancherDeployment, r.rancherDeployment},
		{Clusters, r.clusters},
		{ClusterCount, r.clusterCount},
	}
	for _, s := range steps {
		if opts.Parts&s.part == 0 {
			continue
		}
		if err := s.read(); err != nil {
			return nil, err
		}
	}
	r.snap.Channel, r.snap.Evidence = channel(r.snap)
	return r.snap, nil
}

// tolerate sorts out the error of reading part p, what naming the read:
// NotFound marks the part absent, Forbidden of an optional part is
// recorded in Unread (both nil), anything else is returned wrapped.
func (r *reader) tolerate(p Part, what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	switch {
	case apierrors.IsNotFound(err):
		r.snap.Absent |= p
		return nil
	case apierrors.IsForbidden(err) && r.snap.Options.Optional&p != 0:
		r.snap.Unread[p] = err
		return nil
	}
	return err
}

func (r *reader) settings() error {
	res := r.dyn.Resource(SettingsGVR)
	var items []unstructured.Unstructured
	if r.snap.Options.SettingsByName {
		for _, d := range settings.Registry {
			u, err := res.Get(r.ctx, d.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue // this one is missing (the Provider recreates it)
			}
			if err != nil {
				return r.tolerate(Settings, "get setting "+d.Name, err)
			}
			items = append(items, *u)
		}
	} else {
		l, err := res.List(r.ctx, metav1.ListOptions{})
		if err != nil {
			return r.tolerate(Settings, "list "+resourceName(SettingsGVR), err)
		}
		items = l.Items
	}
	for _, it := range items {
		if _, ok := settings.Lookup(it.GetName()); !ok {
			continue
		}
		var s v3.Setting
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &s); err != nil {
			return fmt.Errorf("setting %s: %w", it.GetName(), err)
		}
		r.snap.Settings = append(r.snap.Settings, s)
	}
	return nil
}

func (r *reader) configMap(p Part, ns, name string, into **corev1.ConfigMap) error {
	cm, err := r.cs.CoreV1().ConfigMaps(ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		return r.tolerate(p, fmt.Sprintf("get ConfigMap %s/%s", ns, name), err)
	}
	*into = cm
	return nil
}

func (r *reader) fleetDeployments() error {
	ns := r.snap.Options.FleetNamespace
	l, err := r.cs.AppsV1().Deployments(ns).List(r.ctx, metav1.ListOptions{})
	if err != nil {
		return r.tolerate(FleetDeployments, "list Deployments in "+ns, err)
	}
	r.snap.FleetDeployments = l.Items
	return nil
}

func (r *reader) rancherDeployment() error {
	ns, name := r.snap.Options.RancherNamespace, r.snap.Options.RancherDeployment
	d, err := r.cs.AppsV1().Deployments(ns).Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		return r.tolerate(RancherDeployment, fmt.Sprintf("get Deployment %s/%s", ns, name), err)
	}
	r.snap.Rancher = d
	r.snap.RancherReplicas = Replicas(d)
	if !r.snap.RancherVersion.Known {
		r.snap.RancherVersion, _ = rancher.Detect(d)
	}
	return nil
}

// list lists gvr: a kind that is not served is an empty list (found
// false); a Forbidden list of an optional part p is recorded in Unread and
// answers a nil list and no error.
func (r *reader) list(p Part, gvr schema.GroupVersionResource, opts metav1.ListOptions) (l *unstructured.UnstructuredList, found bool, err error) {
	l, err = r.dyn.Resource(gvr).List(r.ctx, opts)
	if apierrors.IsNotFound(err) {
		return &unstructured.UnstructuredList{}, false, nil
	}
	if err != nil {
		return nil, true, r.tolerate(p, "list "+resourceName(gvr), err)
	}
	return l, true, nil
}

func (r *reader) clusters() error {
	lists := []*[]unstructured.Unstructured{&r.snap.FleetClusters, &r.snap.ProvisioningClusters, &r.snap.ManagementClusters}
	for i, gvr := range []schema.GroupVersionResource{fleet.ClusterGVR, rancher.ProvisioningClusterGVR, rancher.ManagementClusterGVR} {
		l, found, err := r.list(Clusters, gvr, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if l == nil { // forbidden, and optional: no clusters at all
			r.snap.FleetClusters, r.snap.ProvisioningClusters, r.snap.ManagementClusters = nil, nil, nil
			return nil
		}
		if !found && i == 0 {
			r.snap.Absent |= Clusters | ClusterCount
		}
		*lists[i] = l.Items
	}
	r.snap.FleetClusterCount = len(r.snap.FleetClusters)
	r.snap.Clusters = Route(r.snap.FleetClusters, r.snap.ProvisioningClusters, r.snap.ManagementClusters, r.snap.RancherVersion)
	return nil
}

func (r *reader) clusterCount() error {
	if r.snap.Options.Parts&Clusters != 0 {
		return nil // counted from the list
	}
	l, found, err := r.list(ClusterCount, fleet.ClusterGVR, metav1.ListOptions{Limit: 1})
	switch {
	case err != nil || l == nil:
		return err
	case !found:
		r.snap.Absent |= ClusterCount
		return nil
	case l.GetRemainingItemCount() != nil:
		r.snap.FleetClusterCount = len(l.Items) + int(*l.GetRemainingItemCount())
		return nil
	case l.GetContinue() == "":
		r.snap.FleetClusterCount = len(l.Items)
		return nil
	}
	// A server that gives no count: list them all.
	all, _, err := r.list(ClusterCount, fleet.ClusterGVR, metav1.ListOptions{})
	if err != nil || all == nil {
		return err
	}
	r.snap.FleetClusterCount = len(all.Items)
	return nil
}

// resourceName names a resource as kubectl does: "clusters.fleet.cattle.io".
func resourceName(gvr schema.GroupVersionResource) string {
	return gvr.Resource + "." + gvr.Group
}

// Replicas is a Deployment's spec.replicas, 1 when unset (as Kubernetes
// defaults it).
func Replicas(d *appsv1.Deployment) int {
	if d.Spec.Replicas == nil {
		return 1
	}
	return int(*d.Spec.Replicas)
}

// channel is the Fleet agent channel of a snapshot and what decided it
// (Snapshot.Channel).
func channel(s *Snapshot) (fleet.AgentChannel, string) {
	if s.Options.ChannelOverride != "" {
		return s.Options.ChannelOverride, "--fleet-agent-channel"
	}
	var ch fleet.AgentChannel
	var evidence string
	if cm := s.ChannelRecord; cm != nil {
		ch, _ = fleet.ParseChannel(cm.Data["channel"])
		evidence = "recorded: " + cm.Data["evidence"]
	}
	if d := s.FleetDeployment(fleet.ControllerDeployment); d != nil {
		det := fleet.DetectChannel(d, own.FieldManager, ch)
		return det.Channel, det.Evidence
	}
	return ch, evidence
}
