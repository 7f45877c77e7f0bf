// Package locks is the catalogue of the leader-election locks a Rancher
// installation runs: which component holds each, whether leasetune's
// settings govern it, and, for the ones they do not, the triple it runs by
// default and how an operator changes it. audit attributes a log's lock
// traffic with it, plan and recommend show what the locks leasetune leaves
// alone cost. Pure: no I/O.
package locks

import (
	"strings"
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

// Lock is one lock (or family of locks) of the catalogue.
type Lock struct {
	// Name is the lock's name; Prefix, when true, also matches
	// Name + "-<suffix>" (a Fleet shard's lock).
	Name   string
	Prefix bool
	// Namespace is where Rancher (or the component's chart) puts it; a
	// lock of that name elsewhere is another installation's (a
	// clusterctl-installed Cluster API, a user's cluster-autoscaler) and
	// not attributed. AnyNamespace: Fleet's, whose namespace is the Fleet
	// release's or the agent's, and the name alone identifies the lock.
	Namespace    string
	AnyNamespace bool
	// Component holds it; Governed is the component whose leasetune
	// settings set its triple, or "".
	Component string
	Governed  settings.Component
	// Defaults is the triple it runs when nobody changes it (zero for a
	// governed lock: its settings say).
	Defaults election.Timings
	// Downstream: the lock lives in each downstream cluster, so it is in
	// a downstream cluster's audit log, never in the local one's.
	Downstream bool
	// Rancher says which Rancher lines install the component, Change how
	// an operator changes its triple (for a lock leasetune leaves alone),
	// Source where the facts were read.
	Rancher, Change, Source string
	// Since is the Rancher v2 minor from which Rancher installs the
	// component in its own cluster by default (0: it does not; a user
	// installs it, or it runs downstream): LeftAlone lists those.
	Since int
}

// controllerRuntimeDefaults is controller-runtime's triple
// (sigs.k8s.io/controller-runtime v0.20.4–v0.23.3 pkg/manager/internal.go,
// defaultLeaseDuration/defaultRenewDeadline/defaultRetryPeriod), which is
// also client-go's component-base flag default that cluster-autoscaler
// binds.
var controllerRuntimeDefaults = election.Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// Catalogue is every lock leasetune knows. Each entry's Source says where
// it was read; docs/design.md ("The locks of a Rancher installation")
// has them in one table.
var Catalogue = []Lock{
	{Name: "cattle-controllers", Namespace: "kube-system", Component: "rancher", Governed: settings.Rancher,
		Rancher: "every line", Source: "rancher/rancher pkg/wrangler/context.go leader.NewManager(\"\", \"cattle-controllers\"); wrangler's RunOrDie puts an empty namespace in kube-system"},
	{Name: "fleet-controller-lock", AnyNamespace: true, Component: "fleet-controller", Governed: settings.FleetController,
		Rancher: "v2.8 (Fleet v0.9)", Source: "rancher/fleet v0.9.9 internal/cmd/controller/controllers/controllers.go:239"},
	{Name: "gitjob", AnyNamespace: true, Component: "gitjob", Governed: settings.FleetController,
		Rancher: "v2.8 (Fleet v0.9)", Source: "rancher/gitjob v0.9.4 main.go:91"},
	{Name: "fleet-agentmanagement-lock", AnyNamespace: true, Component: "fleet-agentmanagement", Governed: settings.FleetController,
		Rancher: "v2.9+ (Fleet v0.10+)", Source: "rancher/fleet v0.14.10 internal/cmd/controller/agentmanagement/start.go:49"},
	{Name: "fleet-cleanup-lock", AnyNamespace: true, Component: "fleet-cleanup", Governed: settings.FleetController,
		Rancher: "v2.9+ (Fleet v0.10+)", Source: "rancher/fleet v0.14.10 internal/cmd/controller/cleanup/start.go:31"},
	{Name: "fleet-controller-leader-election-shard", Prefix: true, AnyNamespace: true, Component: "fleet-controller", Governed: settings.FleetController,
		Rancher: "v2.9+ (Fleet v0.10+)", Source: "rancher/fleet v0.14.10 internal/cmd/controller/operator.go:73"},
	{Name: "fleet-gitops-leader-election-shard", Prefix: true, AnyNamespace: true, Component: "fleet-gitjob", Governed: settings.FleetController,
		Rancher: "v2.9+ (Fleet v0.10+)", Source: "rancher/fleet v0.14.10 internal/cmd/controller/gitops/operator.go:114"},
	{Name: "fleet-helmops-leader-election-shard", Prefix: true, AnyNamespace: true, Component: "fleet-helmops", Governed: settings.FleetController,
		Rancher: "v2.10+ (Fleet v0.11+)", Source: "rancher/fleet v0.14.10 internal/cmd/controller/helmops/operator.go:91"},
	{Name: "fleet-agent-lock", AnyNamespace: true, Component: "fleet-agent", Governed: settings.FleetAgent,
		Rancher: "v2.8 (Fleet v0.9)", Source: "rancher/fleet v0.9.9 internal/cmd/agent/start.go:55"},
	{Name: "fleet-agent", AnyNamespace: true, Component: "fleet-agent", Governed: settings.FleetAgent,
		Rancher: "v2.11+ (Fleet v0.12+)", Source: "rancher/fleet v0.14.10 internal/cmd/agent/root.go leaseLockName"},

	// Rancher v2.13+ installs rancher-turtles (feature "turtles", on by
	// default: rancher/rancher v2.15.0 pkg/features/feature.go:167-170;
	// chart 110.0.0+up0.27.0, build.yaml:4), and turtles installs the
	// Cluster API core controller (image cluster-api-controller v1.13.3 on
	// v2.15.0, scripts/package-env:16).
	{Name: "controller-leader-election-rancher-turtles", Namespace: "cattle-turtles-system", Component: "rancher-turtles",
		Defaults: controllerRuntimeDefaults, Rancher: "v2.13+", Since: 13,
		Change: "the flags --leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period in the rancher-turtles chart's managerArguments (with Rancher: the key rancher-turtles of the ConfigMap cattle-system/rancher-config)",
		Source: "rancher/turtles v0.27.0 main.go:90-99 (flag defaults 15s/10s/2s), 145-150 (LeaderElectionID; no LeaderElectionNamespace: the pod's); charts/rancher-turtles/values.yaml:16 namespace, templates/deployment.yaml:9 replicas: 1"},
	{Name: "controller-leader-election-capi", Namespace: "cattle-capi-system", Component: "cluster-api (installed by rancher-turtles)",
		Defaults: controllerRuntimeDefaults, Rancher: "v2.13+", Since: 13,
		Change: "spec.manager.leaderElection of the CAPIProvider cattle-capi-system/cluster-api (the Cluster API operator turns it into the --leader-elect-* flags)",
		Source: "kubernetes-sigs/cluster-api v1.13.3 main.go:158-167 (flag defaults 15s/10s/2s), 364-369 (LeaderElectionID); cluster-api-operator v0.27.0 internal/controller/phase_load.go:88 (into the CAPIProvider's namespace), component_customizer.go:246-247, 393-416 (spec.manager.leaderElection to flags)"},
	{Name: "rke2-bootstrap-manager-leader-election-capi", Namespace: "rke2-bootstrap-system", Component: "cluster-api-provider-rke2 bootstrap",
		Defaults: controllerRuntimeDefaults, Rancher: "v2.13+, when the rancher-turtles-providers chart is installed",
		Change: "spec.manager.leaderElection of its CAPIProvider",
		Source: "rancher/cluster-api-provider-rke2 v0.25.0 bootstrap/main.go:179 (LeaderElectionID)"},
	{Name: "rke2-controlplane-manager-leader-election-capi", Namespace: "rke2-control-plane-system", Component: "cluster-api-provider-rke2 control plane",
		Defaults: controllerRuntimeDefaults, Rancher: "v2.13+, when the rancher-turtles-providers chart is installed",
		Change: "spec.manager.leaderElection of its CAPIProvider",
		Source: "rancher/cluster-api-provider-rke2 v0.25.0 controlplane/main.go:212 (LeaderElectionID)"},
	// Rancher Prime v2.13+ deploys cluster-autoscaler to a downstream
	// cluster as a Fleet HelmOp (rancher/rancher v2.15.0
	// pkg/controllers/capr/autoscaler/fleet.go:67 DefaultNamespace
	// kube-system, :72 ReleaseName cluster-autoscaler, :90-91 extraArgs
	// {v: 2}, :138-141 re-applied on drift).
	{Name: "cluster-autoscaler", Namespace: "kube-system", Component: "cluster-autoscaler", Downstream: true,
		Defaults: controllerRuntimeDefaults, Rancher: "v2.13+ Prime, per downstream cluster with autoscaling",
		Change: "none Rancher supports: Rancher generates the HelmOp's values (extraArgs v: 2 only) and re-applies them when they drift",
		Source: "kubernetes/autoscaler cluster-autoscaler-1.34.0 cluster-autoscaler/main.go:405-408 (the Lease cluster-autoscaler in --namespace, default kube-system: config/flags/flags.go:71), 420-425 (leaderelection.RunOrDie), 452-454 (15s/10s/2s)"},
	// rancher-webhook v0.10+ (Rancher v2.14's 109.0.5+up0.10.9, v2.15's
	// 110.0.0+up0.11.0, build.yaml webhookVersion; v0.9.7 on v2.13 has
	// none) elects the replica that manages its webhook configurations.
	{Name: "rancher-webhook-leader", Namespace: "cattle-system", Component: "rancher-webhook",
		Defaults: controllerRuntimeDefaults, Rancher: "v2.14+", Since: 14,
		Change: "none: rancher-webhook sets 15s/10s/2s in its code",
		Source: "rancher/webhook v0.11.0 pkg/server/server.go:38 (namespace cattle-system), 102-118 (the Lease rancher-webhook-leader, 15s/10s/2s; v0.10.9 :105-118); charts/rancher-webhook/values.yaml:36 replicaCount: 1"},
}

// NoLock are components Rancher installs that run no leader election:
// their traffic is not lock traffic.
var NoLock = []struct{ Component, Rancher, Source string }{
	{"remotedialer-proxy (Deployment cattle-system/api-extension)", "v2.13+ (chart 110.0.0+up0.8.0 on v2.15.0)",
		"rancher/remotedialer-proxy v0.8.0: no leaderelection code, no Lease rights in its chart"},
}

// Lookup returns the catalogue's entry for the lock resource namespace/name
// as an audit log names it. Only Leases match: every catalogued component
// locks with a Lease (wrangler v2, controller-runtime, client-go with
// --leader-elect-resource-lock=leases). A ConfigMap of a Fleet lock's
// name is wrangler v1's ConfigMapsLeases multilock of Fleet v0.9.0, which
// reads no election env: not governed, so not matched.
func Lookup(resource, namespace, name string) (Lock, bool) {
	if resource != "leases" {
		return Lock{}, false
	}
	for _, l := range Catalogue {
		if l.Name != name && !(l.Prefix && strings.HasPrefix(name, l.Name+"-")) {
			continue
		}
		if !l.AnyNamespace && l.Namespace != namespace {
			continue
		}
		return l, true
	}
	return Lock{}, false
}

// LeftAlone returns the catalogued locks leasetune's settings do not
// govern that the given Rancher minor (2.x; 0 when unknown: every one)
// installs in its own cluster by default: rancher-turtles' and Cluster
// API's from v2.13, rancher-webhook's from v2.14.
func LeftAlone(rancherMinor int) []Lock {
	var out []Lock
	for _, l := range Catalogue {
		if l.Governed == "" && l.Since > 0 && (rancherMinor == 0 || rancherMinor >= l.Since) {
			out = append(out, l)
		}
	}
	return out
}

// RequestsPerHour is what the lock costs at its defaults with one
// replica: client-go v0.30+ (every catalogued component left alone builds
// with v0.32 or later), whose leader only updates.
func (l Lock) RequestsPerHour() float64 {
	return election.CostOf(l.Defaults, 0, election.LeaderOnlyUpdates).TotalRequestsPerHour()
}

// Summary is a lock left alone as plan and the ElectionStatus report it:
// what it costs at its defaults with one replica, and how an operator
// changes its triple.
type Summary struct {
	Namespace       string  `json:"namespace"`
	Name            string  `json:"name"`
	Component       string  `json:"component"`
	Defaults        string  `json:"defaults"`
	RequestsPerHour float64 `json:"requestsPerHour"`
	Change          string  `json:"change"`
}

// LeftAloneSummaries is LeftAlone as Summaries.
func LeftAloneSummaries(rancherMinor int) []Summary {
	var out []Summary
	for _, l := range LeftAlone(rancherMinor) {
		out = append(out, Summary{Namespace: l.Namespace, Name: l.Name, Component: l.Component,
			Defaults: l.Defaults.String(), RequestsPerHour: l.RequestsPerHour(), Change: l.Change})
	}
	return out
}
