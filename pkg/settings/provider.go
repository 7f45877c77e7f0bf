package settings

import (
	"context"
	"encoding/json"

	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	mgmtcontrollers "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/ownstate"
)

// DefaultStateName is the ConfigMap that holds the provider's durable State.
const DefaultStateName = "leasetune-state"

// FieldManager is the field manager of every write the provider makes.
const FieldManager = "leasetune-settings"

// Event reasons on Setting objects.
const (
	// ReasonRefused: a value was refused; the last good triple stays.
	ReasonRefused = "TimingsRefused"
	// ReasonApplied: a new triple took effect.
	ReasonApplied = "TimingsApplied"
	// ReasonRestored: a deleted Setting was recreated.
	ReasonRestored = "SettingRestored"
	// ReasonPending: a new valid triple waits for the settle time.
	ReasonPending = "TimingsPending"
)

// DefaultSettle is how long the settings must stay unchanged before new
// triples take effect (--settle), all of them together. An operator who
// follows the webhook's hint edits up to three settings one after another:
// with kubectl or the Rancher UI that takes a few seconds each, and every
// triple that took effect on the way would roll the Fleet Deployments and
// redeploy agents. 10s covers such a sequence and delays a change by no
// more than that.
const DefaultSettle = 10 * time.Second

// ProviderOptions configures a Provider.
type ProviderOptions struct {
	// Settings is the wrangler controller of Setting objects: its cache is
	// read, its client written.
	Settings mgmtcontrollers.SettingController
	// ConfigMaps reaches the namespace of the state ConfigMap.
	ConfigMaps corev1client.ConfigMapsGetter
	// Namespace and StateName name the ConfigMap that holds the durable
	// State (default DefaultStateName).
	Namespace string
	StateName string
	// Recorder records Events on Setting objects.
	Recorder record.EventRecorder
	// LookupEnv reads the env overrides; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// Settle is how long a component's settings must be unchanged before
	// a new valid triple takes effect (batching; see DefaultSettle); 0
	// applies it at once. The first triple known takes effect at once.
	Settle time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// ComponentStatus is the provider's view of one component, for logs,
// metrics and tests.
type ComponentStatus struct {
	// Inputs are the three resolved values last evaluated (order of Of).
	Inputs [3]Resolved
	// Effective is the triple in effect; valid only when HasEffective.
	Effective    election.Timings
	HasEffective bool
	// Refused is why Inputs did not take effect; nil when they did.
	Refused error
	// Pending is a valid triple that waits for the settle time to take
	// effect, at PendingAt; nil when none waits.
	Pending   *election.Timings
	PendingAt time.Time
}

// Provider keeps the nine Setting objects in place and resolves them into
// the effective triples. It implements Triples. Every method is safe for
// concurrent use. Writes happen only after Register, on the leader.
type Provider struct {
	opts ProviderOptions
	log  *slog.Logger

	syncMu sync.Mutex  // serialises sync
	synced atomic.Bool // a sync has completed (HasSynced)

	mu        sync.RWMutex // guards the fields below
	state     State        // as last persisted
	status    map[Component]ComponentStatus
	refused   map[Component]string // key of the last refusal reported
	listeners []func()
	stateCM   *corev1.ConfigMap // last read or written state ConfigMap
	pending   map[Component]pendingTriple
}

// pendingTriple is a valid stored triple waiting for the settle time.
type pendingTriple struct {
	t     election.Timings
	since time.Time
	said  bool
}

var _ Triples = (*Provider)(nil)

// NewProvider returns a Provider; call Register before starting the
// Settings controller's factory.
func NewProvider(opts ProviderOptions) *Provider {
	if opts.StateName == "" {
		opts.StateName = DefaultStateName
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{
		opts:    opts,
		log:     opts.Log.With("component", "settings"),
		status:  map[Component]ComponentStatus{},
		refused: map[Component]string{},
		pending: map[Component]pendingTriple{},
	}
}

// Register loads the durable state, seeds the effective triples from it,
// creates the missing Setting objects (with the users' remembered values)
// and registers the handler that keeps everything current. It returns an
// error when the state ConfigMap cannot be read or an object cannot be
// created; an unreadable stored triple is only logged.
func (p *Provider) Register(ctx context.Context) error {
	if err := p.loadState(ctx); err != nil {
		return err
	}
	for _, d := range Registry {
		if err := p.ensureExists(ctx, d); err != nil {
			return err
		}
	}
	p.opts.Settings.OnChange(ctx, "leasetune-settings", func(key string, s *v3.Setting) (*v3.Setting, error) {
		if _, ok := Lookup(key); !ok {
			return s, nil
		}
		return s, p.sync(ctx)
	})
	return nil
}

// Effective implements Triples.
func (p *Provider) Effective(c Component) (election.Timings, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	t, ok := p.state.Effective[c]
	return t, ok
}

// OnChange implements Triples.
func (p *Provider) OnChange(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listeners = append(p.listeners, f)
}

// Status returns the provider's view of component c.
func (p *Provider) Status(c Component) ComponentStatus {
	p.mu.RLock()
	defer p.mu.RUnlock()
	st := p.status[c]
	st.Effective, st.HasEffective = p.state.Effective[c]
	return st
}

// loadState reads the state ConfigMap; a missing one is an empty state.
func (p *Provider) loadState(ctx context.Context) error {
	cm, err := ownstate.Load(ctx, p.opts.ConfigMaps, p.opts.Namespace, p.opts.StateName)
	if err != nil {
		return fmt.Errorf("durable state: %w", err)
	}
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	st, derr := decodeState(data)
	if derr != nil {
		p.log.Error("durable state partly unreadable", "configmap", p.opts.Namespace+"/"+p.opts.StateName, "error", derr)
	}
	p.mu.Lock()
	p.state, p.stateCM = st, cm
	p.mu.Unlock()
	for _, c := range Components {
		if t, ok := st.Effective[c]; ok {
			p.log.Info("last good triple loaded from state", "setting-component", c, "timings", t.String())
		}
	}
	return nil
}

// input gathers the Input of setting d from the cache, the env and the state.
func (p *Provider) input(d Definition) (Input, error) {
	var in Input
	obj, err := p.opts.Settings.Cache().Get(d.Name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return in, err
	default:
		in.Object = obj
	}
	in.Env, in.EnvSet = p.opts.LookupEnv(d.EnvVar())
	p.mu.RLock()
	in.Remembered, in.RememberedSet = p.state.Values[d.Name]
	p.mu.RUnlock()
	return in, nil
}

// ensureExists creates the Setting object of d when the API server has
// none, with the env value or the user's remembered value. It reads the
// API server, not the cache, because it runs before the cache starts.
func (p *Provider) ensureExists(ctx context.Context, d Definition) error {
	_, err := p.opts.Settings.Get(d.Name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	in := Input{}
	in.Env, in.EnvSet = p.opts.LookupEnv(d.EnvVar())
	p.mu.RLock()
	in.Remembered, in.RememberedSet = p.state.Values[d.Name]
	p.mu.RUnlock()
	_, err = p.create(d, in)
	return err
}

// create creates the Setting object of d as Desired computes it. It
// reports false when another writer created it first (the next sync then
// reconciles it).
func (p *Provider) create(d Definition, in Input) (bool, error) {
	obj, _ := Desired(d, in)
	_, err := p.opts.Settings.Create(obj)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create setting %s: %w", d.Name, err)
	}
	p.log.Info("setting created", "setting", d.Name, "value", obj.Value, "source", obj.Source)
	return true, nil
}

// sync gathers every setting from the cache, keeps the objects and the
// durable state current, evaluates both components and publishes changed
// triples. Invalid input is reported once and not retried; write errors
// are returned for the work queue to retry.
func (p *Provider) sync(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()

	inputs := map[string]Input{}
	for _, d := range Registry {
		in, err := p.input(d)
		if err != nil {
			return err
		}
		inputs[d.Name] = in
	}

	// Objects: restore deleted ones, keep default, source and customized current.
	for _, d := range Registry {
		in := inputs[d.Name]
		if in.Object == nil {
			created, err := p.create(d, in)
			if err != nil {
				return err
			}
			if !created {
				continue
			}
			p.event(d.Name, "", corev1.EventTypeNormal, ReasonRestored,
				fmt.Sprintf("Setting %s was deleted and has been restored with value %q", d.Name, Resolve(d, in).Value))
			continue
		}
		if _, patch := Desired(d, in); patch != nil {
			if err := p.patch(d.Name, patch); err != nil {
				return err
			}
		}
	}

	// State: the users' values and the triples that validate.
	p.mu.RLock()
	next := p.state.clone()
	p.mu.RUnlock()
	for _, d := range Registry {
		if v, ok := Remember(inputs[d.Name]); ok {
			next.Values[d.Name] = v
		}
	}
	statuses := map[Component]ComponentStatus{}
	var waiting []Component // pending changes to say
	now := p.opts.Now()
	p.mu.Lock()
	// Batching: new valid triples take effect together, once none of the
	// six settings has changed for the settle time, so one intended change
	// that spans both components (the fleet-controller Deployment carries
	// both triples) is one write per object, not one per component.
	var latest time.Time
	for _, c := range Components {
		var vals [3]Resolved
		for i, d := range Of(c) {
			vals[i] = Resolve(d, inputs[d.Name])
		}
		t, err := Evaluate(c, vals)
		st := ComponentStatus{Inputs: vals, Refused: err}
		cur, had := next.Effective[c]
		switch {
		case err != nil || (had && cur == t):
			// Invalid: the last good triple stays whole, nothing waits.
			delete(p.pending, c)
		case !had || p.opts.Settle <= 0:
			next.Effective[c] = t
			delete(p.pending, c)
		default:
			pt, ok := p.pending[c]
			if !ok || pt.t != t {
				pt = pendingTriple{t: t, since: now}
			}
			p.pending[c] = pt
			if pt.since.After(latest) {
				latest = pt.since
			}
		}
		statuses[c] = st
	}
	if len(p.pending) > 0 {
		at := latest.Add(p.opts.Settle)
		ripe := !now.Before(at)
		for _, c := range Components {
			pt, ok := p.pending[c]
			if !ok {
				continue
			}
			if ripe {
				next.Effective[c] = pt.t
				delete(p.pending, c)
				continue
			}
			st := statuses[c]
			t := pt.t
			st.Pending, st.PendingAt = &t, at
			statuses[c] = st
			if !pt.said {
				waiting = append(waiting, c)
			}
		}
		if !ripe {
			p.opts.Settings.EnqueueAfter(Of(Components[0])[0].Name, at.Sub(now))
		}
	}
	p.mu.Unlock()
	stored, err := p.persist(ctx, next)
	if err != nil {
		return err
	}

	p.mu.Lock()
	var applied []Component // what stored changes in effect, whoever computed it
	for _, c := range Components {
		if t, ok := stored.Effective[c]; ok {
			if old, had := p.state.Effective[c]; !had || old != t {
				applied = append(applied, c)
			}
		}
	}
	p.state = stored
	for c, st := range statuses {
		p.status[c] = st
	}
	listeners := append([]func(){}, p.listeners...)
	p.mu.Unlock()

	for _, c := range Components {
		p.report(c, statuses[c], stored)
	}
	for _, c := range waiting {
		st := statuses[c]
		p.mu.Lock()
		if pt, ok := p.pending[c]; ok && pt.t == *st.Pending {
			pt.said = true
			p.pending[c] = pt
		}
		p.mu.Unlock()
		keep := "nothing is in effect yet"
		if t, ok := stored.Effective[c]; ok {
			keep = t.String() + " stays in effect until then"
		}
		msg := fmt.Sprintf("%s takes effect for %s at %s, once the settings have been unchanged for %s, and then %s; %s",
			*st.Pending, c, st.PendingAt.UTC().Format(time.RFC3339), p.opts.Settle, c.Restarts(), keep)
		p.log.Info("timings pending", "setting-component", c, "timings", st.Pending.String(), "at", st.PendingAt)
		for _, d := range Of(c) {
			p.event(d.Name, "", corev1.EventTypeNormal, ReasonPending, msg)
		}
	}
	for _, c := range applied {
		t := stored.Effective[c]
		p.log.Info("timings applied", "setting-component", c, "timings", t.String())
		metrics.SettingsApplied.WithLabelValues(string(c)).Inc()
		for _, d := range Of(c) {
			p.event(d.Name, "", corev1.EventTypeNormal, ReasonApplied, fmt.Sprintf("%s now in effect for %s, which %s; %s", t, c, c.Restarts(), ledger()))
		}
	}
	if len(applied) > 0 {
		for _, f := range listeners {
			f()
		}
	}
	if !stored.equal(next) {
		// Another writer's entries won over this sync's: evaluate again
		// (the work queue retries) from what is stored now.
		return fmt.Errorf("durable state %s/%s: another writer stored other entries meanwhile; evaluating again",
			p.opts.Namespace, p.opts.StateName)
	}
	p.synced.Store(true)
	return nil
}

// HasSynced reports whether the provider has evaluated the Setting objects
// at least once since it started: before that, Effective is the last good
// triple from the durable state, and a triple the settings hold that waits
// for the settle time (kept only in memory) is not known yet.
func (p *Provider) HasSynced() bool { return p.synced.Load() }

// ledger says what leasetune's writes have restarted so far in this
// process (the restart ledger, metric leasetune_restarts_total), before
// the writes of the change just applied.
func ledger() string {
	t := metrics.RestartTotals()
	return fmt.Sprintf("before this change leasetune's writes had restarted (since its start): %.0f Fleet Deployment rollout(s), %.0f Rancher rollout(s), %.0f fleet-agent, %.0f cattle-cluster-agent redeploy(s), %.0f node plan(s)",
		t["deployment-rollout"], t["rancher-rollout"], t["fleet-agent"], t["cattle-cluster-agent"], t["node-plan"])
}

// report logs and records a refusal once per distinct input, and forgets
// it when the input becomes valid.
func (p *Provider) report(c Component, st ComponentStatus, s State) {
	if st.Refused == nil {
		p.mu.Lock()
		delete(p.refused, c)
		p.mu.Unlock()
		return
	}
	key := fmt.Sprint(st.Inputs)
	p.mu.Lock()
	seen := p.refused[c] == key
	p.refused[c] = key
	p.mu.Unlock()
	if seen {
		return
	}
	metrics.SettingsRefused.WithLabelValues(string(c)).Inc()
	keep := "no valid triple is known, so nothing is propagated for " + string(c)
	if t, ok := s.Effective[c]; ok {
		keep = "still in effect: " + t.String()
	}
	defs := Of(c)
	var parts []string
	for i, d := range defs {
		parts = append(parts, fmt.Sprintf("%s=%q", d.Name, st.Inputs[i].Value))
	}
	msg := fmt.Sprintf("refused %s: %v; %s", strings.Join(parts, " "), st.Refused, keep)
	p.log.Warn("timings refused", "setting-component", c, "values", strings.Join(parts, " "), "error", st.Refused.Error(), "kept", keep)
	last, hasLast := s.Effective[c]
	for i, d := range defs {
		// Put the Event on the settings whose value is not the one in effect.
		if hasLast {
			if dur, err := election.ParseDuration(d.Field, st.Inputs[i].Value); err == nil && dur == last.Get(d.Field) {
				continue
			}
		}
		p.event(d.Name, "", corev1.EventTypeWarning, ReasonRefused, msg)
	}
}

// patch applies a JSON merge patch to the Setting called name.
func (p *Provider) patch(name string, patch map[string]interface{}) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := p.opts.Settings.Patch(name, types.MergePatchType, body); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: the next sync restores it
		}
		return fmt.Errorf("patch setting %s: %w", name, err)
	}
	p.log.Info("setting updated", "setting", name, "patch", string(body))
	return nil
}

// persist writes s, computed from p.state, to the state ConfigMap when it
// differs from what is stored, and returns the state stored. Only the
// leader writes, but in a handover an outgoing leader may still: every
// attempt of ownstate.Save merges s into the data stored at that moment
// (mergeState), so neither writer reverts an entry the other changed.
func (p *Provider) persist(ctx context.Context, s State) (State, error) {
	p.mu.RLock()
	base := p.state.clone()
	cm := p.stateCM
	p.mu.RUnlock()
	if base.equal(s) && cm != nil {
		return s, nil
	}
	var stored State
	out, err := ownstate.Save(ctx, p.opts.ConfigMaps, p.opts.Namespace, p.opts.StateName, cm, func(current map[string]string) (map[string]string, error) {
		stored = mergeState(base, s, current)
		return stored.encode()
	})
	if err != nil {
		return State{}, err
	}
	p.mu.Lock()
	p.stateCM = out
	p.mu.Unlock()
	return stored, nil
}

// event records an Event on the cluster-scoped Setting called name.
func (p *Provider) event(name string, uid types.UID, eventType, reason, msg string) {
	if p.opts.Recorder == nil {
		return
	}
	if uid == "" {
		if obj, err := p.opts.Settings.Cache().Get(name); err == nil {
			uid = obj.UID
		}
	}
	ref := &corev1.ObjectReference{APIVersion: v3.SchemeGroupVersion.String(), Kind: "Setting", Name: name, UID: uid}
	p.opts.Recorder.Event(ref, eventType, reason, msg)
}

// Set changes the value of the setting called name, as Rancher's settings
// API does, after CheckChange accepts it against the current values, the
// remembered ones and the env. It writes only the object's value (a JSON
// merge patch). Errors: those of CheckChange, or of the write.
func (p *Provider) Set(ctx context.Context, name, value string) error {
	objs, err := p.opts.Settings.Cache().List(labels.Everything())
	if err != nil {
		return err
	}
	v := View{EnvSet: func(d Definition) bool { _, ok := p.opts.LookupEnv(d.EnvVar()); return ok }}
	for _, o := range objs {
		v.Objects = append(v.Objects, *o)
	}
	p.mu.RLock()
	v.Remembered = p.state.clone().Values
	p.mu.RUnlock()
	if err := CheckChange(v, name, value); err != nil {
		return err
	}
	return p.patch(name, map[string]interface{}{"value": value})
}
