package fleetsettings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appscontrollers "github.com/rancher/wrangler/v2/pkg/generated/controllers/apps/v1"
	corecontrollers "github.com/rancher/wrangler/v2/pkg/generated/controllers/core/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/workloop"
)

// Options configures Register.
type Options struct {
	// Namespace is the Fleet system namespace (cattle-fleet-system).
	Namespace string
	// RancherNamespace holds the ConfigMap rancher-config (cattle-system).
	RancherNamespace string
	// Channels gives the Fleet agent channel (pkg/controllers/fleetchannel).
	Channels fleet.ChannelSource
	// Detect, when set, runs first in each sync of a Deployment, whatever
	// it returns (the channel's detection, fleetchannel.Controller.Sync):
	// it sees the Deployment before leasetune's write changes its managed
	// fields.
	Detect func(context.Context, *appsv1.Deployment) error

	// Deployments is a wrangler controller whose informer watches
	// Namespace; ConfigMaps one whose informer watches RancherNamespace.
	// Their caches are read and their informers feed the work queue
	// (pkg/workloop); their clients are not used.
	Deployments appscontrollers.DeploymentController
	ConfigMaps  corecontrollers.ConfigMapController
	// Client makes the writes, with own.FieldManager.
	Client kubernetes.Interface
	// Triples gives the effective triples.
	Triples settings.Triples
	// CheckAgentTriple, when set, judges a change of the agent triple from
	// cur (on fleet-agentmanagement now) to next by its effect on every
	// agent (index.Index.Judge, pkg/agentenv/index): an error keeps the
	// agent triple where it is. Only consulted on Fleet v0.13+, where the
	// global triple combines with the clusters' own entries.
	CheckAgentTriple func(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) error
	// Agents, when set, counts the fleet-agents (one per fleet Cluster):
	// a write of FLEET_AGENT_ELECTION_* redeploys every one of them
	// (fleet-agentmanagement re-renders every agent bundle when it restarts
	// with new values, docs/design.md, "How the timings reach each process"), which the restart ledger
	// (metrics.Restarts "fleet-agent") counts.
	Agents func() int
	// Workers is the number of concurrent syncs (default 2).
	Workers int
	// Recorder records Events; may be nil.
	Recorder record.EventRecorder
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// controllerName is the controller label of this controller's metrics.
const controllerName = "fleetsettings"

// Key is a work item: a Deployment in the Fleet namespace, or
// rancher-config.
type Key struct {
	ConfigMap       bool
	Namespace, Name string
}

func (k Key) String() string {
	if k.ConfigMap {
		return "configmap " + k.Namespace + "/" + k.Name
	}
	return "deployment " + k.Namespace + "/" + k.Name
}

// Controller converges the Fleet Deployments' env and the Fleet chart
// values in rancher-config on the effective triples.
type Controller struct {
	opts  Options
	log   *slog.Logger
	loop  *workloop.Loop[Key]
	queue workloop.Queue[Key] // the loop; a recording one in unit tests
	// lastWrite: a sync waits for the cache to show its last write
	// (workloop.Written).
	lastWrite workloop.Written[Key]

	mu       sync.Mutex
	changeAt time.Time // when the triples last changed, for the propagation metric
	// owed are the objects a triple change enqueued and not yet synced:
	// the change's propagation ends with the last of them, so a later
	// drift repair is not counted as part of it.
	owed map[Key]bool
	// notApplicable is the channel and agent triple last reported as not
	// reaching the agents, so that each pair is said once.
	notApplicable string
	// refusedSaid is the last refusal of an agent triple change reported,
	// so that each is said once.
	refusedSaid string
	// configMapsSynced tells whether the rancher-config cache has synced
	// (nil: it has). The loop waits for the Deployments' cache only, so
	// that the Fleet Deployments are written even while rancher-config's
	// cannot be read.
	configMapsSynced func() bool
}

// deploymentKeys is the work item of a Deployment in the Fleet namespace.
func (c *Controller) deploymentKeys(obj interface{}) []Key {
	if d, ok := obj.(*appsv1.Deployment); ok && d.Namespace == c.opts.Namespace {
		return []Key{{Namespace: d.Namespace, Name: d.Name}}
	}
	return nil
}

// configMapKeys is the work item of rancher-config; none for another
// ConfigMap.
func (c *Controller) configMapKeys(obj interface{}) []Key {
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Namespace == c.opts.RancherNamespace && cm.Name == fleetenv.RancherConfigName {
		return []Key{c.rancherConfigKey()}
	}
	return nil
}

// Register registers the handlers and runs the work queue until ctx ends;
// start the factories of opts.Deployments and opts.ConfigMaps afterwards
// (the workers wait for their caches).
func Register(ctx context.Context, opts Options) *Controller {
	c := New(opts)
	c.mu.Lock()
	c.publishPropagation() // the series exist from the start, at 0
	c.mu.Unlock()
	setRefused(metrics.RefusedByAgents, false)
	deps, cms := opts.Deployments.Informer(), opts.ConfigMaps.Informer()
	_, _ = deps.AddEventHandler(c.loop.Handler(c.deploymentKeys))
	_, _ = cms.AddEventHandler(c.loop.Handler(c.configMapKeys))
	c.configMapsSynced = cms.HasSynced
	opts.Triples.OnChange(func() {
		c.beginPropagation(time.Now(), c.targets())
		c.reportAgentTimings()
		c.EnqueueAll()
	})
	opts.Channels.OnChannelChange(c.reportAgentTimings)
	c.reportAgentTimings()
	c.loop.Start(ctx, deps.HasSynced)
	return c
}

// New returns the controller without registering handlers (for tests).
func New(opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	c := &Controller{opts: opts, log: opts.Log.With("controller", controllerName)}
	c.loop = workloop.New(workloop.Options{Name: controllerName, Workers: opts.Workers, Log: opts.Log}, c.sync)
	c.queue = c.loop
	return c
}

func (c *Controller) rancherConfigKey() Key {
	return Key{ConfigMap: true, Namespace: c.opts.RancherNamespace, Name: fleetenv.RancherConfigName}
}

// targets are the keys of the Fleet Deployments leasetune writes
// (fleet.IsTarget), from the cache.
func (c *Controller) targets() []Key {
	var keys []Key
	ds, err := c.opts.Deployments.Cache().List(c.opts.Namespace, labels.Everything())
	if err != nil {
		c.log.Error("list deployments from cache", "error", err)
	}
	for _, d := range ds {
		if fleet.IsTarget(d) {
			keys = append(keys, Key{Namespace: d.Namespace, Name: d.Name})
		}
	}
	return keys
}

// sync syncs one work item from the cache: a Deployment (Detect first,
// then syncDeployment) or rancher-config (syncRancherConfig). A deleted
// object is nothing to do. Once its write is done (whatever Detect said)
// the item is no longer owed to the propagation. An object the cache
// still holds as it was before this controller's last write of it waits
// for the informer to bring that write (workloop.Written).
func (c *Controller) sync(ctx context.Context, k Key) error {
	var err, detectErr error
	if k.ConfigMap {
		if c.configMapsSynced != nil && !c.configMapsSynced() {
			return fmt.Errorf("the cache of %s has not synced yet", k)
		}
		cm, gerr := c.opts.ConfigMaps.Cache().Get(k.Namespace, k.Name)
		if gerr != nil && !apierrors.IsNotFound(gerr) {
			return gerr
		}
		if cm != nil && c.lastWrite.Stale(k, cm.ResourceVersion) {
			return nil
		}
		err = c.syncRancherConfig(ctx, cm)
	} else {
		d, gerr := c.opts.Deployments.Cache().Get(k.Namespace, k.Name)
		if gerr != nil && !apierrors.IsNotFound(gerr) {
			return gerr
		}
		if d != nil && c.lastWrite.Stale(k, d.ResourceVersion) {
			return nil
		}
		if c.opts.Detect != nil && d != nil {
			detectErr = c.opts.Detect(ctx, d)
		}
		err = c.syncDeployment(ctx, d)
	}
	if err == nil {
		c.synced(k)
	}
	return errors.Join(detectErr, err)
}

// reportAgentTimings says, once per channel and agent triple, with a
// Warning Event on each of the three agent Settings and a log line, when
// the detected Fleet cannot take the global agent triple (fleet.AgentChannel
// GlobalReachesAgents): v0.12 and v0.9.0 hardcode their agents' timings and
// v0.10-v0.11 agents run no election. Nothing is written for them.
//
// It also sets metrics.SettingRefused{fleet-agent, not-applicable}: 1 while
// the agent triple in effect asks for what the agents of the detected
// Fleet do not run and cannot be given (AgentTripleIgnored).
func (c *Controller) reportAgentTimings() {
	ch, known := c.opts.Channels.Channel()
	agent, ok := c.opts.Triples.Effective(settings.FleetAgent)
	setRefused(metrics.RefusedNotApplicable, known && ok && AgentTripleIgnored(ch, agent))
	if !known || !ok || ch.GlobalReachesAgents() {
		return
	}
	key := string(ch) + " " + agent.String()
	c.mu.Lock()
	seen := c.notApplicable == key
	c.notApplicable = key
	c.mu.Unlock()
	if seen {
		return
	}
	msg := fmt.Sprintf("the agent triple %s does not reach the fleet-agents of this Fleet: %s; nothing is written for them", agent, ch.Explain())
	c.log.Warn("agent timings not applicable", "channel", ch, "timings", agent.String(), "reason", ch.Explain())
	if c.opts.Recorder == nil {
		return
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		ref := &corev1.ObjectReference{APIVersion: "management.cattle.io/v3", Kind: "Setting", Name: d.Name}
		c.opts.Recorder.Event(ref, corev1.EventTypeWarning, "AgentTimingsNotApplicable", msg)
	}
}

// AgentTripleIgnored reports whether the global agent triple t asks for
// something the fleet-agents of channel ch neither run nor can be given:
// ch cannot take the global triple (fleet.AgentChannel
// GlobalReachesAgents), and t differs from what those agents run (their
// Baseline: Fleet v0.12's hardcoded 30s/25s/10s, v0.9.0's 45s/30s/2s) or,
// where agents run no election (v0.10-v0.11), from the agent settings'
// default (election.FleetDefaults: any other value was set for nothing).
func AgentTripleIgnored(ch fleet.AgentChannel, t election.Timings) bool {
	if ch.GlobalReachesAgents() {
		return false
	}
	if runs, elects := ch.Baseline(t); elects {
		return runs != t
	}
	return t != election.FleetDefaults
}

// setRefused sets metrics.SettingRefused of the fleet-agent component for
// reason: 1 when refused, else 0.
func setRefused(reason string, refused bool) {
	v := 0.0
	if refused {
		v = 1
	}
	metrics.SettingRefused.WithLabelValues(string(settings.FleetAgent), reason).Set(v)
}

// EnqueueAll enqueues every Deployment in the Fleet namespace and
// rancher-config.
func (c *Controller) EnqueueAll() {
	ds, err := c.opts.Deployments.Cache().List(c.opts.Namespace, labels.Everything())
	if err != nil {
		c.log.Error("list deployments from cache", "error", err)
	}
	for _, d := range ds {
		c.queue.Add(Key{Namespace: d.Namespace, Name: d.Name})
	}
	c.queue.Add(c.rancherConfigKey())
}

// gathered is what a sync reads: the inputs of fleetenv's decisions and
// the verdict on a change of the agent triple.
type gathered struct {
	in fleetenv.Inputs
	// cur is the agent triple on fleet-agentmanagement and next the one in
	// effect when CheckAgentTriple judged a change; refusal is its error
	// (the change is then left out: in.AgentOK false, the agents keep cur).
	cur      election.Timings
	next     election.Timings
	refusal  error
	canceled bool
}

// gather reads the effective triples and the channel, and judges a change
// of the agent triple with CheckAgentTriple (a read of the agent index).
// It writes nothing and says nothing: report does.
func (c *Controller) gather(ctx context.Context) gathered {
	var g gathered
	g.in.Controller, g.in.ControllerOK = c.opts.Triples.Effective(settings.FleetController)
	g.in.Agent, g.in.AgentOK = c.opts.Triples.Effective(settings.FleetAgent)
	g.in.Channel, _ = c.opts.Channels.Channel()
	// FLEET_AGENT_ELECTION_* on fleet-agentmanagement is Fleet v0.13+'s
	// (fleet.DetectChannel rules 2 and 4), and fleetenv.Desired rewrites
	// them wherever they are, whatever channel is known now (none yet, or
	// another writer's record while fleetchannel detects again): every
	// such change is judged, as the agentmanagement channel's.
	if g.in.AgentOK && c.opts.CheckAgentTriple != nil {
		if cur, ok := c.agentTripleInEffect(); ok && cur != g.in.Agent {
			g.cur, g.next = cur, g.in.Agent
			if err := c.opts.CheckAgentTriple(ctx, cur, g.in.Agent, fleet.ChannelAgentManagement); err != nil {
				g.in.AgentOK, g.refusal = false, err
			}
		}
	}
	g.canceled = ctx.Err() != nil
	return g
}

// agentTripleInEffect reads FLEET_AGENT_ELECTION_* of fleet-agentmanagement
// in the cached fleet-controller Deployment: the triple the agents get now.
func (c *Controller) agentTripleInEffect() (election.Timings, bool) {
	d, err := c.opts.Deployments.Cache().Get(c.opts.Namespace, fleet.ControllerDeployment)
	if err != nil {
		return election.Timings{}, false
	}
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name == fleet.AgentManagementContainer {
			t, found, err := election.FleetAgentPrefix.FromEnv(ct.Env)
			return t, found && err == nil
		}
	}
	return election.Timings{}, false
}

// reportJudgement reports what gather found of the agent triple:
// metrics.SettingRefused{fleet-agent, agents-refused}, and a refusal once,
// with a Warning Event on each agent Setting and a log line. While a
// refusal stands, the fleet-controller Deployment is looked at again every
// RejudgeAfter, so the triple goes out once the clusters that blocked it
// are fixed. Nothing is reported of a sync that was canceled.
func (c *Controller) reportJudgement(g gathered) {
	if g.canceled {
		return
	}
	setRefused(metrics.RefusedByAgents, g.refusal != nil)
	if g.refusal == nil {
		return
	}
	c.queue.AddAfter(Key{Namespace: c.opts.Namespace, Name: fleet.ControllerDeployment}, RejudgeAfter)
	msg := fmt.Sprintf("the agent triple %s is not propagated, the agents keep %s: %v", g.next, g.cur, g.refusal)
	c.mu.Lock()
	said := c.refusedSaid == msg
	c.refusedSaid = msg
	c.mu.Unlock()
	if said {
		return
	}
	c.log.Warn("agent triple not propagated", "timings", g.next.String(), "error", g.refusal.Error())
	if c.opts.Recorder != nil {
		for _, d := range settings.Of(settings.FleetAgent) {
			ref := &corev1.ObjectReference{APIVersion: "management.cattle.io/v3", Kind: "Setting", Name: d.Name}
			c.opts.Recorder.Event(ref, corev1.EventTypeWarning, "AgentTimingsRefused", msg)
		}
	}
}

// RejudgeAfter is how often a refused agent triple change is judged again.
const RejudgeAfter = 30 * time.Second

// syncDeployment gathers, decides the owned env entries that differ
// (fleetenv.Desired), writes them in one patch and reports.
func (c *Controller) syncDeployment(ctx context.Context, d *appsv1.Deployment) (err error) {
	if d == nil || d.Namespace != c.opts.Namespace || !fleet.IsTarget(d) {
		return nil
	}
	g := c.gather(ctx)
	changes := fleetenv.Desired(d, g.in)
	var body []byte
	written := false
	defer func() { c.reportDeployment(d, g, changes, body, written) }()
	if len(changes) == 0 {
		return nil
	}
	if body, err = fleetenv.PatchBody(d, changes); err != nil {
		return err
	}
	_, err = c.opts.Client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.JSONPatchType, body,
		metav1.PatchOptions{FieldManager: own.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	written = true
	c.lastWrite.Wrote(Key{Namespace: d.Namespace, Name: d.Name}, d.ResourceVersion)
	return nil
}

// reportDeployment reports a sync of Deployment d: the judgement, and a
// write with its restarts (the restart ledger), the propagation metric and
// a log line.
func (c *Controller) reportDeployment(d *appsv1.Deployment, g gathered, changes []fleetenv.ContainerEnv, body []byte, written bool) {
	c.reportJudgement(g)
	if !written {
		return
	}
	c.wrote("deployment", Key{Namespace: d.Namespace, Name: d.Name})
	metrics.Restarts.WithLabelValues(string(restart.DeploymentRollout)).Inc()
	if redeploysAgents(changes) && c.opts.Agents != nil {
		metrics.Restarts.WithLabelValues(string(restart.FleetAgent)).Add(float64(c.opts.Agents()))
	}
	var names, entries []string
	for _, ch := range changes {
		names = append(names, ch.Container)
		for _, e := range ch.Env {
			entries = append(entries, ch.Container+":"+e.Name+"="+e.Value)
		}
	}
	c.log.Info("deployment env updated", "deployment", d.Namespace+"/"+d.Name, "containers", names,
		"entries", entries, "channel", g.in.Channel)
	c.log.Debug("deployment env patch", "deployment", d.Namespace+"/"+d.Name, "patch", string(body))
}

// redeploysAgents reports whether changes write FLEET_AGENT_ELECTION_*.
func redeploysAgents(changes []fleetenv.ContainerEnv) bool {
	for _, ch := range changes {
		for _, e := range ch.Env {
			if election.FleetAgentPrefix.Owns(e.Name) {
				return true
			}
		}
	}
	return false
}

// syncRancherConfig keeps leaderElection.* and agent.leaderElection.* under
// the fleet key of rancher-config equal to the effective triples
// (fleetenv.MergeChartValues): gather, decide, one merge patch, report. A
// value that is not a YAML mapping is reported and left alone.
func (c *Controller) syncRancherConfig(ctx context.Context, cm *corev1.ConfigMap) (err error) {
	if cm == nil || cm.Namespace != c.opts.RancherNamespace || cm.Name != fleetenv.RancherConfigName {
		return nil
	}
	g := c.gather(ctx)
	merged, changed, unreadable := fleetenv.MergeChartValues(cm.Data[fleetenv.RancherConfigKey], g.in.Controller, g.in.ControllerOK, g.in.Agent, g.in.AgentOK)
	written := false
	defer func() { c.reportRancherConfig(cm, g, unreadable, written) }()
	if unreadable != nil || !changed {
		return nil
	}
	// A merge patch of the one key, with the resourceVersion read: a
	// concurrent edit makes it fail with a conflict and the retry starts
	// from the fresh object.
	body, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": cm.ResourceVersion},
		"data":     map[string]string{fleetenv.RancherConfigKey: merged},
	})
	if err != nil {
		return err
	}
	_, err = c.opts.Client.CoreV1().ConfigMaps(cm.Namespace).Patch(ctx, cm.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: own.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	written = true
	c.lastWrite.Wrote(c.rancherConfigKey(), cm.ResourceVersion)
	return nil
}

// reportRancherConfig reports a sync of rancher-config: the judgement, a
// value left alone (a Warning Event on the ConfigMap), or a write.
func (c *Controller) reportRancherConfig(cm *corev1.ConfigMap, g gathered, unreadable error, written bool) {
	c.reportJudgement(g)
	switch {
	case unreadable != nil:
		c.log.Error("rancher-config left alone", "configmap", cm.Namespace+"/"+cm.Name, "error", unreadable)
		if c.opts.Recorder != nil {
			c.opts.Recorder.Event(cm, corev1.EventTypeWarning, "FleetValuesUnreadable", unreadable.Error()+"; leasetune leaves it alone")
		}
	case written:
		c.wrote("rancher-config", c.rancherConfigKey())
		c.log.Info("fleet chart values updated", "configmap", cm.Namespace+"/"+cm.Name)
	}
}

// wrote counts a write and updates the propagation metric, when the write
// belongs to the last triple change (its object was owed one).
func (c *Controller) wrote(target string, key Key) {
	metrics.Writes.WithLabelValues(target).Inc()
	c.mu.Lock()
	at, owed := c.changeAt, c.owed[key]
	c.mu.Unlock()
	if owed && !at.IsZero() {
		metrics.PropagationSeconds.WithLabelValues(controllerName).Set(time.Since(at).Seconds())
	}
}

// beginPropagation starts the propagation of a triple change made at now:
// it owes a sync to each target Deployment of keys and to rancher-config,
// replacing what an earlier change still owed.
func (c *Controller) beginPropagation(now time.Time, keys []Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changeAt = now
	c.owed = map[Key]bool{}
	for _, k := range keys {
		c.owed[k] = true
	}
	c.owed[c.rancherConfigKey()] = true
	c.publishPropagation()
}

// synced marks an object as done for the last triple change; with the last
// one the change has been propagated.
func (c *Controller) synced(key Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owed[key] {
		return
	}
	delete(c.owed, key)
	if len(c.owed) == 0 {
		c.changeAt = time.Time{}
	}
	c.publishPropagation()
}

// publishPropagation sets the propagation gauges of fleetsettings: the
// objects the change still owes a sync (metrics.PropagationPending) and,
// its writes being unpaced, its start as the time it should be done by
// (metrics.PropagationDeadline); both 0 when none is owed. Call with c.mu
// held.
func (c *Controller) publishPropagation() {
	deadline := 0.0
	if len(c.owed) > 0 && !c.changeAt.IsZero() {
		deadline = float64(c.changeAt.Unix()) + float64(c.changeAt.Nanosecond())/1e9
	}
	metrics.PropagationPending.WithLabelValues(controllerName).Set(float64(len(c.owed)))
	metrics.PropagationDeadline.WithLabelValues(controllerName).Set(deadline)
}
