package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	lassocache "github.com/rancher/lasso/pkg/cache"
	lassoclient "github.com/rancher/lasso/pkg/client"
	"github.com/rancher/wrangler/v2/pkg/generated/controllers/apps"
	"github.com/rancher/wrangler/v2/pkg/generated/controllers/core"
	"github.com/rancher/wrangler/v2/pkg/generic"
	"github.com/rancher/wrangler/v2/pkg/schemes"
	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/controllers/rancherenv"
	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// lockRequestTimeout bounds each request on the Lease.
const lockRequestTimeout = 5 * time.Second

// UserAgent identifies the project's requests; the API server also uses it
// as the field manager of writes that name none.
const UserAgent = "leasetune"

// Run runs the project until ctx ends (then it stops gracefully, releases
// its Lease and returns nil) or leadership is lost (an error). Only the
// leader runs the provider and the controllers; every replica serves the
// health and metrics endpoints.
func Run(ctx context.Context, rc *rest.Config, cfg Config, log *slog.Logger) error {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst, rc.UserAgent = cfg.QPS, cfg.Burst, UserAgent
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	hs := newHealth()
	ready := &hs.ready
	stopServers, err := serve(cfg, hs, log)
	if err != nil {
		return err
	}
	defer stopServers()
	stopUI, err := serveUI(cfg, hs, log) // the Rancher UI bundle, on every replica
	if err != nil {
		return err
	}
	defer stopUI()

	if cfg.InstallCRDs {
		// A failure here (the apiserver down during a restart) is no reason
		// to exit: the leader makes the CRD before its components start,
		// retrying while /readyz says why (waitForSettingCRD).
		created, err := crds.EnsureSetting(ctx, apiextclient.NewForConfigOrDie(rc))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("install the Setting CRD; the leader tries again before it starts the controllers", "error", err)
		case created:
			log.Info("installed the Setting CRD (no Rancher here)")
		}
	}

	ix, err := startIndex(ctx, rc, cs)
	if err != nil {
		return err
	}
	judge := judgeWith(ix)
	if cfg.WebhookAddr != "" {
		wait, err := serveTLS(ctx, rc, cs, cfg, log, judge, hs)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		defer wait()
	}

	components := func(ctx context.Context) error { return runComponents(ctx, rc, cs, cfg, hs, log, ix) }
	if !cfg.LeaderElection {
		return components(ctx)
	}
	if err := cfg.Timings.Validate(); err != nil {
		return fmt.Errorf("own leader election: %w", err)
	}
	// running tracks the components; once le.Run has returned, a late
	// OnStartedLeading goroutine must not start them.
	var (
		mu      sync.Mutex
		running sync.WaitGroup
		done    bool
		compErr error
	)
	lostCtx, lost := context.WithCancel(context.Background())
	defer lost()
	// The lock's own client gives up on a request after lockRequestTimeout:
	// client-go's release on a stop has no deadline of its own, and a
	// kube-apiserver that is going away (as under `make run`'s Ctrl-C)
	// would hold the stop for half a minute.
	lockCfg := rest.CopyConfig(rc)
	lockCfg.Timeout = lockRequestTimeout
	lockClient, err := kubernetes.NewForConfig(lockCfg)
	if err != nil {
		return err
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.LeaseName},
			Client:     lockClient.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration:   cfg.Timings.LeaseDuration,
		RenewDeadline:   cfg.Timings.RenewDeadline,
		RetryPeriod:     cfg.Timings.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if done || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				running.Add(1)
				mu.Unlock()
				defer running.Done()
				// The components stop when the lease is lost or when ctx
				// ends; in the latter case the lease is released only
				// after they have stopped, so no two leaders ever write.
				cctx, ccancel := context.WithCancel(lctx)
				defer ccancel()
				defer context.AfterFunc(ctx, ccancel)()
				log.Info("leading", "lease", cfg.Namespace+"/"+cfg.LeaseName, "identity", cfg.Identity, "timings", cfg.Timings.String())
				if err := components(cctx); err != nil && cctx.Err() == nil {
					compErr = err
					lost()
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					log.Error("leadership lost", "identity", cfg.Identity)
					lost()
				}
			},
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.Info("following", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	ready.Store(true) // followers are ready: they serve the webhook and the API, they do not write
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-lostCtx.Done():
		case <-ctx.Done():
			mu.Lock()
			done = true
			mu.Unlock()
			running.Wait() // the components stop first (ctx ended them) ...
		}
		cancel() // ... then le.Run releases the Lease and returns
	}()
	le.Run(runCtx) // returns once the lease is released or lost
	mu.Lock()
	done = true
	mu.Unlock()
	running.Wait()
	switch {
	case compErr != nil:
		return compErr
	case ctx.Err() == nil:
		return errors.New("leadership lost")
	}
	log.Info("stopped")
	return nil
}

// AgentJudge judges a change of the global agent triple from cur to next by
// its effect on every agent (agentenv.Index.Judge): an error names the
// clusters it would break. Nil when there are no fleet Clusters to judge.
type AgentJudge func(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) error

// startIndex starts, on every replica, the index of the fleet Clusters
// that the webhook and the fleetsettings controller judge agent triple
// changes with, and whose informer the agentenv controller shares on the
// leader; nil without the fleet Cluster kind. Errors: rc is a config no
// REST client can be made of.
func startIndex(ctx context.Context, rc *rest.Config, cs kubernetes.Interface) (*agentenv.Index, error) {
	if !served(cs.Discovery(), agentenv.FleetClusterGVR) {
		return nil, nil
	}
	stream, err := agentenv.NewRESTClient(rc)
	if err != nil {
		return nil, err
	}
	ix := agentenv.NewIndex(dynamic.NewForConfigOrDie(rc), stream)
	ix.Start(ctx)
	return ix, nil
}

// agentsOf counts the fleet Clusters in ix's cache, one fleet-agent each
// (nil when ix is).
func agentsOf(ix *agentenv.Index) func() int {
	if ix == nil {
		return nil
	}
	return func() int { return len(ix.Informer().GetStore().ListKeys()) }
}

// judgeWith is the AgentJudge over ix (nil when ix is).
func judgeWith(ix *agentenv.Index) AgentJudge {
	if ix == nil {
		return nil
	}
	return func(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) error {
		broken, err := ix.Judge(ctx, cur, next, ch)
		if err != nil {
			return err
		}
		if len(broken) > 0 {
			return agentenv.BrokenError(next, broken)
		}
		return nil
	}
}

// rancherDeployment is the Rancher Deployment's name (default rancher).
func rancherDeployment(cfg Config) string {
	if cfg.RancherDeployment == "" {
		return rancher.DefaultDeployment
	}
	return cfg.RancherDeployment
}

// errSettingCRDGone is the cause with which the components are stopped when
// the Setting CRD is deleted under them.
var errSettingCRDGone = errors.New("the Setting CRD settings.management.cattle.io was deleted")

// runComponents runs the provider and the controllers until ctx ends (then
// it returns nil) or they fail (their error). They need the Setting CRD:
// until it is served they do not start (waitForSettingCRD), and when it is
// deleted while they run (their Setting informer's list or watch answers
// 404 and discovery no longer serves settings.management.cattle.io) they
// are stopped, the replica is not ready and says why, and they start
// afresh, restoring the Settings with the users' remembered values, once
// it is back: with cfg.InstallCRDs leasetune makes it again itself. Their
// informers would otherwise retry a list that cannot succeed, silently, and
// the provider a create that 404s.
func runComponents(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, hs *health, log *slog.Logger, ix *agentenv.Index) error {
	dc := discovery.NewDiscoveryClientForConfigOrDie(rc)
	deleted := false
	for {
		if err := waitForSettingCRD(ctx, dc, rc, cfg, hs, log, deleted); err != nil {
			return nil // stopping
		}
		if deleted {
			log.Info("the Setting CRD is back; starting the controllers again")
		}
		cctx, stop := context.WithCancelCause(ctx)
		err := runComponentsOnce(cctx, rc, cs, cfg, hs, log, ix, func() { stop(errSettingCRDGone) })
		gone := errors.Is(context.Cause(cctx), errSettingCRDGone)
		stop(nil)
		if ctx.Err() != nil {
			return nil
		}
		if !gone && (err == nil || served(dc, settingsGVR)) {
			return err
		}
		// Gone, or a start-up step failed while it is not served.
		hs.ready.Store(false)
		deleted = true
		if gone {
			log.Warn("the Setting CRD settings.management.cattle.io was deleted; the controllers are stopped until it is back", "install-crds", cfg.InstallCRDs)
		} else {
			log.Warn("the controllers stopped while the Setting CRD settings.management.cattle.io is not served; they start again once it is", "install-crds", cfg.InstallCRDs, "error", err)
		}
	}
}

// settingsGVR is the resource of the Setting CRD.
var settingsGVR = v3.SchemeGroupVersion.WithResource("settings")

// runComponentsOnce runs the provider and the controllers until ctx ends;
// it calls crdGone (which must end ctx) when the Setting informer finds
// the Setting CRD no longer served.
func runComponentsOnce(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, hs *health, log *slog.Logger, ix *agentenv.Index, crdGone func()) error {
	judge := judgeWith(ix)
	ready := &hs.ready
	b := record.NewBroadcaster()
	defer b.Shutdown()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	recorder := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"})

	mf, err := management.NewFactoryFromConfig(rc)
	if err != nil {
		return err
	}
	// The Setting informer's list or watch answers 404 once the CRD is
	// gone (the apiserver ends the watches of a deleted CRD's storage);
	// discovery confirms it, so that no other 404 stops the components.
	dc := discovery.NewDiscoveryClientForConfigOrDie(rc)
	if err := mf.Management().V3().Setting().Informer().SetWatchErrorHandler(func(r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(r, err)
		if apierrors.IsNotFound(err) && !served(dc, settingsGVR) {
			crdGone()
		}
	}); err != nil {
		return err
	}
	provider := settings.NewProvider(settings.ProviderOptions{
		Settings: mf.Management().V3().Setting(), ConfigMaps: cs.CoreV1(), Namespace: cfg.Namespace,
		Recorder: recorder, LookupEnv: cfg.LookupEnv, Log: log, Settle: cfg.Settle,
	})
	if err := provider.Register(ctx); err != nil {
		return err
	}
	af, err := apps.NewFactoryFromConfigWithOptions(rc, &generic.FactoryOptions{Namespace: cfg.FleetNamespace})
	if err != nil {
		return err
	}
	// Of the Rancher namespace only rancher-config is read: a field
	// selector keeps every other ConfigMap out of the cache.
	clients, err := lassoclient.NewSharedClientFactory(rc, &lassoclient.SharedClientFactoryOptions{Scheme: schemes.All})
	if err != nil {
		return err
	}
	cf, err := core.NewFactoryFromConfigWithOptions(rc, &generic.FactoryOptions{
		SharedCacheFactory: lassocache.NewSharedCachedFactory(clients, &lassocache.SharedCacheFactoryOptions{
			DefaultNamespace: cfg.RancherNamespace,
			DefaultTweakList: func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", fleetsettings.RancherConfigName).String()
			},
		}),
	})
	if err != nil {
		return err
	}
	fs, err := fleetsettings.Register(ctx, fleetsettings.Options{
		Namespace: cfg.FleetNamespace, RancherNamespace: cfg.RancherNamespace, StateNamespace: cfg.Namespace,
		ChannelOverride: cfg.ChannelOverride, Deployments: af.Apps().V1().Deployment(), ConfigMaps: cf.Core().V1().ConfigMap(),
		Client: cs, Triples: provider, Recorder: recorder, Log: log, CheckAgentTriple: judge, Agents: agentsOf(ix),
	})
	if err != nil {
		return err
	}
	// The Rancher Deployment, by name: its CATTLE_ELECTION_* entries for
	// the lock kube-system/cattle-controllers (the rancher-leader-election-*
	// settings).
	rf, err := apps.NewFactoryFromConfigWithOptions(rc, &generic.FactoryOptions{
		SharedCacheFactory: lassocache.NewSharedCachedFactory(clients, &lassocache.SharedCacheFactoryOptions{
			DefaultNamespace: cfg.RancherNamespace,
			DefaultTweakList: func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", rancherDeployment(cfg)).String()
			},
		}),
	})
	if err != nil {
		return err
	}
	starts := []func(context.Context, int) error{mf.Start, af.Start, cf.Start}
	if cfg.RancherEnv {
		rancherenv.Register(ctx, rancherenv.Options{
			Namespace: cfg.RancherNamespace, Name: rancherDeployment(cfg), Deployments: rf.Apps().V1().Deployment(),
			Client: cs, Triples: provider, Version: cfg.RancherVersion, Recorder: recorder, Log: log,
		})
		starts = append(starts, rf.Start)
	}
	for _, start := range starts {
		if err := startFactory(ctx, start); err != nil {
			if ctx.Err() != nil {
				return nil // stopping
			}
			return err
		}
	}
	ready.Store(true)
	runUIPlugin(ctx, rc, cfg, log) // the UIPlugin, while its CRD exists (Rancher)

	// agentenv needs the fleet Cluster kind; wait for Fleet's CRDs.
	var rancher bool
	err = wait.PollUntilContextCancel(ctx, 30*time.Second, true, func(context.Context) (bool, error) {
		if !served(dc, agentenv.FleetClusterGVR) {
			log.Info("waiting for the clusters.fleet.cattle.io CRD")
			return false, nil
		}
		rancher = served(dc, agentenv.ProvisioningClusterGVR) && served(dc, agentenv.ManagementClusterGVR)
		return true, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	log.Info("agentenv starting", "rancher", rancher)
	var shared cache.SharedIndexInformer
	if ix != nil {
		shared = ix.Informer()
	}
	stream, err := agentenv.NewRESTClient(rc)
	if err != nil {
		return err
	}
	// Beside Rancher, agentenv routes by the Rancher version its Deployment
	// shows: it shares rancherenv's informer of that Deployment (one watch
	// by name), started here when rancherenv is off.
	var rancherDeps cache.SharedIndexInformer
	if rancher && !cfg.RancherVersion.Known {
		rancherDeps = rf.Apps().V1().Deployment().Informer()
		if err := startFactory(ctx, rf.Start); err != nil {
			if ctx.Err() != nil {
				return nil // stopping
			}
			return err
		}
	}
	ac := agentenv.New(agentenv.Options{
		Fleet: shared, Patcher: agentenv.RawPatcher{REST: stream}, Stream: stream, RancherDeployments: rancherDeps,
		Client: dynamic.NewForConfigOrDie(rc), Rancher: rancher, Triples: provider, Channels: fs,
		RancherNamespace: cfg.RancherNamespace, RancherDeployment: cfg.RancherDeployment, RancherVersion: cfg.RancherVersion,
		Recorder: recorder, Log: log, Workers: cfg.Workers, ClustersPerMinute: cfg.AgentRolloutPerMinute,
	})
	return ac.Run(ctx)
}

// settingCRDPoll is how often waitForSettingCRD looks for the Setting CRD.
const settingCRDPoll = 10 * time.Second

// waitForSettingCRD returns nil once the Setting CRD is served, or ctx's
// error when ctx ends first. Until then the replica is not ready and
// /readyz says why ("Setting CRD: ..."): with cfg.InstallCRDs it makes the
// CRD, and tries again every settingCRDPoll when that fails; without, it
// waits for someone to install it (Rancher, or a restart with
// --install-crds), logging that once. deleted says the CRD was deleted
// while the controllers ran (rather than never installed). A replica that
// exited instead would crash-loop.
func waitForSettingCRD(ctx context.Context, dc discovery.DiscoveryInterface, rc *rest.Config, cfg Config, hs *health, log *slog.Logger, deleted bool) error {
	state := "is not installed"
	if deleted {
		state = "was deleted while the controllers ran; they are stopped until it is back"
	}
	said := false
	defer hs.wait(readySettingCRD, "")
	for {
		if served(dc, settingsGVR) {
			return nil
		}
		next := settingCRDPoll
		var why string
		if cfg.InstallCRDs {
			created, err := crds.EnsureSetting(ctx, apiextclient.NewForConfigOrDie(rc))
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				why = fmt.Sprintf("settings.management.cattle.io %s, and making it failed: %v; trying again in %s", state, err, next)
				log.Error("install the Setting CRD", "error", err, "in", next.String())
			default:
				if created {
					log.Info("installed the Setting CRD", "again", deleted)
				}
				next = time.Second // established; discovery follows in a moment
				why = fmt.Sprintf("settings.management.cattle.io %s; made it, waiting for it to be served", state)
			}
		} else {
			fix := "install Rancher"
			if deleted {
				fix = "restart Rancher (it makes its CRDs at its start) or kubectl apply -f pkg/crds/setting.yaml"
			}
			why = fmt.Sprintf("settings.management.cattle.io %s: %s, or run with --install-crds (chart value installCRDs=true); waiting for it", state, fix)
			if !said {
				log.Warn("waiting for the Setting CRD", "reason", why)
				said = true
			}
		}
		hs.wait(readySettingCRD, why)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(next):
		}
	}
}

// startFactory starts a wrangler factory, but returns as soon as ctx ends:
// lasso's start-up health check (cache.healthcheck.pingUntilGood) keeps
// retrying with a cancelled context, which would hold up a SIGTERM that
// arrives during start-up forever.
func startFactory(ctx context.Context, start func(context.Context, int) error) error {
	errc := make(chan error, 1)
	go func() { errc <- start(ctx, 2) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// served reports whether the API server serves the resource.
func served(dc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	l, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range l.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

// serve starts the health and metrics servers; the returned function
// stops them. A server that stops by itself (its listener failed) is
// logged and makes /healthz fail, naming it.
func serve(cfg Config, hs *health, log *slog.Logger) (func(), error) {
	var servers []*http.Server
	start := func(what, addr string, h http.Handler) error {
		if addr == "" {
			return nil
		}
		ln, err := cfg.listen(addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(what+" stopped", "addr", addr, "error", err)
				hs.fail(what, err.Error())
			}
		}()
		return nil
	}
	health := http.NewServeMux()
	health.HandleFunc("/healthz", hs.healthz)
	health.HandleFunc("/readyz", hs.readyz)
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	stop := func() {
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.Shutdown(ctx)
			cancel()
		}
	}
	if err := start("health server", cfg.HealthAddr, health); err != nil {
		return stop, err
	}
	if err := start(healthMetricsServer, cfg.MetricsAddr, metricsMux); err != nil {
		stop()
		return stop, err
	}
	return stop, nil
}
