package audit_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/recommend"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// TestInEffect: the triples `leasetune audit` and `recommend` project with
// --kubeconfig are the Settings in effect: here the agents' three set to
// 45s/40s/20s, the controllers' left at their defaults, and no state
// ConfigMap yet.
func TestInEffect(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := framework.SettingsGVR
	want := election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 20 * time.Second}
	for _, d := range settings.Of(settings.FleetAgent) {
		obj := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "management.cattle.io/v3", "kind": "Setting",
			"metadata": map[string]interface{}{"name": d.Name}, "value": election.FormatDuration(want.Get(d.Field)),
		}}
		if _, err := dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(ctx, d.Name, metav1.DeleteOptions{}) })
	}
	snap, err := inventory.Read(ctx, cp.Client, dyn, inventory.Options{Namespace: ns, Parts: inventory.Settings | inventory.State})
	if err != nil {
		t.Fatal(err)
	}
	if got := recommend.InEffect(snap); got[settings.FleetAgent] != want || got[settings.FleetController] != election.FleetDefaults {
		t.Errorf("in effect: %v", got)
	}
}
