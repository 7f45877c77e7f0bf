package fleetsettings

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// The Fleet Deployments' entries at Fleet's defaults, and a controller
// triple that differs from them.
var (
	fleetEnv = kit.Env("NAMESPACE=x", "CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RETRY_PERIOD=10s", "CATTLE_ELECTION_RENEW_DEADLINE=25s")
	agentEnv = kit.Env("FLEET_AGENT_ELECTION_LEASE_DURATION=30s", "FLEET_AGENT_ELECTION_RETRY_PERIOD=10s", "FLEET_AGENT_ELECTION_RENEW_DEADLINE=25s")
	five     = election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 5 * time.Second}
)

func newTestController(t *testing.T, tr settings.Triples, ctrl *gomock.Controller) (*Controller, *kfake.Clientset,
	*fake.MockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList], *fake.MockControllerInterface[*corev1.ConfigMap, *corev1.ConfigMapList]) {
	cs := kfake.NewSimpleClientset()
	deps := fake.NewMockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList](ctrl)
	cms := fake.NewMockControllerInterface[*corev1.ConfigMap, *corev1.ConfigMapList](ctrl)
	c := New(Options{Namespace: "cattle-fleet-system", RancherNamespace: "cattle-system", Channels: fakes.Channel(fleet.ChannelAgentManagement),
		Deployments: deps, ConfigMaps: cms, Client: cs, Triples: tr, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return c, cs, deps, cms
}

func gitjob(env []corev1.EnvVar) *appsv1.Deployment {
	return kit.Deployment("cattle-fleet-system", "gitjob", kit.WithContainer("gitjob", env...))
}

// TestDoNothing: a converged Deployment makes no API call at all.
func TestDoNothing(t *testing.T) {
	c, cs, _, _ := newTestController(t, fakes.FleetTriples(election.FleetDefaults, election.FleetDefaults), gomock.NewController(t))
	if err := c.syncDeployment(context.Background(), gitjob(fleetEnv)); err != nil {
		t.Fatal(err)
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d API calls for a converged Deployment: %v", n, cs.Actions())
	}
}

// TestOnePatch: a change is one JSON patch, and nothing else.
func TestOnePatch(t *testing.T) {
	c, cs, _, _ := newTestController(t, fakes.FleetTriples(five, election.FleetDefaults), gomock.NewController(t))
	d := gitjob(fleetEnv)
	if err := cs.Tracker().Add(d); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	if err := c.syncDeployment(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	acts := cs.Actions()
	if len(acts) != 1 {
		t.Fatalf("%d API calls, want one patch: %v", len(acts), acts)
	}
	p, ok := acts[0].(k8stesting.PatchAction)
	if !ok || p.GetPatchType() != types.JSONPatchType || p.GetName() != "gitjob" {
		t.Fatalf("got %s %s, want a JSON patch of gitjob", acts[0].GetVerb(), p.GetPatchType())
	}
}

// TestEnqueueAll: a triple change enqueues every Deployment of the Fleet
// namespace (from the cache, no API call) and rancher-config.
func TestEnqueueAll(t *testing.T) {
	ctrl := gomock.NewController(t)
	c, cs, deps, cms := newTestController(t, fakes.NewTriples(nil), ctrl)
	cache := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
	deps.EXPECT().Cache().Return(cache)
	cache.EXPECT().List("cattle-fleet-system", labels.Everything()).Return([]*appsv1.Deployment{gitjob(nil), kit.Deployment("", "helmops")}, nil)
	deps.EXPECT().Enqueue("cattle-fleet-system", "gitjob")
	deps.EXPECT().Enqueue("", "helmops")
	cms.EXPECT().Enqueue("cattle-system", fleetenv.RancherConfigName)
	c.EnqueueAll()
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d API calls", n)
	}
}

// TestAgentRedeploysAreCounted: a write of FLEET_AGENT_ELECTION_* on
// fleet-agentmanagement redeploys every fleet-agent, and the restart
// ledger counts them all; a write of the controller triple alone counts
// no agent.
func TestAgentRedeploysAreCounted(t *testing.T) {
	for _, c := range []struct {
		name       string
		tr         settings.Triples
		wantAgents float64
	}{
		{"agent triple", fakes.FleetTriples(election.FleetDefaults, five), 7},
		{"controller triple", fakes.FleetTriples(five, election.FleetDefaults), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctl, cs, _, _ := newTestController(t, c.tr, gomock.NewController(t))
			ctl.opts.Agents = func() int { return 7 }
			d := kit.Deployment("cattle-fleet-system", "fleet-controller",
				kit.WithContainer(fleet.AgentManagementContainer, append(append([]corev1.EnvVar{}, fleetEnv...), agentEnv...)...))
			if err := cs.Tracker().Add(d); err != nil {
				t.Fatal(err)
			}
			before := metrics.RestartTotals()
			if err := ctl.syncDeployment(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			after := metrics.RestartTotals()
			if got := after["fleet-agent"] - before["fleet-agent"]; got != c.wantAgents {
				t.Errorf("fleet-agent redeploys counted: %v, want %v", got, c.wantAgents)
			}
			if got := after["deployment-rollout"] - before["deployment-rollout"]; got != 1 {
				t.Errorf("rollouts counted: %v, want 1", got)
			}
		})
	}
}

// rancherConfig is cattle-system/rancher-config with fleet as its fleet
// values.
func rancherConfig(fleetValues string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-system", Name: fleetenv.RancherConfigName, ResourceVersion: "7"},
		Data: map[string]string{fleetenv.RancherConfigKey: fleetValues}}
}

// TestRancherConfigDoNothing: rancher-config at the triples in effect, one
// whose values leasetune leaves alone, and another ConfigMap make no API
// call at all.
func TestRancherConfigDoNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		tr   settings.Triples
		cm   *corev1.ConfigMap
	}{
		{"at Fleet's defaults, nothing set", fakes.FleetTriples(election.FleetDefaults, election.FleetDefaults), rancherConfig("apiServerURL: https://x\n")},
		{"the fleet values are not a mapping", fakes.FleetTriples(five, election.FleetDefaults), rancherConfig("- a list\n")},
		{"another ConfigMap", fakes.FleetTriples(five, election.FleetDefaults), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-system", Name: "other"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctl, cs, _, _ := newTestController(t, c.tr, gomock.NewController(t))
			if err := ctl.syncRancherConfig(context.Background(), c.cm); err != nil {
				t.Fatal(err)
			}
			if n := len(cs.Actions()); n != 0 {
				t.Errorf("%d API calls: %v", n, cs.Actions())
			}
		})
	}
}

// TestRancherConfigOnePatch: a controller triple that differs from
// Fleet's defaults is one merge patch of the fleet key, with the
// resourceVersion read, and nothing else.
func TestRancherConfigOnePatch(t *testing.T) {
	ctl, cs, _, _ := newTestController(t, fakes.FleetTriples(five, election.FleetDefaults), gomock.NewController(t))
	cm := rancherConfig("apiServerURL: https://x\n")
	if err := cs.Tracker().Add(cm); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	if err := ctl.syncRancherConfig(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	acts := cs.Actions()
	if len(acts) != 1 {
		t.Fatalf("%d API calls, want one patch: %v", len(acts), acts)
	}
	p, ok := acts[0].(k8stesting.PatchAction)
	if !ok || p.GetPatchType() != types.MergePatchType || p.GetName() != fleetenv.RancherConfigName ||
		!strings.Contains(string(p.GetPatch()), `"resourceVersion":"7"`) || !strings.Contains(string(p.GetPatch()), "retryPeriod: 5s") {
		t.Fatalf("got %s %s %s, want a merge patch of rancher-config at resourceVersion 7 with retryPeriod 5s", acts[0].GetVerb(), p.GetPatchType(), p.GetPatch())
	}
}

// registered is a controller made by Register with detect as its Detect,
// the one Deployment handler it registered (it must register exactly one)
// and its fake clientset holding gitjob at Fleet's defaults, the triple
// being five.
func registered(t *testing.T, detect func(context.Context, *appsv1.Deployment) error) (*Controller, *kfake.Clientset, func(string, *appsv1.Deployment) (*appsv1.Deployment, error)) {
	ctrl := gomock.NewController(t)
	cs := kfake.NewSimpleClientset()
	deps := fake.NewMockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList](ctrl)
	cms := fake.NewMockControllerInterface[*corev1.ConfigMap, *corev1.ConfigMapList](ctrl)
	var handler func(string, *appsv1.Deployment) (*appsv1.Deployment, error)
	deps.EXPECT().OnChange(gomock.Any(), "leasetune-fleet-env", gomock.Any()).Times(1).Do(
		func(_ context.Context, _ string, h func(string, *appsv1.Deployment) (*appsv1.Deployment, error)) {
			handler = h
		})
	cms.EXPECT().OnChange(gomock.Any(), "leasetune-rancher-config", gomock.Any()).Times(1)
	c := Register(context.Background(), Options{Namespace: "cattle-fleet-system", RancherNamespace: "cattle-system",
		Channels: fakes.Channel(fleet.ChannelAgentManagement), Deployments: deps, ConfigMaps: cms, Client: cs,
		Triples: fakes.FleetTriples(five, election.FleetDefaults), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Detect: detect})
	if err := cs.Tracker().Add(gitjob(fleetEnv)); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	return c, cs, handler
}

// TestOneHandlerDetectsFirst: Register puts one handler on the Deployment
// controller (lasso races when a second one is removed at a context's end,
// Options.Detect); it runs Detect on the Deployment before its own write,
// and the write happens whatever Detect returns, its error reported.
func TestOneHandlerDetectsFirst(t *testing.T) {
	var detected []int // the API calls made before each Detect
	detectErr := errors.New("record write refused")
	var cs *kfake.Clientset
	_, cs, handler := registered(t, func(context.Context, *appsv1.Deployment) error {
		detected = append(detected, len(cs.Actions()))
		return detectErr
	})
	_, err := handler("cattle-fleet-system/gitjob", gitjob(fleetEnv))
	if !errors.Is(err, detectErr) {
		t.Errorf("handler error %v, want Detect's", err)
	}
	if len(detected) != 1 || detected[0] != 0 {
		t.Errorf("Detect ran %d times, after %v API calls; want once, before any", len(detected), detected)
	}
	if acts := cs.Actions(); len(acts) != 1 || acts[0].GetVerb() != "patch" {
		t.Errorf("API calls %v, want the one patch despite Detect's error", acts)
	}
}

// TestDetectErrorOwesNothing: a triple change owes each Fleet Deployment a
// sync; a Detect error does not keep one owed once its write is done (the
// propagation gauges, and the alert on them, would stay up).
func TestDetectErrorOwesNothing(t *testing.T) {
	c, _, handler := registered(t, func(context.Context, *appsv1.Deployment) error { return errors.New("record write refused") })
	c.beginPropagation(time.Now(), []string{"cattle-fleet-system/gitjob"})
	if _, err := handler("cattle-fleet-system/gitjob", gitjob(fleetEnv)); err == nil {
		t.Fatal("want Detect's error")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owed["cattle-fleet-system/gitjob"] {
		t.Errorf("gitjob still owed after its write: %v", c.owed)
	}
}
