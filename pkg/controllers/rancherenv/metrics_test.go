package rancherenv

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/settings"
)

// TestNotApplicableGauge: leasetune_setting_refused{rancher,
// not-applicable} is 1 after a decision that leaves the Rancher Deployment
// alone for good while the rancher settings ask for a triple other than
// Rancher's built-in one, and 0 after any other decision.
func TestNotApplicableGauge(t *testing.T) {
	gauge := func() float64 {
		return testutil.ToFloat64(metrics.SettingRefused.WithLabelValues(string(settings.Rancher), metrics.RefusedNotApplicable))
	}
	c := &Controller{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range []struct {
		name string
		d    func() Decision
		in   Input
		want float64
	}{
		{"Rancher 2.8.2, a triple asked for", func() Decision { return Decide(deployment("v2.8.2"), Input{Triple: opted, OK: true}) }, Input{Triple: opted, OK: true}, 1},
		{"Rancher 2.8.2, the built-in triple", func() Decision {
			return Decide(deployment("v2.8.2"), Input{Triple: election.WranglerDefaults, OK: true})
		}, Input{Triple: election.WranglerDefaults, OK: true}, 0},
		{"Rancher 2.11.3, a triple asked for and written", func() Decision { return Decide(deployment("v2.11.3"), Input{Triple: opted, OK: true}) }, Input{Triple: opted, OK: true}, 0},
		{"an image without a release tag, a triple asked for", func() Decision { return Decide(deployment("head"), Input{Triple: opted, OK: true}) }, Input{Triple: opted, OK: true}, 1},
		{"a rollout in progress", func() Decision { return Decision{Problem: ProblemNotReady} }, Input{Triple: opted, OK: true}, 0},
		{"no triple known", func() Decision { return Decision{Problem: ProblemForeign} }, Input{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dec := tc.d()
			if got := TripleIgnored(dec, tc.in); got != (tc.want == 1) {
				t.Errorf("TripleIgnored(%s, %s) = %v", dec.Problem, tc.in.Triple, got)
			}
			c.report(deployment("v2.11.3"), dec, tc.in)
			if got := gauge(); got != tc.want {
				t.Errorf("leasetune_setting_refused{rancher, not-applicable} after %q: %v, want %v", dec.Problem, got, tc.want)
			}
		})
	}
}
