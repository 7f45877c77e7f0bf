package fleetsettings

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// newTestController is a controller whose writes go to a fake clientset
// and whose enqueues are recorded (the returned queue); its caches are
// the returned mocks.
func newTestController(t *testing.T, tr settings.Triples, ctrl *gomock.Controller) (*Controller, *kfake.Clientset,
	*fake.MockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList], *fake.MockControllerInterface[*corev1.ConfigMap, *corev1.ConfigMapList]) {
	c, cs, deps, cms, _ := newQueuedController(t, tr, ctrl)
	return c, cs, deps, cms
}

func newQueuedController(t *testing.T, tr settings.Triples, ctrl *gomock.Controller) (*Controller, *kfake.Clientset,
	*fake.MockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList], *fake.MockControllerInterface[*corev1.ConfigMap, *corev1.ConfigMapList], *fakes.Queue[Key]) {
	cs := kfake.NewSimpleClientset()
	deps := fake.NewMockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList](ctrl)
	cms := fake.NewMockControllerInterface[*corev1.ConfigMap, *corev1.ConfigMapList](ctrl)
	c := New(Options{Namespace: "cattle-fleet-system", RancherNamespace: "cattle-system", Channels: fakes.Channel(fleet.ChannelAgentManagement),
		Deployments: deps, ConfigMaps: cms, Client: cs, Triples: tr, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(c.loop.ShutDown)
	q := &fakes.Queue[Key]{}
	c.queue = q
	return c, cs, deps, cms, q
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
	c, cs, deps, _, q := newQueuedController(t, fakes.NewTriples(nil), ctrl)
	cache := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
	deps.EXPECT().Cache().Return(cache)
	cache.EXPECT().List("cattle-fleet-system", labels.Everything()).Return([]*appsv1.Deployment{gitjob(nil), kit.Deployment("cattle-fleet-system", "helmops")}, nil)
	c.EnqueueAll()
	want := []string{"add deployment cattle-fleet-system/gitjob", "add deployment cattle-fleet-system/helmops", "add configmap cattle-system/rancher-config"}
	if got := q.Added(); !reflect.DeepEqual(got, want) {
		t.Errorf("enqueued %q, want %q", got, want)
	}
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

// queued is a controller whose caches hold gitjob at Fleet's defaults
// (the Deployments) and nothing else, with detect as its Detect, and its
// fake clientset holding gitjob, the triple being five.
func queued(t *testing.T, detect func(context.Context, *appsv1.Deployment) error) (*Controller, *kfake.Clientset) {
	ctrl := gomock.NewController(t)
	c, cs, deps, _ := newTestController(t, fakes.FleetTriples(five, election.FleetDefaults), ctrl)
	c.opts.Detect = detect
	cache := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
	deps.EXPECT().Cache().Return(cache).AnyTimes()
	cache.EXPECT().Get("cattle-fleet-system", "gitjob").Return(gitjob(fleetEnv), nil).AnyTimes()
	if err := cs.Tracker().Add(gitjob(fleetEnv)); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	return c, cs
}

var gitjobKey = Key{Namespace: "cattle-fleet-system", Name: "gitjob"}

// TestDetectsFirst: a sync of a Deployment runs Detect on it before its
// own write, and the write happens whatever Detect returns, its error
// reported.
func TestDetectsFirst(t *testing.T) {
	var detected []int // the API calls made before each Detect
	detectErr := errors.New("record write refused")
	var cs *kfake.Clientset
	c, cs := queued(t, func(context.Context, *appsv1.Deployment) error {
		detected = append(detected, len(cs.Actions()))
		return detectErr
	})
	err := c.sync(context.Background(), gitjobKey)
	if !errors.Is(err, detectErr) {
		t.Errorf("sync error %v, want Detect's", err)
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
	c, _ := queued(t, func(context.Context, *appsv1.Deployment) error { return errors.New("record write refused") })
	c.beginPropagation(time.Now(), []Key{gitjobKey})
	if err := c.sync(context.Background(), gitjobKey); err == nil {
		t.Fatal("want Detect's error")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owed[gitjobKey] {
		t.Errorf("gitjob still owed after its write: %v", c.owed)
	}
}

// TestGoneIsNothing: a work item whose object the cache no longer holds
// (deleted) makes no API call and no error, and is no longer owed.
func TestGoneIsNothing(t *testing.T) {
	ctrl := gomock.NewController(t)
	c, cs, deps, cms := newTestController(t, fakes.FleetTriples(five, five), ctrl)
	dc := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
	deps.EXPECT().Cache().Return(dc).AnyTimes()
	dc.EXPECT().Get("cattle-fleet-system", "gitjob").Return(nil, apierrors.NewNotFound(appsv1.Resource("deployments"), "gitjob"))
	cc := fake.NewMockCacheInterface[*corev1.ConfigMap](ctrl)
	cms.EXPECT().Cache().Return(cc).AnyTimes()
	cc.EXPECT().Get("cattle-system", fleetenv.RancherConfigName).Return(nil, apierrors.NewNotFound(corev1.Resource("configmaps"), fleetenv.RancherConfigName))
	c.beginPropagation(time.Now(), []Key{gitjobKey})
	for _, k := range []Key{gitjobKey, c.rancherConfigKey()} {
		if err := c.sync(context.Background(), k); err != nil {
			t.Errorf("sync %s: %v", k, err)
		}
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d API calls: %v", n, cs.Actions())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.owed) != 0 {
		t.Errorf("still owed: %v", c.owed)
	}
}

// TestKeys: the handlers enqueue the Deployments of the Fleet namespace
// and rancher-config, each as its kind, and nothing else.
func TestKeys(t *testing.T) {
	c, _, _, _ := newTestController(t, fakes.NewTriples(nil), gomock.NewController(t))
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	for _, tc := range []struct {
		obj  interface{}
		keys func(interface{}) []Key
		want []Key
	}{
		{gitjob(nil), c.deploymentKeys, []Key{gitjobKey}},
		{kit.Deployment("cattle-system", "rancher"), c.deploymentKeys, nil},
		{cm("cattle-system", fleetenv.RancherConfigName), c.deploymentKeys, nil},
		{cm("cattle-system", fleetenv.RancherConfigName), c.configMapKeys, []Key{{ConfigMap: true, Namespace: "cattle-system", Name: fleetenv.RancherConfigName}}},
		{cm("cattle-system", "other"), c.configMapKeys, nil},
		{cm("cattle-fleet-system", fleetenv.RancherConfigName), c.configMapKeys, nil},
		{gitjob(nil), c.configMapKeys, nil},
	} {
		if got := tc.keys(tc.obj); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("keys of %T %v = %v, want %v", tc.obj, tc.obj.(metav1.Object).GetName(), got, tc.want)
		}
	}
}

// TestRancherConfigWaitsForItsCache: before rancher-config's cache has
// synced its work item is an error (retried), makes no call and stays
// owed; the Deployments do not wait for it.
func TestRancherConfigWaitsForItsCache(t *testing.T) {
	c, cs := queued(t, nil)
	synced := false
	c.configMapsSynced = func() bool { return synced }
	c.beginPropagation(time.Now(), []Key{gitjobKey})
	if err := c.sync(context.Background(), c.rancherConfigKey()); err == nil {
		t.Error("rancher-config synced before its cache")
	}
	if err := c.sync(context.Background(), gitjobKey); err != nil {
		t.Fatal(err)
	}
	if acts := cs.Actions(); len(acts) != 1 || acts[0].GetVerb() != "patch" {
		t.Errorf("API calls %v, want gitjob's one patch", acts)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.owed[c.rancherConfigKey()] || c.owed[gitjobKey] {
		t.Errorf("owed %v, want rancher-config only", c.owed)
	}
}

// TestWaitsForItsWrite: a sync right after a write, from a cache that
// still holds the Deployment as it was before the write (a second triple
// change enqueued it meanwhile), makes no call: the same patch would be
// refused by its test ops (or repeated). The informer's next version is
// synced as usual.
func TestWaitsForItsWrite(t *testing.T) {
	ctrl := gomock.NewController(t)
	c, cs, deps, _ := newTestController(t, fakes.FleetTriples(five, election.FleetDefaults), ctrl)
	before := gitjob(fleetEnv)
	before.ResourceVersion = "5"
	if err := cs.Tracker().Add(before.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	cached := before
	cache := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
	deps.EXPECT().Cache().Return(cache).AnyTimes()
	cache.EXPECT().Get("cattle-fleet-system", "gitjob").DoAndReturn(func(string, string) (*appsv1.Deployment, error) {
		return cached, nil
	}).AnyTimes()
	cs.ClearActions()
	if err := c.sync(context.Background(), gitjobKey); err != nil {
		t.Fatal(err)
	}
	if acts := cs.Actions(); len(acts) != 1 || acts[0].GetVerb() != "patch" {
		t.Fatalf("first sync: %v, want one patch", acts)
	}
	cs.ClearActions()
	if err := c.sync(context.Background(), gitjobKey); err != nil {
		t.Fatal(err)
	}
	if acts := cs.Actions(); len(acts) != 0 {
		t.Errorf("sync from the cache before the write: %v, want no call", acts)
	}
	// The informer brings the write: converged, nothing to do.
	after, err := cs.AppsV1().Deployments("cattle-fleet-system").Get(context.Background(), "gitjob", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after.ResourceVersion = "6"
	cached = after
	cs.ClearActions()
	if err := c.sync(context.Background(), gitjobKey); err != nil {
		t.Fatal(err)
	}
	if acts := cs.Actions(); len(acts) != 0 {
		t.Errorf("sync of the written version: %v, want no call", acts)
	}
	// Another writer puts the old value back (version 7): written again.
	back := before.DeepCopy()
	back.ResourceVersion = "7"
	if err := cs.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), back.DeepCopy(), "cattle-fleet-system"); err != nil {
		t.Fatal(err)
	}
	cached = back
	cs.ClearActions()
	if err := c.sync(context.Background(), gitjobKey); err != nil {
		t.Fatal(err)
	}
	if acts := cs.Actions(); len(acts) != 1 || acts[0].GetVerb() != "patch" {
		t.Errorf("sync after another writer's revert: %v, want one patch", acts)
	}
}
