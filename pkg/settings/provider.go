package settings

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	mgmtcontrollers "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/ownstate"
	"leasetune.io/leasetune/pkg/workloop"
)

// DefaultStateName is the ConfigMap that holds the provider's durable State.
const DefaultStateName = "leasetune-state"

// FieldManager is the field manager of every write the provider makes.
const FieldManager = "leasetune-settings"

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
	// Clock tells the time of the settle time; the real clock when nil.
	Clock clock.PassiveClock
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
	loop   *workloop.Loop[string]
	queue  workloop.Queue[string] // the loop; a recording one in unit tests

	mu        sync.RWMutex // guards the fields below
	state     State        // as last persisted
	status    map[Component]ComponentStatus
	refused   map[Component]string // key of the last refusal reported
	listeners []func()
	stateCM   *corev1.ConfigMap // last read or written state ConfigMap
	pending   map[Component]pendingTriple
	// created are the Setting objects this provider created that the
	// cache has not shown yet (expectCreated): before creating one again
	// the API server is read (stillThere).
	created map[string]bool
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
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	p := &Provider{
		opts:    opts,
		log:     opts.Log.With("component", "settings"),
		status:  map[Component]ComponentStatus{},
		refused: map[Component]string{},
		pending: map[Component]pendingTriple{},
	}
	p.loop = workloop.New(workloop.Options{Name: "settings", Log: opts.Log}, func(ctx context.Context, _ string) error { return p.sync(ctx) })
	p.queue = p.loop
	return p
}

// syncKey is the provider's one work item: every sync reads the nine
// Settings together.
const syncKey = "settings"

// Register loads the durable state, seeds the effective triples from it,
// creates the missing Setting objects (with the users' remembered values),
// registers the handler that keeps everything current and runs its work
// queue until ctx ends (its worker waits for the Settings cache: start the
// factory afterwards). It returns an error when the state ConfigMap cannot
// be read or an object cannot be created; an unreadable stored triple is
// only logged.
func (p *Provider) Register(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			p.loop.ShutDown() // it will not run
		}
	}()
	if err := p.loadState(ctx); err != nil {
		return err
	}
	for _, d := range Registry {
		if err := p.ensureExists(ctx, d); err != nil {
			return err
		}
	}
	inf := p.opts.Settings.Informer()
	_, _ = inf.AddEventHandler(p.loop.Handler(settingKeys))
	p.queue.Add(syncKey) // once at the start, whatever the cache holds
	p.loop.Start(ctx, inf.HasSynced)
	return nil
}

// settingKeys is the provider's one work item for a change of one of the
// nine Settings; none for another Setting.
func settingKeys(obj interface{}) []string {
	if s, ok := obj.(*v3.Setting); ok {
		if _, ours := Lookup(s.Name); ours {
			return []string{syncKey}
		}
	}
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
	p.mu.Lock()
	in.Remembered, in.RememberedSet = p.state.Values[d.Name]
	if in.Object != nil {
		delete(p.created, d.Name) // the cache has it: no longer awaited
	}
	p.mu.Unlock()
	return in, nil
}

// sync gathers every setting from the cache, keeps the objects (restore)
// and the durable state current, settles the triples (settle), publishes
// the changed ones and reports (reportSync). Invalid input is reported
// once and not retried; write errors are returned for the work queue to
// retry.
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
	if err := p.adoptLeavingEnv(ctx, inputs); err != nil {
		return err
	}
	restored, err := p.restore(inputs)
	p.reportRestored(restored)
	if err != nil {
		return err
	}

	// State: the users' values and the triples that validate.
	now := p.opts.Clock.Now()
	p.mu.Lock()
	next := p.state.clone()
	for _, d := range Registry {
		if v, ok := Remember(inputs[d.Name]); ok {
			next.Values[d.Name] = v
		}
	}
	settled := settle(inputs, next.Effective, p.pending, now, p.opts.Settle)
	next.Effective, p.pending = settled.effective, settled.pending
	p.mu.Unlock()
	if settled.recheck > 0 {
		p.queue.AddAfter(syncKey, settled.recheck)
	}
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
	for c, st := range settled.status {
		p.status[c] = st
	}
	listeners := append([]func(){}, p.listeners...)
	p.mu.Unlock()

	p.reportSync(settled, stored, applied)
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

// adoptLeavingEnv stores as the users' values those of the objects that
// leave source env with no user value remembered (AdoptOnLeavingEnv), before
// restore replaces them, and marks them remembered in inputs.
func (p *Provider) adoptLeavingEnv(ctx context.Context, inputs map[string]Input) error {
	adopted := map[string]string{}
	for name, in := range inputs {
		if v, ok := AdoptOnLeavingEnv(in); ok {
			adopted[name] = v
		}
	}
	if len(adopted) == 0 {
		return nil
	}
	p.mu.Lock()
	next := p.state.clone()
	for name, v := range adopted {
		next.Values[name] = v
	}
	p.mu.Unlock()
	stored, err := p.persist(ctx, next)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.state = stored
	p.mu.Unlock()
	for name := range adopted {
		in := inputs[name]
		in.Remembered, in.RememberedSet = stored.Values[name]
		inputs[name] = in
	}
	return nil
}

// HasSynced reports whether the provider has evaluated the Setting objects
// at least once since it started: before that, Effective is the last good
// triple from the durable state, and a triple the settings hold that waits
// for the settle time (kept only in memory) is not known yet.
func (p *Provider) HasSynced() bool { return p.synced.Load() }

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
