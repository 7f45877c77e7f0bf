// Package plan computes, from the current state of a cluster and without
// writing anything, every write the controllers would make (`leasetune
// plan`), and every entry the project has written that `leasetune cleanup`
// would remove. It reads the installation once (pkg/inventory), evaluates
// it with pkg/evaluation, whose decisions are the controllers' own
// functions, and renders the evaluation as writes (FromSnapshot).
package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/evaluation"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/locks"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
)

// Options names the namespaces, as the controller's flags do.
type Options struct {
	Namespace, FleetNamespace, RancherNamespace string
	ChannelOverride                             fleet.AgentChannel
	// RancherDeployment names the Rancher Deployment (default rancher);
	// RancherVersion, when known, replaces reading its image.
	RancherDeployment string
	RancherVersion    rancher.Version
	// LeaseName is the controller's Lease (its --lease-name; "" is
	// own.Lease): cleanup deletes it.
	LeaseName string
	// Set is a proposed change (`plan --set NAME=VALUE`), applied in
	// order over the current Setting values, each checked as the webhook
	// would check it (settings.CheckChange): the report is then what the
	// controllers would do after it.
	Set []Assignment
}

// Assignment is one NAME=VALUE of `plan --set`.
type Assignment struct{ Name, Value string }

// ParseAssignment reads NAME=VALUE; NAME must be one of the settings.
func ParseAssignment(s string) (Assignment, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return Assignment{}, fmt.Errorf("%q: want NAME=VALUE", s)
	}
	if _, known := settings.Lookup(name); !known {
		return Assignment{}, fmt.Errorf("%q: %w %q", s, settings.ErrUnknownSetting, name)
	}
	return Assignment{Name: name, Value: value}, nil
}

// Change is one field a write would change.
type Change struct {
	// Object names the object, e.g. "Deployment cattle-fleet-system/gitjob".
	Object string `json:"object"`
	// Field names the field, e.g. "container gitjob env CATTLE_ELECTION_RETRY_PERIOD".
	Field string `json:"field"`
	// Old and New are the values ("" for absent).
	Old string `json:"old"`
	New string `json:"new"`
	// Restarts says in words what the write redeploys; Kinds are the
	// restarts Totals counts (none: it restarts nothing now).
	Restarts string      `json:"restarts"`
	Kinds    restart.Set `json:"restartKinds,omitempty"`
}

// Report is the outcome of Compute.
type Report struct {
	Triples  map[settings.Component]settings.ComponentStatus
	Channel  fleet.AgentChannel
	Evidence string
	// Rancher is the Rancher version the routing followed.
	Rancher   rancher.Version
	Changes   []Change
	LeftAlone []string
	// Before are the triples as the settings are now, when Set proposes a
	// change; Order the writes that store the proposed values, in an order
	// the webhook accepts; Refused the components whose proposed values
	// the webhook would refuse in every order (left as they are).
	Before  map[settings.Component]settings.ComponentStatus `json:"-"`
	Order   []settings.Write
	Refused []string
	// clusters is the number of fleet Clusters (one fleet-agent lock each);
	// fleetLocks the Fleet controller processes (one lock each).
	clusters, fleetLocks int
	// agentRollout is true when a change re-renders every fleet-agent
	// (FLEET_AGENT_ELECTION_* on fleet-agentmanagement).
	agentRollout bool
	// agentLocksBefore/After are the fleet-agents' lock requests per hour.
	agentLocksBefore, agentLocksAfter float64
	// snap is the installation the report is computed from.
	snap *inventory.Snapshot
	// rancherLock is true when a Rancher Deployment was found;
	// rancherReplicas are its replicas (one lock candidate each) and
	// rancherLocksBefore/After the lock kube-system/cattle-controllers'
	// requests per hour now and after the writes.
	rancherLock                           bool
	rancherReplicas                       int
	rancherLocksBefore, rancherLocksAfter float64
	// clusterAgentsRetuned and clusterAgentsKept count the Rancher-managed
	// clusters whose cattle-cluster-agent (its own cattle-controllers lock)
	// reads CATTLE_ELECTION_* from the cluster's agentEnvVars after the
	// writes, and those whose agentEnvVars carry none.
	clusterAgentsRetuned, clusterAgentsKept int
}

// Inventory are the options of inventory.Read for a plan: every part,
// each one required.
func (o Options) Inventory() inventory.Options {
	return inventory.Options{Namespace: o.Namespace, FleetNamespace: o.FleetNamespace, RancherNamespace: o.RancherNamespace,
		RancherDeployment: o.RancherDeployment, RancherVersion: o.RancherVersion, ChannelOverride: o.ChannelOverride}
}

// Compute reads the cluster (inventory.Read, every part) and returns the
// writes the controllers would make (FromSnapshot). Errors: inventory.Read's.
func Compute(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Report, error) {
	snap, err := inventory.Read(ctx, cs, dyn, opts.Inventory())
	if err != nil {
		return nil, err
	}
	return FromSnapshot(snap, opts.Set), nil
}

// FromSnapshot returns the writes the controllers would make in the
// installation snap holds (read with every part, inventory.All; a part not
// read counts as absent), after the proposed assignments set. It makes no
// API call.
func FromSnapshot(snap *inventory.Snapshot, set []Assignment) *Report {
	r := &Report{snap: snap, Channel: snap.Channel, Evidence: snap.Evidence, Rancher: snap.RancherVersion}
	objs, stateData := snap.Settings, snap.StateData()
	if len(set) > 0 {
		r.Before, _ = settings.Snapshot(objs, stateData)
		objs = r.propose(objs, stateData, set)
	}
	var err error
	if r.Triples, err = settings.Snapshot(objs, stateData); err != nil {
		r.LeftAlone = append(r.LeftAlone, "state: "+err.Error())
	}
	ev := evaluation.Evaluate(snap, r.Triples)
	if ev.Fleet.JudgeProblem != nil {
		// The controller keeps the agents' triple too.
		r.LeftAlone = append(r.LeftAlone, "fleet-agentmanagement FLEET_AGENT_ELECTION_*: "+ev.Fleet.JudgeProblem.Error())
	}
	r.planFleet(ev.Fleet)
	r.planRancherConfig(ev.RancherConfig)
	r.planRancher(ev.Rancher)
	var before []evaluation.Cluster
	if b, ok := r.Before[settings.FleetAgent]; ok && b.HasEffective {
		for i := range snap.Clusters {
			before = append(before, evaluation.ClusterOf(&snap.Clusters[i], b, snap.Channel))
		}
	}
	r.planClusters(ev.Clusters, before)
	return r
}

// planFleet adds the Fleet Deployments' env changes.
func (r *Report) planFleet(f evaluation.Fleet) {
	r.fleetLocks = f.Locks
	r.agentRollout = f.AgentsRedeployed
	for _, w := range f.Writes {
		d := w.Deployment
		for _, e := range w.Env {
			restarts := "a rollout of " + d.Name
			if e.Restarts.Has(restart.FleetAgent) {
				restarts += ", then every fleet-agent (fleet-agentmanagement re-renders every agent)"
			}
			r.Changes = append(r.Changes, Change{
				Object: "Deployment " + d.Namespace + "/" + d.Name, Field: "container " + e.Container + " env " + e.Name,
				Old: e.Old, New: e.New, Restarts: restarts, Kinds: e.Restarts,
			})
		}
	}
}

// planRancherConfig adds rancher-config's Fleet chart values.
func (r *Report) planRancherConfig(rc *evaluation.RancherConfig) {
	if rc == nil {
		return
	}
	ref := rc.Ref
	switch {
	case rc.Err != nil:
		r.LeftAlone = append(r.LeftAlone, ref+": "+rc.Err.Error())
	case rc.Changed:
		r.Changes = append(r.Changes, Change{Object: ref,
			Field: "data.fleet (leaderElection.*, agent.leaderElection.*)", Old: "\n" + rc.Doc, New: "\n" + rc.Merged,
			Restarts: "nothing now; Rancher's next Fleet chart upgrade keeps these values"})
	}
	// What stays after the writes and Fleet v0.16's chart refuses.
	for _, p := range rc.ProblemsAfter {
		r.LeftAlone = append(r.LeftAlone, ref+": "+p)
	}
}

// planRancher adds the Rancher Deployment's CATTLE_ELECTION_* entries for
// the lock kube-system/cattle-controllers, and what that lock costs now
// and after.
func (r *Report) planRancher(ra *evaluation.Rancher) {
	if ra == nil {
		// No Rancher here: the rancher-leader-election-* settings reach
		// nothing. Said only when they are set to something else than
		// what Rancher runs anyway.
		if st := r.Triples[settings.Rancher]; st.HasEffective && st.Effective != election.WranglerDefaults {
			o := r.snap.Options
			r.LeftAlone = append(r.LeftAlone, fmt.Sprintf("Deployment %s/%s: not found, so the rancher-leader-election-* settings (%s) reach no Rancher here (--rancher-namespace, --rancher-deployment)",
				o.RancherNamespace, o.RancherDeployment, st.Effective))
		}
		return
	}
	r.rancherLock, r.rancherReplicas = true, ra.Replicas
	r.rancherLocksBefore, r.rancherLocksAfter = ra.LockBefore, ra.LockAfter
	d, dec := ra.Deployment, ra.Decision
	ref := "Deployment " + d.Namespace + "/" + d.Name
	switch {
	case dec.Problem == rancherenv.ProblemNotReady:
		r.LeftAlone = append(r.LeftAlone, fmt.Sprintf("%s: its CATTLE_ELECTION_* entries wait until it is settled: %s", ref, dec.Reason))
	case dec.Problem != rancherenv.ProblemNone:
		r.LeftAlone = append(r.LeftAlone, fmt.Sprintf("%s: %s", ref, dec.Reason))
	}
	restarts := fmt.Sprintf("a rollout of every Rancher replica (%d)", ra.Replicas)
	for _, e := range ra.Env {
		c := Change{Object: ref, Field: "container " + e.Container + " env " + e.Name, Old: e.Old, New: e.New, Restarts: restarts, Kinds: e.Restarts}
		if e.Removed {
			c.New = "(removed: Rancher's built-in 45s/30s/2s)"
		}
		r.Changes = append(r.Changes, c)
	}
}

// propose applies the assignments to copies of objs, as a user gets them
// stored: per component, the three values wanted (each setting's last
// assignment, the others as they are) written in an order in which the
// webhook accepts each write (settings.WriteOrder, the page's order). A
// component whose values no order takes is refused whole, and none of its
// settings change.
func (r *Report) propose(objs []v3.Setting, stateData map[string]string, set []Assignment) []v3.Setting {
	out := append([]v3.Setting{}, objs...)
	remembered := settings.RememberedValues(stateData)
	for _, c := range settings.Components {
		want := settings.CurrentValues(settings.View{Objects: out, Remembered: remembered}, c)
		proposed := false
		for i, d := range settings.Of(c) {
			for _, a := range set {
				if a.Name == d.Name {
					want[i], proposed = a.Value, true
				}
			}
		}
		if !proposed {
			continue
		}
		writes, err := settings.WriteOrder(settings.View{Objects: out, Remembered: remembered}, c, want)
		if err != nil {
			r.Refused = append(r.Refused, fmt.Sprintf("%s: %v", asked(c, set), err))
			continue
		}
		for _, w := range writes {
			out = settings.WithValue(out, w.Name, w.Value)
		}
		r.Order = append(r.Order, writes...)
	}
	return out
}

// asked is the assignments of set to c's settings, NAME=VALUE each.
func asked(c settings.Component, set []Assignment) string {
	var parts []string
	for _, d := range settings.Of(c) {
		for _, a := range set {
			if a.Name == d.Name {
				parts = append(parts, a.Name+"="+a.Value)
			}
		}
	}
	return strings.Join(parts, " ")
}

// planClusters adds each routed cluster's agent env, what its
// fleet-agent's lock costs (and cost before, under the triples before a
// proposed change), and which cattle-cluster-agents take the triple.
func (r *Report) planClusters(clusters, before []evaluation.Cluster) {
	r.clusters = len(r.snap.FleetClusters)
	for i, c := range clusters {
		if c.Err != nil {
			r.LeftAlone = append(r.LeftAlone, c.Err.Error())
			continue
		}
		rt := c.Routing
		for _, o := range rt.Ignored {
			r.LeftAlone = append(r.LeftAlone, fmt.Sprintf("the override annotations on %s %s/%s do not apply: they are read from %s",
				o.GetKind(), o.GetNamespace(), o.GetName(), rt.TargetRef))
		}
		if !c.Decided {
			continue
		}
		d := c.Decision
		r.agentLocksAfter += c.AgentLock()
		if before != nil {
			r.agentLocksBefore += before[i].AgentLock()
		}
		if d.Problem != "" {
			r.LeftAlone = append(r.LeftAlone, fmt.Sprintf("%s: %s: %v", rt.TargetRef, d.Problem, d.Err))
		}
		if d.Change {
			r.Changes = append(r.Changes, Change{Object: rt.TargetRef.String(), Field: "spec.agentEnvVars",
				Old: envString(rt.Target), New: envItems(d.Env), Restarts: c.Restarts.String(), Kinds: c.Restarts})
		}
		// cattle-cluster-agent gets the source object's agentEnvVars
		// appended to its own env (docs/design.md, "How the timings reach
		// each process"), so it runs whatever CATTLE_ELECTION_* entries
		// are there after the write.
		switch retuned, reads := c.ClusterAgentRetuned(); {
		case retuned:
			r.clusterAgentsRetuned++
		case reads:
			r.clusterAgentsKept++
		}
	}
}

func envString(u *unstructured.Unstructured) string {
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	var items []map[string]interface{}
	for _, it := range l {
		if m, ok := it.(map[string]interface{}); ok {
			items = append(items, m)
		}
	}
	return envItems(items)
}

func envItems(items []map[string]interface{}) string {
	var out []string
	for _, m := range items {
		v, ok := m["value"].(string)
		if !ok {
			v = "(valueFrom)"
		}
		out = append(out, fmt.Sprintf("%v=%s", m["name"], v))
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, " ")
}

// Print writes the report for a person.
func (r *Report) Print(w io.Writer) {
	for _, l := range r.Refused {
		fmt.Fprintf(w, "refused (as the webhook would, in every order of the writes; nothing of it is planned): %s\n", l)
	}
	if r.Before != nil {
		if len(r.Refused) > 0 {
			fmt.Fprintln(w)
		}
		var order []string
		for _, o := range r.Order {
			order = append(order, o.Name+"="+o.Value)
		}
		if len(order) == 0 {
			order = []string{"none"}
		}
		fmt.Fprintf(w, "After the proposed values, written in this order (each accepted by the webhook): %s\n", strings.Join(order, ", "))
	}
	for _, c := range settings.Components {
		st := r.Triples[c]
		switch {
		case st.Refused != nil && st.HasEffective:
			fmt.Fprintf(w, "%s: %s in effect (the current settings are refused: %v)\n", c, st.Effective, st.Refused)
		case st.Refused != nil:
			fmt.Fprintf(w, "%s: no valid triple: %v; nothing is propagated for it\n", c, st.Refused)
		case st.Pending != nil && r.Before == nil:
			fmt.Fprintf(w, "%s: %s, pending: it takes effect once the three settings have been unchanged for the settle time (the writes below are what it makes then)\n", c, st.Effective)
		default:
			fmt.Fprintf(w, "%s: %s\n", c, st.Effective)
		}
	}
	if r.Channel != "" {
		fmt.Fprintf(w, "fleet agent channel: %s (%s)\n  %s\n", r.Channel, r.Evidence, r.Channel.Explain())
	} else {
		fmt.Fprintln(w, "fleet agent channel: unknown (no fleet-controller Deployment): nothing is written to clusters")
	}
	fmt.Fprintln(w)
	if len(r.Changes) == 0 {
		if len(r.LeftAlone) == 0 {
			fmt.Fprintln(w, "No writes: everything is converged.")
		} else {
			fmt.Fprintln(w, "No writes now: what is not converged is left alone or waits, below.")
		}
	}
	sort.SliceStable(r.Changes, func(i, j int) bool { return r.Changes[i].Object < r.Changes[j].Object })
	restart := map[string]bool{}
	for _, c := range r.Changes {
		old := c.Old
		if old == "" {
			old = "(absent)"
		}
		fmt.Fprintf(w, "%s\n  %s: %s → %s\n  restarts: %s\n", c.Object, c.Field, old, c.New, c.Restarts)
		restart[c.Object] = true
	}
	if len(r.Changes) > 0 {
		fmt.Fprintf(w, "\n%s on %s.\n", plural(len(r.Changes), "change"), plural(len(restart), "object"))
	}
	for _, l := range r.LeftAlone {
		fmt.Fprintf(w, "left alone: %s\n", l)
	}
	t := r.Totals()
	fmt.Fprintf(w, "\nRestarts: %d Deployment rollout(s), %d fleet-agent redeploy(s), %d cattle-cluster-agent redeploy(s), %d cluster(s) whose nodes are re-planned.\n",
		t.Rollouts, t.FleetAgents, t.ClusterAgents, t.NodePlans)
	fmt.Fprintf(w, "Lock requests per hour (client-go v0.30+ leaders, one replica per Fleet process): Fleet controllers %.0f, fleet-agents %.0f",
		t.ControllerLocksAfter, t.AgentLocksAfter)
	if r.Before != nil {
		fmt.Fprintf(w, " (now %.0f and %.0f)", t.ControllerLocksBefore, t.AgentLocksBefore)
	}
	fmt.Fprintln(w, ".")
	if r.rancherLock {
		fmt.Fprintf(w, "Rancher's lock kube-system/cattle-controllers (%d replica(s)): %.0f requests per hour", r.rancherReplicas, t.RancherLockAfter)
		if t.RancherLockBefore != t.RancherLockAfter {
			fmt.Fprintf(w, " (now %.0f); the change rolls every Rancher replica", t.RancherLockBefore)
		}
		fmt.Fprintln(w, ".")
	}
	for _, l := range t.LocksLeftAlone {
		fmt.Fprintf(w, "Left alone: %s's lock %s/%s runs its own %s, about %.0f requests per hour (one replica, a client-go v0.30+ leader); leasetune's settings do not reach it (%s).\n",
			l.Component, l.Namespace, l.Name, l.Defaults, l.RequestsPerHour, l.Change)
	}
	if n := r.clusterAgentsRetuned + r.clusterAgentsKept; n > 0 {
		fmt.Fprintf(w, "cattle-cluster-agent (its own cattle-controllers lock in each Rancher-managed cluster): %d of %d read CATTLE_ELECTION_* from their cluster's agentEnvVars and run that triple", r.clusterAgentsRetuned, n)
		if r.clusterAgentsKept > 0 {
			fmt.Fprintf(w, "; %d keep wrangler's 45s/30s/2s, since their agentEnvVars carry no CATTLE_ELECTION_* (Fleet v0.13+ renders the fleet-agent's names itself, so leasetune writes none there unless the cluster's overrides call for them)", r.clusterAgentsKept)
		}
		fmt.Fprintln(w, ".")
	}
}

// Totals counts what a report restarts and what the locks cost.
type Totals struct {
	Rollouts      int `json:"deploymentRollouts"`
	FleetAgents   int `json:"fleetAgentRedeploys"`
	ClusterAgents int `json:"clusterAgentRedeploys"`
	NodePlans     int `json:"nodePlanClusters"`
	// Lock requests per hour of the Fleet controller processes and of
	// all fleet-agents, after the change (and before it, with Set).
	ControllerLocksBefore float64 `json:"controllerLockRequestsPerHourBefore,omitempty"`
	ControllerLocksAfter  float64 `json:"controllerLockRequestsPerHour"`
	AgentLocksBefore      float64 `json:"agentLockRequestsPerHourBefore,omitempty"`
	AgentLocksAfter       float64 `json:"agentLockRequestsPerHour"`
	// RancherRollout is true when the Rancher Deployment is written (every
	// Rancher replica rolls; it is also one of Rollouts); RancherLock* are
	// the requests per hour of kube-system/cattle-controllers now and
	// after.
	RancherRollout    bool    `json:"rancherRollout"`
	RancherLockBefore float64 `json:"rancherLockRequestsPerHourBefore"`
	RancherLockAfter  float64 `json:"rancherLockRequestsPerHour"`
	// ClusterAgentsRetuned and ClusterAgentsKept count the Rancher-managed
	// clusters whose cattle-cluster-agent runs the CATTLE_ELECTION_* of its
	// cluster's agentEnvVars after the writes, and those that keep
	// wrangler's built-in triple.
	ClusterAgentsRetuned int `json:"clusterAgentLocksRetuned"`
	ClusterAgentsKept    int `json:"clusterAgentLocksKept"`
	// LocksLeftAlone are the locks the Rancher found here installs in this
	// cluster that leasetune's settings do not reach (pkg/locks:
	// rancher-turtles' and Cluster API's on v2.13+), at their defaults.
	LocksLeftAlone []locks.Summary `json:"locksLeftAlone,omitempty"`
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rancherMinor is v's minor for pkg/locks (0: unknown).
func rancherMinor(v rancher.Version) int {
	if !v.Known {
		return 0
	}
	return v.Minor
}

// Totals returns the report's restart counts (from each change's
// restarts) and the lock cost (pkg/election's model, 1 leader per lock).
func (r *Report) Totals() Totals {
	var t Totals
	seen := map[string]bool{}
	for _, c := range r.Changes {
		if seen[c.Object] {
			continue
		}
		seen[c.Object] = true
		switch k := c.Kinds; {
		case k.Has(restart.DeploymentRollout) || k.Has(restart.RancherRollout):
			// A Deployment rolls; the agents fleet-agentmanagement then
			// redeploys are counted below (agentRollout).
			t.Rollouts++
			t.RancherRollout = t.RancherRollout || k.Has(restart.RancherRollout)
		case k.Has(restart.FleetAgent):
			t.FleetAgents++
			if k.Has(restart.ClusterAgent) {
				t.ClusterAgents++
			}
			if k.Has(restart.NodePlan) {
				t.NodePlans++
			}
		}
	}
	if r.agentRollout {
		t.FleetAgents = r.clusters // every agent, whatever its cluster's own entries
	}
	cost := func(st settings.ComponentStatus) float64 {
		if !st.HasEffective {
			return 0
		}
		return float64(r.fleetLocks) * election.CostOf(st.Effective, 0, election.Supported).TotalRequestsPerHour()
	}
	t.ControllerLocksAfter, t.AgentLocksAfter = cost(r.Triples[settings.FleetController]), r.agentLocksAfter
	if r.Before != nil {
		t.ControllerLocksBefore, t.AgentLocksBefore = cost(r.Before[settings.FleetController]), r.agentLocksBefore
	}
	t.RancherLockBefore, t.RancherLockAfter = r.rancherLocksBefore, r.rancherLocksAfter
	t.ClusterAgentsRetuned, t.ClusterAgentsKept = r.clusterAgentsRetuned, r.clusterAgentsKept
	if r.rancherLock {
		t.LocksLeftAlone = locks.LeftAloneSummaries(rancherMinor(r.Rancher))
	}
	return t
}

// JSON is the report as `plan --output json` prints it.
func (r *Report) JSON() ([]byte, error) {
	type triple struct {
		Component string `json:"component"`
		InEffect  string `json:"inEffect,omitempty"`
		Refused   string `json:"refused,omitempty"`
	}
	out := struct {
		Triples   []triple         `json:"triples"`
		Channel   string           `json:"channel"`
		Order     []settings.Write `json:"order,omitempty"`
		Changes   []Change         `json:"changes"`
		LeftAlone []string         `json:"leftAlone"`
		Refused   []string         `json:"refused"`
		Totals    Totals           `json:"totals"`
	}{Channel: string(r.Channel), Order: r.Order, Changes: r.Changes, LeftAlone: r.LeftAlone, Refused: r.Refused, Totals: r.Totals()}
	for _, c := range settings.Components {
		st := r.Triples[c]
		tr := triple{Component: string(c)}
		if st.HasEffective {
			tr.InEffect = st.Effective.String()
		}
		if st.Refused != nil {
			tr.Refused = st.Refused.Error()
		}
		out.Triples = append(out.Triples, tr)
	}
	if out.Changes == nil {
		out.Changes = []Change{}
	}
	// Not escaped for HTML: a refused value reads as it was given.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
