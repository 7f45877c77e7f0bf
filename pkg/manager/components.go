package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	lassocache "github.com/rancher/lasso/pkg/cache"
	lassoclient "github.com/rancher/lasso/pkg/client"
	"github.com/rancher/wrangler/v2/pkg/generated/controllers/apps"
	appscontrollers "github.com/rancher/wrangler/v2/pkg/generated/controllers/apps/v1"
	"github.com/rancher/wrangler/v2/pkg/generated/controllers/core"
	corecontrollers "github.com/rancher/wrangler/v2/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v2/pkg/generic"
	"github.com/rancher/wrangler/v2/pkg/schemes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/agentenv/patch"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	statuscontroller "leasetune.io/leasetune/pkg/controllers/electionstatus"
	"leasetune.io/leasetune/pkg/controllers/fleetchannel"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/controllers/rancherenv"
	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	mgmtv3 "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

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
func runComponents(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, hs *health, log *slog.Logger, ix *index.Index) error {
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
func runComponentsOnce(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, hs *health, log *slog.Logger, ix *index.Index, crdGone func()) error {
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
	cf, rf, err := rancherFactories(rc, cfg)
	if err != nil {
		return err
	}
	// The channel is detected first in fleetsettings' sync of each
	// version of the fleet-controller Deployment.
	fc, err := fleetchannel.Load(ctx, fleetchannel.Options{
		Namespace: cfg.FleetNamespace, StateNamespace: cfg.Namespace, Override: cfg.ChannelOverride,
		Client: cs, Log: log,
	})
	if err != nil {
		return err
	}
	fleetsettings.Register(ctx, fleetsettings.Options{
		Namespace: cfg.FleetNamespace, RancherNamespace: cfg.RancherNamespace, Channels: fc, Detect: fc.Sync,
		Deployments: af.Apps().V1().Deployment(), ConfigMaps: cf.Core().V1().ConfigMap(),
		Client: cs, Triples: provider, Recorder: recorder, Log: log, CheckAgentTriple: judge, Agents: agentsOf(ix),
	})
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

	// agentenv needs the fleet Cluster kind; wait for Fleet's CRDs.
	var isRancher bool
	err = wait.PollUntilContextCancel(ctx, 30*time.Second, true, func(context.Context) (bool, error) {
		if !served(dc, fleet.ClusterGVR) {
			log.Info("waiting for the clusters.fleet.cattle.io CRD")
			return false, nil
		}
		isRancher = served(dc, rancher.ProvisioningClusterGVR) && served(dc, rancher.ManagementClusterGVR)
		return true, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	log.Info("agentenv starting", "rancher", isRancher)
	var shared cache.SharedIndexInformer
	if ix != nil {
		shared = ix.Informer()
	}
	stream, err := slim.NewRESTClient(rc)
	if err != nil {
		return err
	}
	// Beside Rancher, agentenv routes by the Rancher version its Deployment
	// shows and the ElectionStatus counts its replicas: both share
	// rancherenv's informer of that Deployment (one watch by name), started
	// here when rancherenv is off.
	var rancherDeps cache.SharedIndexInformer
	if isRancher || cfg.RancherEnv {
		rancherDeps = rf.Apps().V1().Deployment().Informer()
		if err := startFactory(ctx, rf.Start); err != nil {
			if ctx.Err() != nil {
				return nil // stopping
			}
			return err
		}
	}
	ac := agentenvcontroller.New(agentenvcontroller.Options{ //nolint:contextcheck // client-go v0.28 list-watch functions take no context; Run stops the informers with ctx
		Fleet: shared, Patcher: patch.RawPatcher{REST: stream}, Stream: stream, RancherDeployments: rancherDeps,
		Client: dynamic.NewForConfigOrDie(rc), Rancher: isRancher, Triples: provider, Channels: fc,
		RancherNamespace: cfg.RancherNamespace, RancherDeployment: cfg.RancherDeployment, RancherVersion: cfg.RancherVersion,
		Recorder: recorder, Log: log, Workers: cfg.Workers, ClustersPerMinute: cfg.AgentRolloutPerMinute,
	})
	startStatus(ctx, rc, dc, cfg, log, statusSources{settings: mf.Management().V3().Setting(), fleetDeployments: af.Apps().V1().Deployment(),
		configMaps: cf.Core().V1().ConfigMap(), rancher: rf.Apps().V1().Deployment(), rancherWatched: rancherDeps != nil,
		provider: provider, channels: fc, agents: ac})
	return ac.Run(ctx)
}

// rancherFactories are the factories of what the leader reads in the
// Rancher namespace, each by name (a field selector keeps everything else
// out of the caches): rancher-config, and the Rancher Deployment (its
// CATTLE_ELECTION_* entries for the lock kube-system/cattle-controllers;
// the version and replicas agentenv and the ElectionStatus read).
func rancherFactories(rc *rest.Config, cfg Config) (*core.Factory, *apps.Factory, error) {
	clients, err := lassoclient.NewSharedClientFactory(rc, &lassoclient.SharedClientFactoryOptions{Scheme: schemes.All})
	if err != nil {
		return nil, nil, err
	}
	byName := func(name string) *generic.FactoryOptions {
		return &generic.FactoryOptions{SharedCacheFactory: lassocache.NewSharedCachedFactory(clients, &lassocache.SharedCacheFactoryOptions{
			DefaultNamespace: cfg.RancherNamespace,
			DefaultTweakList: func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			},
		})}
	}
	cf, err := core.NewFactoryFromConfigWithOptions(rc, byName(fleetenv.RancherConfigName))
	if err != nil {
		return nil, nil, err
	}
	rf, err := apps.NewFactoryFromConfigWithOptions(rc, byName(rancherDeployment(cfg)))
	if err != nil {
		return nil, nil, err
	}
	return cf, rf, nil
}

// statusSources are the leader's controllers and caches the ElectionStatus
// is computed from.
type statusSources struct {
	settings         mgmtv3.SettingController
	fleetDeployments appscontrollers.DeploymentController
	configMaps       corecontrollers.ConfigMapController
	// rancher watches the Rancher Deployment by name; rancherWatched says
	// whether its informer runs.
	rancher        appscontrollers.DeploymentController
	rancherWatched bool
	provider       *settings.Provider
	channels       *fleetchannel.Controller
	agents         *agentenvcontroller.Controller
}

// startStatus starts the ElectionStatus controller
// (pkg/controllers/electionstatus) on the leader, reading the caches and
// the memory of the other components (it makes no read of its own but of
// its object), recomputed when any of them changes; it stops with ctx.
// Where its CRD is not served yet (an upgrade from a chart without it:
// Helm installs crds/ on install only), it runs once it is: the CRD is
// watched by name until then (waitForStatusCRD).
func startStatus(ctx context.Context, rc *rest.Config, dc discovery.DiscoveryInterface, cfg Config, log *slog.Logger, src statusSources) {
	sc := statuscontroller.New(statuscontroller.Options{
		Client: dynamic.NewForConfigOrDie(rc), Log: log,
		Inventory: inventory.Options{Namespace: cfg.Namespace, FleetNamespace: cfg.FleetNamespace,
			RancherNamespace: cfg.RancherNamespace, RancherDeployment: rancherDeployment(cfg)},
		Compute: electionstatus.Options{RancherEnv: cfg.RancherEnv, EnvSet: func(d settings.Definition) bool {
			_, set := cfg.lookupEnv()(d.EnvVar())
			return set
		}},
		Sources: statuscontroller.Sources{
			Settings: func() []v3.Setting {
				l, _ := src.settings.Cache().List(labels.Everything())
				out := make([]v3.Setting, 0, len(l))
				for _, o := range l {
					out = append(out, *o)
				}
				return out
			},
			Status:  src.provider.Status,
			Channel: src.channels.Evidence,
			FleetDeployments: func() []*appsv1.Deployment {
				l, _ := src.fleetDeployments.Cache().List(cfg.FleetNamespace, labels.Everything())
				return l
			},
			RancherConfig: func() *corev1.ConfigMap {
				cm, _ := src.configMaps.Cache().Get(cfg.RancherNamespace, fleetenv.RancherConfigName)
				return cm
			},
			Rancher: func() *appsv1.Deployment {
				if !src.rancherWatched {
					return nil
				}
				d, _ := src.rancher.Cache().Get(cfg.RancherNamespace, rancherDeployment(cfg))
				return d
			},
			Clusters: src.agents.Clusters,
		},
	})
	informers := []cache.SharedIndexInformer{src.settings.Informer(), src.fleetDeployments.Informer(), src.configMaps.Informer()}
	if src.rancherWatched {
		informers = append(informers, src.rancher.Informer())
	}
	for _, inf := range informers {
		_, _ = inf.AddEventHandler(sc.Handler())
	}
	src.agents.OnClusterChange(sc.Handler())
	src.provider.OnChange(sc.Changed)
	src.channels.OnChannelChange(sc.Changed)
	go func() {
		if !served(dc, statuscontroller.GVR) {
			log.Warn("the ElectionStatus CRD electionstatuses.leasetune.io is not installed: leasetune's status is not published until it is (the chart installs it; the Rancher UI page needs it)")
			defs := apiextclient.NewForConfigOrDie(rc).ApiextensionsV1().CustomResourceDefinitions()
			if err := waitForStatusCRD(ctx, dc, defs, settingCRDPoll, log); err != nil {
				sc.ShutDown() // ctx ended
				return
			}
			log.Info("the ElectionStatus CRD electionstatuses.leasetune.io is installed: publishing the status")
		}
		if err := sc.Run(ctx); err != nil {
			log.Error("the ElectionStatus is not kept", "error", err)
		}
	}()
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
