package fleetsettings_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// TestSettingChangeReachesDeployments wires the real settings Provider to
// the controller: a Setting edit reaches the Fleet Deployments; an invalid
// one never does.
func TestSettingChangeReachesDeployments(t *testing.T) {
	e := newEnv(t)
	cp.InstallFleet(t, e.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mf, err := management.NewFactoryFromConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := settings.NewProvider(settings.ProviderOptions{
		Settings: mf.Management().V3().Setting(), ConfigMaps: cp.Client.CoreV1(), Namespace: e.stateNS,
		LookupEnv: func(string) (string, bool) { return "", false },
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err := p.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mf.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r := start(t, e, p, "")

	patch := func(name, value string) {
		body, _ := json.Marshal(map[string]string{"value": value})
		if _, err := mf.Management().V3().Setting().Patch(name, types.MergePatchType, body); err != nil {
			t.Fatal(err)
		}
	}
	patch("fleet-leader-election-retry-period", "4s")
	patch("fleet-agent-leader-election-lease-duration", "45s")
	want, agent := kit.Timings("30s", "25s", "4s"), kit.Timings("45s", "25s", "10s")
	for _, name := range []string{"fleet-controller", "gitjob", "helmops"} {
		framework.Eventually(t, name, func() bool { return hasTriple(get(t, e.fleetNS, name), want, &agent) })
	}

	// An invalid value is refused by the provider and never reaches a Deployment.
	n := r.writes.Settle(t, nil)
	patch("fleet-leader-election-retry-period", "30s")
	framework.Eventually(t, "refused", func() bool { return p.Status(settings.FleetController).Refused != nil })
	r.writes.NoWrites(t, "after an invalid value", framework.ConsistentlyMin, nil)
	if m := r.writes.Writes(); m != n {
		t.Errorf("%d writes after an invalid value", m-n)
	}
	for _, name := range []string{"fleet-controller", "gitjob", "helmops"} {
		if !hasTriple(get(t, e.fleetNS, name), want, &agent) {
			t.Errorf("%s changed after an invalid value", name)
		}
	}
}
