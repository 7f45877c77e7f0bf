package rancherenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appscontrollers "github.com/rancher/wrangler/v2/pkg/generated/controllers/apps/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/workloop"
)

// Event reasons on the Rancher Deployment.
const (
	// ReasonUpdated: the entries were written; every Rancher replica rolls.
	ReasonUpdated = "RancherElectionEnvUpdated"
	// ReasonLeftAlone: a rancherenv.Problem keeps leasetune from writing.
	ReasonLeftAlone = "RancherElectionEnvLeftAlone"
	// ReasonDeferred: a write waits for the Deployment to settle.
	ReasonDeferred = "RancherElectionEnvDeferred"
)

// Options configures Register.
type Options struct {
	// Namespace and Name name the Rancher Deployment (cattle-system/rancher).
	Namespace, Name string
	// Deployments is a wrangler controller whose informer watches that
	// Deployment (by name): its cache is read and its informer feeds the
	// work queue (pkg/workloop).
	Deployments appscontrollers.DeploymentController
	// Client makes the writes, with own.FieldManager (so that
	// rancherenv.Managers can tell leasetune's entries from another
	// writer's).
	Client kubernetes.Interface
	// Triples gives the effective triples.
	Triples settings.Triples
	// Version, when Known, replaces reading the image (--rancher-version).
	Version rancher.Version
	// Recorder records Events; may be nil.
	Recorder record.EventRecorder
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// Controller keeps the CATTLE_ELECTION_* entries of the Rancher
// container on the effective Rancher triple (settings.Rancher): one JSON
// patch per change, nothing at rest, nothing where rancherenv.Decide says
// no.
type Controller struct {
	opts  Options
	log   *slog.Logger
	loop  *workloop.Loop[string]
	queue workloop.Queue[string] // the loop; a recording one in unit tests
	// lastWrite: a sync waits for the cache to show its last write
	// (workloop.Written).
	lastWrite workloop.Written[string]

	mu   sync.Mutex
	said string // the last problem reported, so each is said once
}

// pendingTriples is what the settings Provider offers besides Triples:
// the triple pending in the settle time.
type pendingTriples interface {
	Status(settings.Component) settings.ComponentStatus
}

// providerWait is how often the Deployment is looked at again while the
// settings provider has not read the Settings yet.
const providerWait = time.Second

// pendingRecheck is how long after a pending triple's settle time the
// Deployment is looked at again.
const pendingRecheck = 500 * time.Millisecond

// Register registers the handlers and runs the work queue until ctx ends;
// start the factory of opts.Deployments afterwards (the worker waits for
// its cache).
func Register(ctx context.Context, opts Options) *Controller {
	c := New(opts)
	inf := opts.Deployments.Informer()
	_, _ = inf.AddEventHandler(c.loop.Handler(func(obj interface{}) []string {
		if d, ok := obj.(*appsv1.Deployment); ok && d.Namespace == c.opts.Namespace && d.Name == c.opts.Name {
			return []string{c.key()}
		}
		return nil
	}))
	opts.Triples.OnChange(func() { c.queue.Add(c.key()) })
	c.loop.Start(ctx, inf.HasSynced)
	return c
}

// New returns the controller without registering handlers (for tests).
func New(opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Namespace == "" {
		opts.Namespace = rancher.DefaultNamespace
	}
	if opts.Name == "" {
		opts.Name = rancher.DefaultDeployment
	}
	c := &Controller{opts: opts, log: opts.Log.With("controller", controllerName)}
	c.loop = workloop.New(workloop.Options{Name: controllerName, Log: opts.Log}, c.syncKey)
	c.queue = c.loop
	return c
}

// syncKey syncs the Rancher Deployment as the cache holds it; a deleted
// one is nothing to do until it is back.
func (c *Controller) syncKey(ctx context.Context, _ string) error {
	d, err := c.opts.Deployments.Cache().Get(c.opts.Namespace, c.opts.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.sync(ctx, d)
}

// controllerName is the controller label of this controller's metrics.
const controllerName = "rancherenv"

// key is the one work item: the Rancher Deployment.
func (c *Controller) key() string { return c.opts.Namespace + "/" + c.opts.Name }

// TripleIgnored reports whether the rancher triple of in asks for
// something that the decision dec leaves unwritten for good: dec leaves
// the Deployment alone for a reason other than a rollout in progress or a
// pending triple (rancherenv.ProblemNotReady, which passes by itself),
// and the triple is not Rancher's built-in 45s/30s/2s
// (election.WranglerDefaults), which needs no write.
func TripleIgnored(dec rancherenv.Decision, in rancherenv.Input) bool {
	return dec.Problem != rancherenv.ProblemNone && dec.Problem != rancherenv.ProblemNotReady && in.OK && in.Triple != election.WranglerDefaults
}

// sync gathers the triples (the settings provider's cache), decides
// (rancherenv.Decide, pure), makes at most one write, then reports once.
func (c *Controller) sync(ctx context.Context, d *appsv1.Deployment) error {
	if d == nil || d.Namespace != c.opts.Namespace || d.Name != c.opts.Name {
		return nil
	}
	if c.lastWrite.Stale(c.key(), d.ResourceVersion) {
		return nil // the informer brings the write, and enqueues it
	}
	in, known := c.gather()
	if !known {
		// Until the provider has read the Settings once, a triple waiting
		// in the settle time before a restart is not known: deciding now
		// could write the last applied one just before it is replaced.
		c.queue.AddAfter(c.key(), providerWait)
		return nil
	}
	dec := rancherenv.Decide(d, in)
	var err error
	if dec.Write {
		err = c.write(ctx, d, dec)
	}
	c.report(d, dec, in, err)
	if dec.Pending {
		// Look again once the settle time has passed: the pending triple
		// then takes effect (and the provider's listener enqueues too), or
		// it was dropped meanwhile (the value in effect set again), which
		// changes no triple and enqueues nothing, but the write waiting
		// for the triple in effect is still due.
		wait := time.Until(in.PendingUntil) + pendingRecheck
		if wait < pendingRecheck {
			wait = pendingRecheck
		}
		c.queue.AddAfter(c.key(), wait)
	}
	if errors.Is(err, errGone) {
		return nil
	}
	return err
}

// gather reads the Rancher triple in effect and the one pending from the
// settings provider; known is false until the provider has read the
// Settings once.
func (c *Controller) gather() (in rancherenv.Input, known bool) {
	if s, ok := c.opts.Triples.(interface{ HasSynced() bool }); ok && !s.HasSynced() {
		return in, false
	}
	in.Version = c.opts.Version
	if p, ok := c.opts.Triples.(pendingTriples); ok {
		// One read for the triple in effect and the one pending: the
		// provider updates both under one lock.
		st := p.Status(settings.Rancher)
		in.Triple, in.OK = st.Effective, st.HasEffective
		if st.Pending != nil {
			in.PendingUntil = st.PendingAt
		}
	} else {
		in.Triple, in.OK = c.opts.Triples.Effective(settings.Rancher)
	}
	return in, true
}

// write is the one JSON patch of the rancher container's env that dec
// asks for. A Deployment gone meanwhile is no error.
func (c *Controller) write(ctx context.Context, d *appsv1.Deployment, dec rancherenv.Decision) error {
	body, err := rancherenv.PatchBody(d, dec)
	if err != nil {
		return err
	}
	_, err = c.opts.Client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.JSONPatchType, body,
		metav1.PatchOptions{FieldManager: own.FieldManager})
	if apierrors.IsNotFound(err) {
		return errGone
	}
	if err != nil {
		// A failed test op (the env list changed since the cached copy)
		// comes back here too: the work queue retries from the fresh copy.
		return fmt.Errorf("patch deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	c.lastWrite.Wrote(c.key(), d.ResourceVersion)
	return nil
}

// errGone: the Deployment was deleted between the cache and the write;
// its deletion ends the work, so sync returns no error for it.
var errGone = errors.New("deployment gone")

// report is the sync's one report step, after the write: the metrics
// RancherLeftAlone and SettingRefused{rancher, not-applicable}
// (TripleIgnored) for the decision; a written change as a log line, an
// Event and the write and restart counters; a problem once per distinct
// reason, as a log line and an Event on the Deployment. A failed write
// reports nothing more: the work queue retries it.
func (c *Controller) report(d *appsv1.Deployment, dec rancherenv.Decision, in rancherenv.Input, writeErr error) {
	for _, p := range []rancherenv.Problem{rancherenv.ProblemNoContainer, rancherenv.ProblemVersionUnknown, rancherenv.ProblemUnsupported, rancherenv.ProblemForeign, rancherenv.ProblemNotReady, rancherenv.ProblemUnsafeStrategy} {
		v := 0.0
		if p == dec.Problem {
			v = 1
		}
		metrics.RancherLeftAlone.WithLabelValues(string(p)).Set(v)
	}
	ignored := 0.0
	if TripleIgnored(dec, in) {
		ignored = 1
	}
	metrics.SettingRefused.WithLabelValues(string(settings.Rancher), metrics.RefusedNotApplicable).Set(ignored)
	if dec.Write && writeErr == nil {
		c.written(d, dec, in.Triple)
	}
	key := string(dec.Problem) + " " + dec.Reason
	if dec.Problem == rancherenv.ProblemNotReady {
		// The reason carries replica counts that move during a rollout:
		// one Event for the wait, not one per status update.
		key = string(dec.Problem)
	}
	c.mu.Lock()
	seen := c.said == key
	c.said = key
	c.mu.Unlock()
	if seen || dec.Problem == rancherenv.ProblemNone {
		return
	}
	if dec.Problem == rancherenv.ProblemNotReady {
		c.log.Info("rancher deployment write deferred", "deployment", d.Namespace+"/"+d.Name, "reason", dec.Reason)
		then := "; they are written once the Deployment is available and its rollout done"
		if dec.Pending {
			then = "; then the triple in effect is written, if the Deployment is still available and not mid-rollout"
		}
		c.event(d, corev1.EventTypeNormal, ReasonDeferred, "the CATTLE_ELECTION_* entries wait: "+dec.Reason+then)
		return
	}
	c.log.Warn("rancher deployment left alone", "deployment", d.Namespace+"/"+d.Name, "problem", dec.Problem, "reason", dec.Reason)
	c.event(d, corev1.EventTypeWarning, ReasonLeftAlone, "leasetune writes no CATTLE_ELECTION_* here: "+dec.Reason)
}

// written says a change that was written: every Rancher replica rolls.
func (c *Controller) written(d *appsv1.Deployment, dec rancherenv.Decision, t election.Timings) {
	metrics.Writes.WithLabelValues("rancher-deployment").Inc()
	metrics.Restarts.WithLabelValues(string(restart.RancherRollout)).Inc()
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	what := "CATTLE_ELECTION_* removed (Rancher's built-in 45s/30s/2s again)"
	if !dec.Remove {
		what = fmt.Sprintf("CATTLE_ELECTION_* set to %s", t)
	}
	msg := fmt.Sprintf("%s on the rancher container for the lock kube-system/cattle-controllers: this rolls every Rancher replica (%d), as the Deployment's rolling-update strategy allows", what, replicas)
	c.log.Info("rancher deployment env updated", "deployment", d.Namespace+"/"+d.Name, "timings", t.String(),
		"removed", dec.Remove, "replicas", replicas, "rancher", dec.Version.String())
	c.event(d, corev1.EventTypeNormal, ReasonUpdated, msg)
}

func (c *Controller) event(d *appsv1.Deployment, typ, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Event(d, typ, reason, msg)
	}
}
