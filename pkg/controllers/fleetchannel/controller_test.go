package fleetchannel

import (
	"context"
	"io"
	"log/slog"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/tests/kit"
)

func newTestController(t *testing.T) (*Controller, *kfake.Clientset) {
	t.Helper()
	cs := kfake.NewSimpleClientset()
	c := New(Options{Namespace: "cattle-fleet-system", StateNamespace: "leasetune", Client: cs,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := c.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	return c, cs
}

// fleetController is a fleet-controller Deployment in ns of Fleet at tag.
func fleetController(ns, tag string) *appsv1.Deployment {
	return kit.Deployment(ns, fleet.ControllerDeployment,
		kit.WithContainer("fleet-controller"), kit.WithImage("fleet-controller", "rancher/fleet:"+tag))
}

// TestDoNothing: a detection of the channel already recorded makes no API
// call at all, and neither does another Deployment, one in another
// namespace or a deleted one.
func TestDoNothing(t *testing.T) {
	c, cs := newTestController(t)
	ctx := context.Background()
	if err := c.Sync(ctx, fleetController("cattle-fleet-system", "v0.16.1")); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	for _, d := range []*appsv1.Deployment{
		fleetController("cattle-fleet-system", "v0.16.1"),
		kit.Deployment("cattle-fleet-system", "gitjob", kit.WithContainer("gitjob"), kit.WithImage("gitjob", "rancher/fleet:v0.12.0")),
		fleetController("elsewhere", "v0.12.0"),
		nil,
	} {
		if err := c.Sync(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d API calls with the channel recorded: %v", n, cs.Actions())
	}
}

// TestOneWrite: a new channel is one write of the record (a create, then an
// update when it changes again), told to the listeners once each time.
func TestOneWrite(t *testing.T) {
	c, cs := newTestController(t)
	told := 0
	c.OnChannelChange(func() { told++ })
	for i, step := range []struct {
		tag  string
		verb string
		want fleet.AgentChannel
	}{
		{"v0.12.0", "create", fleet.ChannelFixedV012},
		{"v0.16.1", "update", fleet.ChannelAgentManagement},
	} {
		d := fleetController("cattle-fleet-system", step.tag)
		cs.ClearActions()
		if err := c.Sync(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		var writes []string
		for _, a := range cs.Actions() {
			if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
				writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
		if len(writes) != 1 || writes[0] != step.verb+" configmaps" {
			t.Errorf("Fleet %s: writes %v, want one %s of the record", step.tag, writes, step.verb)
		}
		if a, ok := lastWrite(cs.Actions()); ok {
			if cm, ok := a.GetObject().(*corev1.ConfigMap); !ok || cm.Name != fleetenv.ChannelConfigMapName || cm.Data["channel"] != string(step.want) {
				t.Errorf("Fleet %s: wrote %v, want channel %s in %s", step.tag, a.GetObject(), step.want, fleetenv.ChannelConfigMapName)
			}
		}
		if ch, ok := c.Channel(); !ok || ch != step.want || told != i+1 {
			t.Errorf("Fleet %s: channel %s (known %v), listeners told %d times; want %s, %d", step.tag, ch, ok, told, step.want, i+1)
		}
	}
}

func lastWrite(acts []k8stesting.Action) (k8stesting.CreateAction, bool) {
	for i := len(acts) - 1; i >= 0; i-- {
		if w, ok := acts[i].(k8stesting.CreateAction); ok {
			return w, true
		}
		if w, ok := acts[i].(k8stesting.UpdateAction); ok {
			return w, true
		}
	}
	return nil, false
}
