package fleetsettings_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/rancher/wrangler/v2/pkg/generated/controllers/apps"
	"github.com/rancher/wrangler/v2/pkg/generated/controllers/core"
	"github.com/rancher/wrangler/v2/pkg/generic"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/controllers/fleetchannel"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// versions are the Fleet releases of the fixtures.
var versions = []string{"v0.9.9", "v0.12.0", "v0.14.10", "v0.15.6", "v0.16.1"}

// wantChannel is the agent channel each fixture must be detected as.
var wantChannel = map[string]fleet.AgentChannel{
	"v0.9.9":   fleet.ChannelClusterEnvV09,
	"v0.12.0":  fleet.ChannelFixedV012,
	"v0.14.10": fleet.ChannelAgentManagement,
	"v0.15.6":  fleet.ChannelAgentManagement,
	"v0.16.1":  fleet.ChannelAgentManagement,
}

// env is the namespaces one test uses.
type env struct {
	fleetNS, rancherNS, stateNS string
}

func newEnv(t *testing.T) env {
	return env{fleetNS: cp.Namespace(t), rancherNS: cp.Namespace(t), stateNS: cp.Namespace(t)}
}

// running is a started controller, with the channel controller it writes
// by (its Detect, as the manager wires it).
type running struct {
	*fleetsettings.Controller
	channels *fleetchannel.Controller
	writes   *framework.Recorder
	cancel   context.CancelFunc
}

func start(t *testing.T, e env, triples settings.Triples, override fleet.AgentChannel) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := rest.CopyConfig(cp.Config)
	wc := framework.Record(cfg)
	client := kubernetes.NewForConfigOrDie(cfg)
	af, err := apps.NewFactoryFromConfigWithOptions(cp.Config, &generic.FactoryOptions{Namespace: e.fleetNS})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := core.NewFactoryFromConfigWithOptions(cp.Config, &generic.FactoryOptions{Namespace: e.rancherNS})
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ch, err := fleetchannel.Load(ctx, fleetchannel.Options{Namespace: e.fleetNS, StateNamespace: e.stateNS, Override: override,
		Client: client, Log: log})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := fleetsettings.Register(ctx, fleetsettings.Options{
		Recorder:  b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "leasetune"}),
		Namespace: e.fleetNS, RancherNamespace: e.rancherNS, Channels: ch, Detect: ch.Sync,
		Deployments: af.Apps().V1().Deployment(), ConfigMaps: cf.Core().V1().ConfigMap(),
		Client: client, Triples: triples, Log: log,
	})
	if err := af.Start(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := cf.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r := &running{Controller: c, channels: ch, writes: wc, cancel: cancel}
	t.Cleanup(cancel)
	return r
}

func get(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := cp.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hasTriple reports whether every Fleet container of d carries ctrl as
// CATTLE_ELECTION_*, and fleet-agentmanagement agent as FLEET_AGENT_ELECTION_*
// when agent is not nil.
func hasTriple(d *appsv1.Deployment, ctrl election.Timings, agent *election.Timings) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		if !fleet.IsFleetContainer(c.Name) {
			continue
		}
		got, found, err := election.CattlePrefix.FromEnv(c.Env)
		if err != nil || !found || got != ctrl {
			return false
		}
		if c.Name == fleet.AgentManagementContainer && agent != nil {
			got, found, err := election.FleetAgentPrefix.FromEnv(c.Env)
			if err != nil || !found || got != *agent {
				return false
			}
		}
	}
	return true
}

// ownedEnv leaves out, for kit.Stripped, the env entries the project owns
// on a Fleet Deployment: CATTLE_ELECTION_* of every Fleet container and
// FLEET_AGENT_ELECTION_* of fleet-agentmanagement.
var ownedEnv = kit.WithoutEnv(func(container, name string) bool {
	return fleet.IsFleetContainer(container) && (election.CattlePrefix.Owns(name) ||
		(container == fleet.AgentManagementContainer && election.FleetAgentPrefix.Owns(name)))
})

// envNames lists a container's env names in order.
func envNames(d *appsv1.Deployment, container string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			var n []string
			for _, e := range c.Env {
				n = append(n, e.Name)
			}
			return strings.Join(n, ",")
		}
	}
	return ""
}
