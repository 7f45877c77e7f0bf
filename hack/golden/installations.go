package main

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
)

// The synthetic installations the plan cases are computed over: each an
// inventory.Snapshot as inventory.Read would give it (the clusters routed
// with inventory.Route, the Rancher version read from the image), built
// here rather than read, so that every Fleet channel, every kind of
// cluster and every reason leasetune leaves something alone is covered.

const (
	ltNS      = "leasetune-system"
	fleetNS   = fleet.DefaultNamespace
	rancherNS = "cattle-system"
	workspace = "fleet-default"
)

// installation is one synthetic installation: its snapshot and the
// options of electionstatus.Compute (which settings an env var on
// leasetune's pod sets).
type installation struct {
	name string
	snap *inventory.Snapshot
	opts electionstatus.Options
}

func env(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// envTriple is p's three entries for t, in field order.
func envTriple(p election.EnvPrefix, lease, renew, retry string) []corev1.EnvVar {
	return env(p.EnvName(election.LeaseDuration), lease, p.EnvName(election.RenewDeadline), renew, p.EnvName(election.RetryPeriod), retry)
}

func container(name, image string, e ...corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: name, Image: image, Env: e}
}

func int32p(n int32) *int32 { return &n }

// settled gives d the status of a Deployment that is available and not
// mid-rollout (rancherenv.Settled).
func settled(d *appsv1.Deployment) *appsv1.Deployment {
	n := int32(1)
	if d.Spec.Replicas != nil {
		n = *d.Spec.Replicas
	}
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: n, UpdatedReplicas: n, AvailableReplicas: n, ReadyReplicas: n}
	return d
}

func deployment(ns, name string, replicas *int32, containers ...corev1.Container) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	d.Spec.Replicas = replicas
	d.Spec.Template.Spec.Containers = containers
	return settled(d)
}

// fleetDeployments are the Fleet chart's Deployments at image tag v:
// fleet-controller (its controller, cleanup and agentmanagement
// containers), gitjob and helmops, with ctrl on each Fleet container and
// am added to fleet-agentmanagement; and the fleet-agent of the local
// cluster, which is no target.
func fleetDeployments(v string, ctrl, am []corev1.EnvVar) []appsv1.Deployment {
	img := "rancher/fleet:" + v
	amEnv := append(append([]corev1.EnvVar{}, ctrl...), am...)
	return []appsv1.Deployment{
		*deployment(fleetNS, fleet.ControllerDeployment, nil,
			container(fleet.ControllerContainer, img, ctrl...),
			container(fleet.CleanupContainer, img, ctrl...),
			container(fleet.AgentManagementContainer, img, amEnv...)),
		*deployment(fleetNS, fleet.GitjobDeployment, nil, container(fleet.GitjobContainer, img, ctrl...)),
		*deployment(fleetNS, fleet.HelmopsDeployment, nil, container(fleet.HelmopsContainer, img, ctrl...)),
		*deployment(fleetNS, "fleet-agent", nil, container("fleet-agent", "rancher/fleet-agent:"+v)),
	}
}

// shard is a fleet-controller shard Deployment (a target when its pod
// template carries the shard-id label).
func shard(id string, labelled bool, e []corev1.EnvVar) appsv1.Deployment {
	d := deployment(fleetNS, fleet.ControllerDeployment+"-shard-"+id, nil, container(fleet.ControllerContainer, "rancher/fleet:v0.13.14", e...))
	if labelled {
		d.Spec.Template.Labels = map[string]string{fleet.ShardIDLabel: id}
	}
	return *d
}

// rancherDeployment is the Rancher Deployment at image tag v with
// replicas and the rancher container's env; record, when not nil, is
// leasetune's record of the entries it wrote (rancherenv.RecordAnnotation).
func rancherDeployment(v string, replicas int32, e []corev1.EnvVar, record map[string]string) *appsv1.Deployment {
	d := deployment(rancherNS, rancher.DefaultDeployment, int32p(replicas), container(rancher.Container, "rancher/rancher:"+v, e...))
	one := intstr.FromInt32(1)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one, MaxSurge: &one}}
	if record != nil {
		b, _ := json.Marshal(record)
		d.Annotations = map[string]string{rancherenv.RecordAnnotation: string(b)}
	}
	return d
}

func rancherConfig(doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rancherNS, Name: fleetenv.RancherConfigName},
		Data: map[string]string{fleetenv.RancherConfigKey: doc}}
}

// clusterObject is a cluster object of kind gvr with annotations ann (the
// override annotations, leasetune's record) and spec.agentEnvVars e (nil:
// none).
func clusterObject(kind, ns, name string, ann map[string]string, e []interface{}) unstructured.Unstructured {
	apiVersion := map[string]string{"fleet": "fleet.cattle.io/v1alpha1", "provisioning": "provisioning.cattle.io/v1", "management": "management.cattle.io/v3"}[kind]
	u := unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion, "kind": "Cluster", "spec": map[string]interface{}{}}}
	u.SetNamespace(ns)
	u.SetName(name)
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	if e != nil {
		_ = unstructured.SetNestedSlice(u.Object, e, "spec", "agentEnvVars")
	}
	return u
}

// items are agentEnvVars items name, value, name, value, ...
func items(kv ...string) []interface{} {
	out := []interface{}{}
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, map[string]interface{}{"name": kv[i], "value": kv[i+1]})
	}
	return out
}

// cattle are the CATTLE_ELECTION_* items of a triple, after the items more.
func cattle(lease, renew, retry string, more ...interface{}) []interface{} {
	p := election.CattlePrefix
	return append(more, items(p.EnvName(election.LeaseDuration), lease, p.EnvName(election.RenewDeadline), renew,
		p.EnvName(election.RetryPeriod), retry)...)
}

// owned is leasetune's record of having written a triple's entries.
func owned(lease, renew, retry string) string {
	p := election.CattlePrefix
	b, _ := json.Marshal(map[string]string{p.EnvName(election.LeaseDuration): lease, p.EnvName(election.RenewDeadline): renew,
		p.EnvName(election.RetryPeriod): retry})
	return string(b)
}

func overrides(lease, renew, retry string) map[string]string {
	out := map[string]string{}
	for i, v := range []string{lease, renew, retry} {
		if v != "" {
			out[agentenv.OverrideAnnotations[i]] = v
		}
	}
	return out
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// clusters are the three cluster lists.
type clusters struct {
	fleets, provs, mgmts []unstructured.Unstructured
}

// standalone adds a fleet Cluster without the management label.
func (c *clusters) standalone(name string, ann map[string]string, e []interface{}) *clusters {
	c.fleets = append(c.fleets, clusterObject("fleet", workspace, name, ann, e))
	return c
}

// provisioned adds a Rancher-provisioned (RKE2/K3s) cluster: its fleet
// Cluster (fleetEnv: Rancher's copy of the env), provisioning Cluster
// (the source: ann, e) and management Cluster.
func (c *clusters) provisioned(name string, ann map[string]string, e, fleetEnv []interface{}) *clusters {
	mgmt := "c-m-" + name
	fc := clusterObject("fleet", workspace, name, nil, fleetEnv)
	fc.SetLabels(map[string]string{rancher.ClusterNameLabel: mgmt})
	pc := clusterObject("provisioning", workspace, name, ann, e)
	_ = unstructured.SetNestedField(pc.Object, mgmt, "status", "clusterName")
	_ = unstructured.SetNestedField(pc.Object, map[string]interface{}{}, "spec", "rkeConfig")
	c.fleets, c.provs = append(c.fleets, fc), append(c.provs, pc)
	c.mgmts = append(c.mgmts, clusterObject("management", "", mgmt, nil, e))
	return c
}

// imported adds an imported cluster: fleet, provisioning (no rkeConfig)
// and management Cluster, ann and e on both of the last two (the
// management Cluster is the source beside Rancher v2.11+, else the
// provisioning one).
func (c *clusters) imported(name string, ann map[string]string, e, fleetEnv []interface{}) *clusters {
	mgmt := "c-m-" + name
	fc := clusterObject("fleet", workspace, name, nil, fleetEnv)
	fc.SetLabels(map[string]string{rancher.ClusterNameLabel: mgmt})
	pc := clusterObject("provisioning", workspace, name, ann, e)
	_ = unstructured.SetNestedField(pc.Object, mgmt, "status", "clusterName")
	c.fleets, c.provs = append(c.fleets, fc), append(c.provs, pc)
	c.mgmts = append(c.mgmts, clusterObject("management", "", mgmt, ann, e))
	return c
}

// importedDriver is imported with the management Cluster's
// status.driver (Rancher v2.15's imported day-2 operations read it).
func (c *clusters) importedDriver(name, driver string, ann map[string]string, e, fleetEnv []interface{}) *clusters {
	c.imported(name, ann, e, fleetEnv)
	_ = unstructured.SetNestedField(c.mgmts[len(c.mgmts)-1].Object, driver, "status", "driver")
	return c
}

// legacy adds a legacy Rancher cluster c-xxxxx: the management Cluster is
// the source; fleetAnn are override annotations someone put on its fleet
// Cluster (they do not apply).
func (c *clusters) legacy(mgmt string, ann map[string]string, e []interface{}, fleetAnn map[string]string) *clusters {
	fc := clusterObject("fleet", workspace, mgmt, fleetAnn, nil)
	fc.SetLabels(map[string]string{rancher.ClusterNameLabel: mgmt})
	c.fleets = append(c.fleets, fc)
	c.mgmts = append(c.mgmts, clusterObject("management", "", mgmt, ann, e))
	return c
}

// unroutable adds a fleet Cluster whose provisioning Cluster is not there
// (yet), with Rancher's copy of entries fleetEnv.
func (c *clusters) unroutable(name string, fleetEnv []interface{}) *clusters {
	fc := clusterObject("fleet", workspace, name, nil, fleetEnv)
	fc.SetLabels(map[string]string{rancher.ClusterNameLabel: "c-m-" + name})
	c.fleets = append(c.fleets, fc)
	return c
}

// setup describes an installation to build.
type setup struct {
	// values are the Setting objects' values by name; env the settings an
	// env var sets (value: the env value); missing the objects that are
	// not there (their remembered value counts).
	values, env map[string]string
	missing     map[string]bool
	// remembered and effective are leasetune's state: the users' values
	// and the triples in effect by component ("" lease: none recorded).
	remembered map[string]string
	effective  map[settings.Component][3]string
	noState    bool
	// channel is the Fleet agent channel, fleetVersion the Fleet image tag,
	// ctrlEnv / amEnv the Fleet chart's env on its containers, shards more
	// Fleet Deployments.
	channel        fleet.AgentChannel
	fleetVersion   string
	ctrlEnv, amEnv []corev1.EnvVar
	shards         []appsv1.Deployment
	noFleet        bool
	// rancherConfig is rancher-config's fleet document (nil: none).
	rancherConfig *string
	// rancher is the Rancher Deployment (nil: none).
	rancher *appsv1.Deployment
	// clusters are the downstream clusters.
	clusters clusters
}

func (s setup) build(name string) installation {
	snap := &inventory.Snapshot{Options: inventory.Options{Namespace: ltNS, FleetNamespace: fleetNS, RancherNamespace: rancherNS,
		RancherDeployment: rancher.DefaultDeployment}, Unread: map[inventory.Part]error{}}
	for _, d := range settings.Registry {
		if s.missing[d.Name] {
			continue
		}
		o := v3.Setting{Value: s.values[d.Name], Default: d.Default}
		o.Name = d.Name
		if v, ok := s.env[d.Name]; ok {
			o.Value, o.Source = v, v3.SourceEnv
		}
		snap.Settings = append(snap.Settings, o)
	}
	if !s.noState {
		eff := map[string]map[string]string{}
		for c, t := range s.effective {
			eff[string(c)] = map[string]string{"leaseDuration": t[0], "renewDeadline": t[1], "retryPeriod": t[2]}
		}
		vals := s.remembered
		if vals == nil {
			vals = map[string]string{}
		}
		v, _ := json.Marshal(vals)
		e, _ := json.Marshal(eff)
		snap.State = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ltNS, Name: settings.DefaultStateName},
			Data: map[string]string{"values": string(v), "effective": string(e)}}
	}
	if !s.noFleet {
		v := s.fleetVersion
		if v == "" {
			v = "v0.13.14"
		}
		snap.FleetDeployments = append(fleetDeployments(v, s.ctrlEnv, s.amEnv), s.shards...)
	}
	snap.Channel = s.channel
	if s.channel != "" {
		snap.Evidence = "synthetic: " + string(s.channel)
	}
	if s.rancherConfig != nil {
		snap.RancherConfig = rancherConfig(*s.rancherConfig)
	}
	if s.rancher != nil {
		snap.Rancher = s.rancher
		snap.RancherReplicas = inventory.Replicas(s.rancher)
		snap.RancherVersion, _ = rancher.Detect(s.rancher)
	}
	snap.FleetClusters, snap.ProvisioningClusters, snap.ManagementClusters = s.clusters.fleets, s.clusters.provs, s.clusters.mgmts
	snap.FleetClusterCount = len(snap.FleetClusters)
	snap.Clusters = inventory.Route(snap.FleetClusters, snap.ProvisioningClusters, snap.ManagementClusters, snap.RancherVersion)
	opts := electionstatus.Options{RancherEnv: s.rancher != nil}
	if len(s.env) > 0 {
		envSet := s.env
		opts.EnvSet = func(d settings.Definition) bool { _, ok := envSet[d.Name]; return ok }
	}
	return installation{name: name, snap: snap, opts: opts}
}

func str(s string) *string { return &s }

// installations are the cases, each named for what it covers.
func installations() []installation {
	agentAt := func(l, r, t string) map[string]string {
		return map[string]string{"fleet-agent-leader-election-lease-duration": l, "fleet-agent-leader-election-renew-deadline": r,
			"fleet-agent-leader-election-retry-period": t}
	}
	fleetDefaults := [3]string{"30s", "25s", "10s"}
	wrangler := [3]string{"45s", "30s", "2s"}
	atDefaults := map[settings.Component][3]string{settings.FleetController: fleetDefaults, settings.FleetAgent: fleetDefaults, settings.Rancher: wrangler}
	chartCtrl := envTriple(election.CattlePrefix, "30s", "25s", "10s")
	chartAgent := envTriple(election.FleetAgentPrefix, "30s", "25s", "10s")
	p := election.CattlePrefix
	var out []installation

	// Fleet v0.13+ beside Rancher v2.12: the chart's env on every Fleet
	// container and FLEET_AGENT_ELECTION_* on fleet-agentmanagement,
	// rancher-config with the chart's own values, Rancher without
	// entries, standalone and Rancher-managed clusters without entries.
	{
		var cl clusters
		cl.standalone("edge-1", nil, nil).standalone("edge-2", nil, items("HTTP_PROXY", "http://proxy:3128"))
		cl.provisioned("rke2-1", nil, nil, nil).imported("imported-1", nil, nil, nil)
		out = append(out, setup{effective: atDefaults, channel: fleet.ChannelAgentManagement, ctrlEnv: chartCtrl, amEnv: chartAgent,
			rancherConfig: str("{}\n"), rancher: rancherDeployment("v2.12.3", 3, nil, nil), clusters: cl}.build("agentmanagement, at the defaults, beside Rancher v2.12"))
	}
	// The same with settings changed and pending (the record holds the
	// defaults), sharded Fleet, rancher-config holding the values, Rancher
	// with leasetune's entries, clusters with foreign entries (the
	// judgement of a global agent triple) and overrides (unsupported).
	{
		var cl clusters
		cl.standalone("edge-1", overrides("", "", "20s"), nil)
		cl.standalone("edge-foreign", nil, items(p.EnvName(election.RetryPeriod), "12s"))
		cl.provisioned("rke2-1", nil, nil, items(p.EnvName(election.LeaseDuration), "55s"))
		cl.unroutable("gone-1", items(p.EnvName(election.RetryPeriod), "14s"))
		values := with(agentAt("60s", "50s", "20s"), "fleet-leader-election-retry-period", "12s",
			"rancher-leader-election-lease-duration", "60s", "rancher-leader-election-renew-deadline", "40s", "rancher-leader-election-retry-period", "5s")
		out = append(out, setup{values: values, remembered: values, effective: atDefaults, channel: fleet.ChannelAgentManagement,
			ctrlEnv: envTriple(p, "30s", "25s", "12s"), amEnv: envTriple(election.FleetAgentPrefix, "60s", "50s", "20s"),
			shards:        []appsv1.Deployment{shard("1", true, chartCtrl), shard("2", false, nil)},
			rancherConfig: str("# Rancher's values\nleaderElection:\n  leaseDuration: 30s\n  renewDeadline: 25s\n  retryPeriod: 12s # tuned\nagent:\n  leaderElection:\n    leaseDuration: 1m\n    renewDeadline: 50s\n    retryPeriod: 20s\npriorityClassName: rancher-critical\n"),
			rancher:       rancherDeployment("v2.11.3", 3, envTriple(p, "60s", "40s", "5s"), map[string]string{p.EnvName(election.LeaseDuration): "60s", p.EnvName(election.RenewDeadline): "40s", p.EnvName(election.RetryPeriod): "5s"}),
			clusters:      cl}.build("agentmanagement, settings pending, foreign cluster entries, Rancher with leasetune's entries"))
	}
	// Fleet v0.12: the agent triple reaches no agent; rancher-config at
	// the chart's defaults written out; Rancher 2.8.2 reads no env.
	{
		var cl clusters
		cl.standalone("edge-1", nil, nil).standalone("edge-2", overrides("40s", "", ""), nil)
		cl.provisioned("rke2-1", overrides("", "", "5s"), nil, nil)
		out = append(out, setup{values: agentAt("60s", "50s", "20s"), effective: map[settings.Component][3]string{settings.FleetAgent: {"60s", "50s", "20s"}},
			channel: fleet.ChannelFixedV012, fleetVersion: "v0.12.4", ctrlEnv: chartCtrl,
			rancherConfig: str("leaderElection:\n  leaseDuration: 30s\n  renewDeadline: 25s\n  retryPeriod: 10s\nagent:\n  leaderElection:\n    leaseDuration: 30s\n    renewDeadline: 25s\n    retryPeriod: 10s\n"),
			rancher:       rancherDeployment("v2.8.2", 1, nil, nil), clusters: cl}.build("fixed-v0.12, Rancher v2.8.2 reading no env"))
	}
	// Fleet v0.9.1+: the agent triple goes to each cluster's agentEnvVars:
	// standalone with and without overrides, owned and foreign entries, an
	// invalid override, Rancher-provisioned and imported beside v2.10
	// (provisioning Cluster the source), a legacy cluster with overrides
	// on its fleet Cluster (ignored), a malformed agentEnvVars (standalone
	// and Rancher-provisioned).
	{
		var cl clusters
		cl.standalone("plain", nil, nil)
		cl.standalone("override", overrides("", "", "20s"), nil)
		cl.standalone("owned", map[string]string{agentenv.RecordAnnotation: owned("30s", "25s", "10s")}, cattle("30s", "25s", "10s", items("TZ", "UTC")...))
		cl.standalone("owned-override", with(overrides("90s", "", ""), agentenv.RecordAnnotation, owned("90s", "25s", "10s")), cattle("90s", "25s", "10s"))
		cl.standalone("foreign", nil, items(p.EnvName(election.LeaseDuration), "40s"))
		cl.standalone("invalid", overrides("", "", "30s"), nil)
		cl.standalone("at-wrangler", overrides("45s", "30s", "2s"), nil)
		cl.standalone("owned-at-wrangler", with(overrides("45s", "30s", "2s"), agentenv.RecordAnnotation, owned("45s", "30s", "2s")), cattle("45s", "30s", "2s"))
		malformed := clusterObject("fleet", workspace, "malformed", nil, nil)
		_ = unstructured.SetNestedField(malformed.Object, "CATTLE_ELECTION_RETRY_PERIOD=5s", "spec", "agentEnvVars")
		cl.fleets = append(cl.fleets, malformed)
		cl.provisioned("rke2-1", nil, nil, nil)
		cl.provisioned("rke2-over", overrides("", "40s", ""), nil, nil)
		// Malformed on a Rancher-managed source: its cattle-cluster-agent
		// counts neither as retuned nor as kept (what it runs is not known).
		cl.provisioned("rke2-malformed", nil, append([]interface{}{"junk"}, cattle("40s", "30s", "5s")...), nil)
		cl.imported("imported-1", nil, nil, nil)
		cl.legacy("c-abcde", nil, nil, overrides("", "", "8s"))
		out = append(out, setup{effective: atDefaults, channel: fleet.ChannelClusterEnvV09, fleetVersion: "v0.9.11",
			rancher: rancherDeployment("v2.10.3", 3, nil, nil), clusters: cl}.build("cluster-env-v0.9, every kind of cluster, Rancher v2.10"))
	}
	// The same channel with an agent triple already written everywhere,
	// beside Rancher v2.11 (imported: the management Cluster the source).
	{
		var cl clusters
		rec := map[string]string{agentenv.RecordAnnotation: owned("40s", "30s", "5s")}
		cl.standalone("owned-1", rec, cattle("40s", "30s", "5s"))
		cl.standalone("owned-2", rec, cattle("40s", "30s", "5s"))
		cl.imported("imported-1", rec, cattle("40s", "30s", "5s"), cattle("40s", "30s", "5s"))
		cl.provisioned("rke2-1", rec, cattle("40s", "30s", "5s"), cattle("40s", "30s", "5s"))
		vals := agentAt("40s", "30s", "5s")
		out = append(out, setup{values: vals, remembered: vals, effective: map[settings.Component][3]string{settings.FleetAgent: {"40s", "30s", "5s"}},
			channel: fleet.ChannelClusterEnvV09, fleetVersion: "v0.9.11", rancherConfig: str(""),
			rancher: rancherDeployment("v2.11.3", 2, nil, nil), clusters: cl}.build("cluster-env-v0.9, the agent triple written, Rancher v2.11"))
	}
	// Fleet v0.9.0 (agents read no env) and v0.10-v0.11 (no election):
	// nothing reaches the agents; no Rancher.
	for _, c := range []struct {
		ch      fleet.AgentChannel
		version string
	}{{fleet.ChannelFixedV090, "v0.9.0"}, {fleet.ChannelNoElection, "v0.11.2"}} {
		var cl clusters
		cl.standalone("edge-1", nil, nil).standalone("edge-2", overrides("", "", "20s"), nil)
		out = append(out, setup{effective: atDefaults, channel: c.ch, fleetVersion: c.version, ctrlEnv: chartCtrl, clusters: cl}.build(string(c.ch)+", no Rancher"))
	}
	// No Fleet at all (unknown channel), rancher-config that is not a YAML
	// mapping, an env-sourced setting, a missing Setting with a remembered
	// value, refused Rancher settings (the record stays in effect), and a
	// Rancher Deployment with someone else's entries.
	{
		out = append(out, setup{
			values:        map[string]string{"rancher-leader-election-renew-deadline": "50s"},
			env:           map[string]string{"fleet-leader-election-retry-period": "15s"},
			missing:       map[string]bool{"fleet-agent-leader-election-lease-duration": true},
			remembered:    map[string]string{"fleet-agent-leader-election-lease-duration": "45s", "fleet-leader-election-retry-period": "12s"},
			effective:     map[settings.Component][3]string{settings.Rancher: {"60s", "40s", "5s"}},
			noFleet:       true,
			rancherConfig: str("- not\n- a mapping\n"),
			rancher:       rancherDeployment("v2.12.3", 3, env(p.EnvName(election.RetryPeriod), "3s"), nil),
		}.build("no Fleet, rancher-config not a mapping, env and remembered settings, refused Rancher settings, foreign Rancher entries"))
	}
	// Rancher's Deployment mid-rollout, or with an unsafe strategy, and
	// another without a rancher container or release tag.
	{
		mid := rancherDeployment("v2.12.3", 3, nil, nil)
		mid.Status.UpdatedReplicas = 1
		out = append(out, setup{effective: atDefaults, channel: fleet.ChannelAgentManagement, ctrlEnv: chartCtrl, amEnv: chartAgent,
			rancher: mid}.build("Rancher mid-rollout"))
		unsafe := rancherDeployment("v2.12.3", 1, envTriple(p, "60s", "40s", "5s"), map[string]string{p.EnvName(election.LeaseDuration): "60s", p.EnvName(election.RenewDeadline): "40s", p.EnvName(election.RetryPeriod): "5s"})
		unsafe.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		vals := map[string]string{"rancher-leader-election-lease-duration": "60s", "rancher-leader-election-renew-deadline": "40s", "rancher-leader-election-retry-period": "5s"}
		out = append(out, setup{values: vals, remembered: vals, effective: map[settings.Component][3]string{settings.Rancher: {"60s", "40s", "5s"}},
			channel: fleet.ChannelAgentManagement, ctrlEnv: chartCtrl, amEnv: chartAgent, rancher: unsafe}.build("Rancher with leasetune's entries and a Recreate strategy"))
		noTag := rancherDeployment("head", 3, nil, nil)
		out = append(out, setup{effective: atDefaults, channel: fleet.ChannelAgentManagement, ctrlEnv: chartCtrl, amEnv: chartAgent,
			rancher: noTag}.build("Rancher image without a release tag"))
		noCtr := deployment(rancherNS, rancher.DefaultDeployment, int32p(2), container("proxy", "nginx"))
		out = append(out, setup{effective: atDefaults, channel: fleet.ChannelAgentManagement, ctrlEnv: chartCtrl, amEnv: chartAgent,
			rancher: noCtr}.build("Rancher Deployment without a rancher container"))
	}
	// Fleet v0.13 whose fleet-agentmanagement has no FLEET_AGENT_ELECTION_*
	// yet and whose Fleet containers hold the controller triple only
	// partly, with no state at all (nothing recorded in effect).
	{
		var cl clusters
		cl.standalone("edge-1", nil, nil)
		out = append(out, setup{noState: true, values: map[string]string{"fleet-leader-election-lease-duration": "40s"},
			channel: fleet.ChannelAgentManagement, ctrlEnv: env(p.EnvName(election.LeaseDuration), "30s", p.EnvName(election.RetryPeriod), "10000ms"),
			rancherConfig: str("leaderElection:\nagent: {}\n"), clusters: cl}.build("agentmanagement without FLEET_AGENT_ELECTION_*, partial entries, no state"))
	}
	// Fleet v0.16 beside Rancher v2.15 with entries an earlier leasetune
	// wrote on imported clusters' management Clusters: removing them is a
	// write, which on RKE2/K3s clusters with day-2 operations re-runs
	// system-agent's Plan on every node (rancher.ImportedDay2Ops); not on
	// one whose operations are off, nor on an EKS cluster.
	{
		var cl clusters
		rec := map[string]string{agentenv.RecordAnnotation: owned("40s", "30s", "5s")}
		cl.importedDriver("rke2-imp", "rke2", rec, cattle("40s", "30s", "5s"), nil)
		cl.importedDriver("k3s-imp", "k3s", rec, cattle("40s", "30s", "5s"), nil)
		cl.importedDriver("k3s-noops", "k3s", with(rec, rancher.OperationsEnabledAnnotation, "false"), cattle("40s", "30s", "5s"), nil)
		cl.importedDriver("eks-imp", "EKS", rec, cattle("40s", "30s", "5s"), nil)
		out = append(out, setup{effective: atDefaults, channel: fleet.ChannelAgentManagement, ctrlEnv: chartCtrl, amEnv: chartAgent, fleetVersion: "v0.16.1",
			rancher: rancherDeployment("v2.15.0", 3, nil, nil), clusters: cl}.build("agentmanagement beside Rancher v2.15, old entries on imported clusters (day-2 operations)"))
	}
	// No Fleet Deployments, so no channel: leasetune's earlier entries on
	// the clusters wait (the agentenv controller writes no cluster until
	// it knows the channel).
	{
		var cl clusters
		rec := map[string]string{agentenv.RecordAnnotation: owned("40s", "30s", "5s")}
		cl.standalone("waits-1", rec, cattle("40s", "30s", "5s"))
		cl.standalone("waits-2", rec, cattle("40s", "30s", "5s"))
		out = append(out, setup{effective: atDefaults, noFleet: true, clusters: cl}.build("no Fleet Deployments: the clusters' earlier entries wait for the channel"))
	}
	return out
}
