// Package metrics defines the project's Prometheus metrics, registered on
// Registry and served by the controller binary on /metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"leasetune.io/leasetune/pkg/restart"
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
	// "cattle-cluster-agent", "node-plan" (a cluster whose nodes'
	// system-agent Plan runs again: a Rancher-provisioned one, or an
	// imported RKE2/K3s one with day-2 operations beside Rancher v2.15+).
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
	// PropagationPending is the number of objects the triple change being
	// propagated still owes a sync, per controller: "agentenv" (fleet
	// Clusters), "fleetsettings" (the Fleet Deployments and rancher-config);
	// 0 when no change is being propagated.
	PropagationPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_propagation_pending",
		Help: "Objects the triple change being propagated still owes a sync, per controller (agentenv: clusters; fleetsettings: Fleet Deployments and rancher-config); 0 when none is.",
	}, []string{"controller"})
	// PropagationDeadline is when, in Unix seconds, the change being
	// propagated should be done at the configured pace: its start plus
	// the objects it owed at its start divided by the pace
	// (--agent-rollout-per-minute, for agentenv; the start itself when
	// unpaced, as fleetsettings always is); 0 when no change is being
	// propagated. A change that replaces one still under way keeps that
	// one's start and owes the clusters of both.
	PropagationDeadline = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_propagation_deadline_timestamp_seconds",
		Help: "Unix time by which the triple change being propagated should be done at the configured pace (its start when unpaced), per controller; 0 when none is.",
	}, []string{"controller"})
	// Leader is 1 while this replica holds leasetune's Lease and runs the
	// settings provider and the controllers (always, under
	// --no-leader-election), 0 otherwise.
	Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "leasetune_leader",
		Help: "1 while this replica holds leasetune's Lease and runs the provider and the controllers, 0 otherwise.",
	})
	// SettingRefused is 1 while the settings of a component ask for a
	// triple that does not take effect, per component and reason
	// (RefusedInvalid, RefusedByAgents, RefusedNotApplicable), 0 once
	// they no longer do.
	SettingRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_setting_refused",
		Help: "1 while a component's settings ask for a triple that does not take effect, per component and reason (invalid, agents-refused, not-applicable); 0 otherwise.",
	}, []string{"component", "reason"})
	// ServerUp is 1 while a server of this replica answers, per server:
	// "webhook" (the admission webhook and /v3/settings: listening, with
	// its serving certificate in place) and "ui" (the Rancher UI
	// extension's bundle); 0 while the webhook waits for its certificate,
	// and once a server stopped (then /healthz fails too).
	ServerUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leasetune_server_up",
		Help: "1 while a server of this replica answers (webhook: listening with its certificate in place; ui: the UI extension's bundle), 0 otherwise.",
	}, []string{"server"})
)

// The reasons of SettingRefused.
const (
	// RefusedInvalid: the component's three settings make a triple that
	// does not validate (an env override, or values written while the
	// webhook was down); the last good triple stays in effect.
	RefusedInvalid = "invalid"
	// RefusedByAgents: fleet-agent only; the agent triple is not
	// propagated because some cluster's agent could not run it (the
	// webhook's judgement of what every agent runs, Fleet v0.13+).
	RefusedByAgents = "agents-refused"
	// RefusedNotApplicable: the triple validates but cannot reach its
	// processes and differs from what they run: fleet-agent, when the
	// detected Fleet's agents cannot take the global agent triple
	// (v0.12, v0.9.0, v0.10-v0.11); rancher, when the Rancher
	// Deployment is left alone for a reason other than a rollout in
	// progress (unsupported, version-unknown, no-container, foreign,
	// unsafe-strategy).
	RefusedNotApplicable = "not-applicable"
)

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		SettingsApplied, SettingsRefused, AdmissionRefused, Writes, Restarts, AgentChannel, AgentTimingsApplicable, ClustersLeftAlone, RancherLeftAlone, PropagationSeconds, QueueDepth,
		PropagationPending, PropagationDeadline, Leader, SettingRefused, ServerUp)
}

// RestartTotals reads the restart ledger (Restarts) of this process: the
// count per kind (restart.Kinds) so far, for the TimingsApplied Event.
func RestartTotals() map[restart.Kind]float64 {
	out := map[restart.Kind]float64{}
	for _, k := range restart.Kinds {
		var m dto.Metric
		if err := Restarts.WithLabelValues(string(k)).Write(&m); err == nil && m.Counter != nil {
			out[k] = m.Counter.GetValue()
		}
	}
	return out
}
