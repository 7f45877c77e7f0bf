package electionstatus

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"leasetune.io/leasetune/pkg/locks"
)

const (
	// APIGroup, Version, Kind and Resource name the API.
	APIGroup = "leasetune.io"
	Version  = "v1alpha1"
	Kind     = "ElectionStatus"
	Resource = "electionstatuses"
	// Name is the one object's name.
	Name = "leasetune"
)

// GVR is the ElectionStatus resource.
var GVR = schema.GroupVersionResource{Group: APIGroup, Version: Version, Resource: Resource}

// Status is the status of the ElectionStatus object.
type Status struct {
	// Components are the three triples: fleet-controller, fleet-agent,
	// rancher (settings.Components' order).
	Components []Component `json:"components"`
	// Fleet is the Fleet installation: its agent channel and processes.
	Fleet Fleet `json:"fleet"`
	// RancherConfig is what rancher-config's fleet values hold.
	RancherConfig RancherConfig `json:"rancherConfig"`
	// Rancher is the Rancher Deployment (its lock
	// kube-system/cattle-controllers).
	Rancher Rancher `json:"rancher"`
	// Agents are the downstream clusters in groups that any global agent
	// triple treats alike: what the cost model and the plan need.
	Agents Agents `json:"agents"`
	// Clusters are the clusters whose agents run something other than the
	// global agent triple, or that are left alone, with the reason (at
	// most MaxClusters; ClustersNotListed counts the rest).
	Clusters          []Cluster `json:"clusters"`
	ClustersNotListed int       `json:"clustersNotListed,omitempty"`
}

// MaxClusters bounds Status.Clusters, so that the object stays small at
// 10,000 clusters.
const MaxClusters = 100

// MaxGroups bounds Agents.Groups and Agents.UnroutableEntries. A group of
// clusters whose override annotations, entries and leasetune's record all
// differ takes about 170 bytes of JSON, so 1,000 of them stay near 170 KiB,
// well within the 1.5 MiB etcd accepts in one request by default
// (go.etcd.io/etcd/server/v3 v3.5.16 embed/config.go,
// DefaultMaxRequestBytes), above which the kube-apiserver refuses the write
// ("etcdserver: request is too large").
const MaxGroups = 1000

// Triple is a timing triple (durations in Go's syntax).
type Triple struct {
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

// Component is one triple: its settings, what is in effect, pending or
// refused, and the objects its change writes.
type Component struct {
	// Component is fleet-controller, fleet-agent or rancher.
	Component string `json:"component"`
	// Restarts says what a change of this triple restarts.
	Restarts string `json:"restarts"`
	// Settings are its three settings, in the order leaseDuration,
	// renewDeadline, retryPeriod.
	Settings []Setting `json:"settings"`
	// InEffect is the triple leasetune propagates (nil: none yet).
	InEffect *Triple `json:"inEffect,omitempty"`
	// Pending is a valid triple that waits for the settle time, until
	// SettlesAt (RFC 3339); nil when none waits.
	Pending   *Triple `json:"pending,omitempty"`
	SettlesAt string  `json:"settlesAt,omitempty"`
	// Refused says why the settings as they are do not take effect ("":
	// they do).
	Refused string `json:"refused,omitempty"`
	// Targets are the env entries of containers that this triple sets
	// (fleet-controller, fleet-agent: the Fleet Deployments; rancher: the
	// Rancher Deployment where leasetune writes it), with their values now.
	Targets []Target `json:"targets,omitempty"`
}

// Setting is one setting as a person sees it.
type Setting struct {
	Name string `json:"name"`
	// Field is leaseDuration, renewDeadline or retryPeriod.
	Field   string `json:"field"`
	Default string `json:"default"`
	// Value is the value that counts, and Source where it comes from:
	// default, user (the Setting's value), remembered (leasetune's record
	// of a user's value while the Setting object is missing), env.
	Value  string `json:"value"`
	Source string `json:"source"`
	// EnvVar is the env var on leasetune's pod that would set it; ReadOnly
	// is true when it does (ReadOnlyReason says where to change it).
	EnvVar         string `json:"envVar"`
	ReadOnly       bool   `json:"readOnly,omitempty"`
	ReadOnlyReason string `json:"readOnlyReason,omitempty"`
}

// Target is one container's env entries that a triple sets: a change
// writes those whose value differs and rolls the Deployment.
type Target struct {
	// Object is "Deployment <namespace>/<name>"; Container the container.
	Object    string `json:"object"`
	Container string `json:"container"`
	// Prefix is the env names' prefix: CATTLE_ELECTION_ or
	// FLEET_AGENT_ELECTION_ (fleet-agentmanagement renders every agent
	// from these: a change of them redeploys every fleet-agent).
	Prefix string `json:"prefix"`
	// Env are the entries of the three names there now (absent ones left
	// out; "(valueFrom)" for one that takes its value from a source).
	Env []EnvVar `json:"env,omitempty"`
}

// EnvVar is an env entry's name and literal value.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Fleet is the Fleet installation.
type Fleet struct {
	// Channel is how the agent triple reaches the agents ("" unknown),
	// ChannelExplain what that means and Evidence what decided it.
	Channel        string `json:"channel,omitempty"`
	ChannelExplain string `json:"channelExplain,omitempty"`
	Evidence       string `json:"evidence,omitempty"`
	// Processes are the Fleet controller processes that each hold a lock
	// (one replica each: fleet-controller, its cleanup and agentmanagement
	// containers, gitjob, helmops).
	Processes int `json:"processes"`
	// JudgeProblem says why the current agent triple is not written to
	// fleet-agentmanagement: it would leave some agent with a triple
	// client-go refuses ("": none).
	JudgeProblem string `json:"judgeProblem,omitempty"`
}

// RancherConfig is the fleet values of cattle-system/rancher-config,
// which Rancher merges into the Fleet chart it installs.
type RancherConfig struct {
	// Present is true when the ConfigMap exists; Object names it as a
	// plan names it ("ConfigMap <namespace>/rancher-config").
	Present bool   `json:"present"`
	Object  string `json:"object,omitempty"`
	// Controller and Agent are its leaderElection.* and
	// agent.leaderElection.* (nil: absent).
	Controller *Triple `json:"controller,omitempty"`
	Agent      *Triple `json:"agent,omitempty"`
	// Problem says why leasetune leaves it as it is ("": none).
	Problem string `json:"problem,omitempty"`
	// SchemaProblems are its values Fleet v0.16's chart refuses
	// (fleetenv.ChartValueProblems): Rancher's install or upgrade of
	// that Fleet fails on them.
	SchemaProblems []string `json:"schemaProblems,omitempty"`
}

// Rancher is the Rancher Deployment.
type Rancher struct {
	// Present is true when the Deployment exists; Version is the Rancher
	// version its image shows ("" unknown); Replicas its replicas (one
	// lock candidate each).
	Present  bool   `json:"present"`
	Version  string `json:"version,omitempty"`
	Replicas int    `json:"replicas"`
	// Runs is the triple Rancher's lock runs with now (wrangler's
	// 45s/30s/2s without entries; the entries of the rancher container).
	Runs *Triple `json:"runs,omitempty"`
	// Managed is true when leasetune writes its env
	// (rancherElection.enabled); Problem says why it leaves it as it is
	// ("": none).
	Managed bool   `json:"managed"`
	Problem string `json:"problem,omitempty"`
	// WriteProblem says what would stop a write of its env whatever the
	// triple, were one due: "unsafe-strategy: " or "not-ready: " and why
	// (rancherenv.WriteProblem; "": nothing). Problem says it too when the
	// triple in effect calls for a write; a plan for another triple needs
	// it on its own.
	WriteProblem string `json:"writeProblem,omitempty"`
	// ClusterAgentsRead is true when this Rancher's cattle-cluster-agents
	// read CATTLE_ELECTION_* from their cluster's agentEnvVars (2.8.3+).
	ClusterAgentsRead bool `json:"clusterAgentsRead,omitempty"`
	// LocksLeftAlone are the locks this Rancher installs beside its own
	// that leasetune's settings do not reach (pkg/locks: rancher-turtles'
	// and Cluster API's on v2.13+, or on an unknown version), at their
	// defaults; plan and the page report them.
	LocksLeftAlone []locks.Summary `json:"locksLeftAlone,omitempty"`
}

// Agents are the downstream clusters.
type Agents struct {
	// Clusters counts the fleet Clusters (one fleet-agent lock each);
	// Unroutable those whose source object is not there yet.
	Clusters   int `json:"clusters"`
	Unroutable int `json:"unroutable,omitempty"`
	// UnroutableEntries are the fleet Clusters' own CATTLE_ELECTION_*
	// entries of the unroutable clusters that have any, alike ones counted
	// together: the judgement of a global agent triple
	// (agentenv.JudgeGlobal) reads every fleet Cluster's entries, routable
	// or not.
	UnroutableEntries []Entries `json:"unroutableEntries,omitempty"`
	// Groups partition the routable clusters: every cluster of a group
	// gets the same decision for any global agent triple. At most
	// MaxGroups, the largest first kept (then by their content);
	// GroupsNotListed counts the groups left out and ClustersNotGrouped
	// their clusters, so that the object stays within etcd's request limit
	// when thousands of clusters each read differently (each with its own
	// overrides, say). UnroutableEntries is bounded the same way
	// (UnroutableEntriesNotListed).
	Groups                     []Group `json:"groups"`
	GroupsNotListed            int     `json:"groupsNotListed,omitempty"`
	ClustersNotGrouped         int     `json:"clustersNotGrouped,omitempty"`
	UnroutableEntriesNotListed int     `json:"unroutableEntriesNotListed,omitempty"`
}

// Group is Count clusters that read alike: the same kind of source, the
// same override annotations, the same CATTLE_ELECTION_* entries (and
// whether leasetune's record owns them) on their source object and on
// their fleet Cluster.
type Group struct {
	Count int `json:"count"`
	// RancherManaged: Rancher generates the fleet Cluster (the env also
	// reaches cattle-cluster-agent); Provisioned: an RKE2/K3s cluster
	// Rancher provisions (Replans below says whether a change re-plans
	// its nodes);
	// ClusterAgentReads: cattle-cluster-agent reads the entries.
	RancherManaged    bool `json:"rancherManaged,omitempty"`
	Provisioned       bool `json:"provisioned,omitempty"`
	ClusterAgentReads bool `json:"clusterAgentReads,omitempty"`
	// Replans: a write of the source's spec.agentEnvVars re-runs
	// system-agent's upgrade Plan on every node (agentenv.Routing.Replans:
	// provisioned clusters, and imported RKE2/K3s clusters with day-2
	// operations beside Rancher v2.15+).
	Replans bool `json:"replans,omitempty"`
	// Overrides are the override annotations set on the source object
	// (by field name; absent ones left out).
	Overrides map[string]string `json:"overrides,omitempty"`
	// Entries are the source object's CATTLE_ELECTION_* entries in order
	// ("(valueFrom)" for one from a source), and Record leasetune's record
	// of what it wrote there (nil: none).
	Entries []EnvVar          `json:"entries,omitempty"`
	Record  map[string]string `json:"record,omitempty"`
	// FleetEntries are the fleet Cluster's own CATTLE_ELECTION_* entries,
	// where the fleet Cluster is not the source (Rancher's copy).
	FleetEntries []EnvVar `json:"fleetEntries,omitempty"`
	// Malformed: the source's spec.agentEnvVars is not a list of objects
	// (the cluster is left alone).
	Malformed bool `json:"malformed,omitempty"`
}

// Entries are Count fleet Clusters' CATTLE_ELECTION_* entries, in order
// ("(valueFrom)" for one from a source).
type Entries struct {
	Count   int      `json:"count"`
	Entries []EnvVar `json:"entries"`
}

// Cluster is one cluster whose agents do not run the global agent triple,
// or that is left alone.
type Cluster struct {
	// Name is the fleet Cluster's namespace/name; Source the object its
	// agent env is read from and written to.
	Name   string `json:"name"`
	Source string `json:"source"`
	// Overrides are its override annotations (by field name).
	Overrides map[string]string `json:"overrides,omitempty"`
	// Effective is its triple (the global one with the overrides); Runs
	// what its fleet-agent runs (nil: no leader election).
	Effective *Triple `json:"effective,omitempty"`
	Runs      *Triple `json:"runs,omitempty"`
	// Problem is invalid, foreign, unsupported, reverted or unroutable
	// ("": none), Reason why.
	Problem string `json:"problem,omitempty"`
	Reason  string `json:"reason,omitempty"`
}
