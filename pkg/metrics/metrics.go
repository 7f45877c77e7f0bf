// Package metrics defines the project's Prometheus metrics, registered on
// Registry and served by the controller binary on /metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Registry holds every metric of the project plus the Go and process
// collectors.
var Registry = prometheus.NewRegistry()

var (
	// SettingsApplied counts triples that took effect, per component.
	SettingsApplied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasetune_settings_applied_total",
		Help: "Leader-election triples that validated and took effect, per component.",
	}, []string{"component"})
	// SettingsRefused counts refused setting changes, per component.
	SettingsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasetune_settings_refused_total",
		Help: "Setting changes refused because the resulting triple was invalid, per component.",
	}, []string{"component"})
	// AdmissionRefused counts the requests the admission webhook refused,
	// per kind: "setting" (a value of one of the nine settings) or
	// "override" (override annotations on a cluster object). SettingsRefused
	// counts only what the controller refuses later, on its way in.
	AdmissionRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasetune_admission_refused_total",
		Help: "Requests the admission webhook refused, per kind (setting, override).",
	}, []string{"kind"})
	// Writes counts the writes the controllers made, per target kind.
	Writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasetune_writes_total",
		Help: "Writes made to propagate timings, per target kind (deployment, rancher-deployment, rancher-config, cluster).",
	}, []string{"target"})
	// Restarts is the restart ledger: what leasetune's writes restarted, by
	// kind: "deployment-rollout" (a Fleet Deployment), "rancher-rollout"
	// (the Rancher Deployment), "fleet-agent",
	// "cattle-cluster-agent", "node-plan" (a Rancher-provisioned cluster
	// whose nodes are re-planned).
	Restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leasetune_restarts_total",
		Help: "Restarts leasetune's writes caused, by kind (deployment-rollout, rancher-rollout, fleet-agent, cattle-cluster-agent, node-plan).",
	}, []string{"kind"})
	// RancherLeftAlone is 1 for the reason the Rancher Deployment's
	// CATTLE_ELECTION_* entries are not written now (rancherenv.Problem:
	// "no-container", "version-unknown", "unsupported", "foreign",
	// "not-ready", "unsafe-strategy"), 0 for the others.
	RancherLeftAlone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_rancher_deployment_left_alone",
		Help: "1 for the reason the Rancher Deployment's CATTLE_ELECTION_* entries are not written now (no-container, version-unknown, unsupported, foreign, not-ready, unsafe-strategy).",
	}, []string{"reason"})
	// AgentChannel is 1 for the detected Fleet agent channel and 0 for the others.
	AgentChannel = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_fleet_agent_channel",
		Help: "The channel through which fleet-agents get their timings (1 for the detected one).",
	}, []string{"channel"})
	// AgentTimingsApplicable is 1 when the global agent triple reaches the
	// fleet-agents of the detected Fleet (v0.13+ through
	// fleet-agentmanagement, v0.9.1+ through each cluster's env), 0 where it
	// cannot (v0.12 and v0.9.0 hardcode theirs, v0.10-v0.11 run no election).
	AgentTimingsApplicable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "leasetune_agent_timings_applicable",
		Help: "1 when the global fleet-agent triple reaches the agents of the detected Fleet, 0 when that Fleet cannot take it.",
	})
	// ClustersLeftAlone is the number of downstream clusters the agentenv
	// controller leaves as they are, or whose overrides do not apply, per
	// reason: "invalid" (the overrides make an invalid triple), "foreign"
	// (someone else set CATTLE_ELECTION_*), "unsupported" (overrides no
	// agent of this Fleet can read without a duplicate env name) or
	// "reverted" (another writer keeps removing the project's entries).
	ClustersLeftAlone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_clusters_left_alone",
		Help: "Downstream clusters left as they were, or whose overrides do not apply, per reason (invalid, foreign, unsupported, reverted).",
	}, []string{"reason"})
	// QueueDepth is the number of keys waiting in a controller's work queue.
	QueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_workqueue_depth",
		Help: "Keys waiting in a controller's work queue.",
	}, []string{"controller"})
	// PropagationSeconds is how long the last propagation of a changed triple took.
	PropagationSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_last_propagation_duration_seconds",
		Help: "Seconds from a triple change to the last write it caused, per controller.",
	}, []string{"controller"})
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		SettingsApplied, SettingsRefused, AdmissionRefused, Writes, Restarts, AgentChannel, AgentTimingsApplicable, ClustersLeftAlone, RancherLeftAlone, PropagationSeconds, QueueDepth)
}

// RestartKinds are the kinds of the restart ledger, in the order they are
// reported.
var RestartKinds = []string{"deployment-rollout", "rancher-rollout", "fleet-agent", "cattle-cluster-agent", "node-plan"}

// RestartTotals reads the restart ledger (Restarts) of this process: the
// count per kind so far, for the TimingsApplied Event.
func RestartTotals() map[string]float64 {
	out := map[string]float64{}
	for _, k := range RestartKinds {
		var m dto.Metric
		if err := Restarts.WithLabelValues(k).Write(&m); err == nil && m.Counter != nil {
			out[k] = m.Counter.GetValue()
		}
	}
	return out
}
