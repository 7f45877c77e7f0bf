package settings

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/metrics"
)

// TestRefusedGauge: leasetune_setting_refused{component, reason="invalid"}
// is 1 for each component whose settings a sync refused, 0 for the
// others, and back to 0 once that component's settings validate.
func TestRefusedGauge(t *testing.T) {
	refused := func(c Component) float64 {
		return testutil.ToFloat64(metrics.SettingRefused.WithLabelValues(string(c), metrics.RefusedInvalid))
	}
	p := NewProvider(ProviderOptions{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stored := State{Effective: map[Component]election.Timings{FleetController: election.FleetDefaults, FleetAgent: election.FleetDefaults}}
	bad := errors.New("renewDeadline 40s must be less than leaseDuration 30s")

	p.reportSync(settlement{status: map[Component]ComponentStatus{FleetAgent: {Refused: bad}}}, stored, nil)
	for c, want := range map[Component]float64{FleetController: 0, FleetAgent: 1, Rancher: 0} {
		if got := refused(c); got != want {
			t.Errorf("after a refused fleet-agent triple, %s: %v, want %v", c, got, want)
		}
	}
	p.reportSync(settlement{status: map[Component]ComponentStatus{FleetAgent: {Refused: bad}}}, stored, nil)
	if got := refused(FleetAgent); got != 1 {
		t.Errorf("the same refusal again: %v, want 1", got)
	}
	p.reportSync(settlement{status: map[Component]ComponentStatus{}}, stored, nil)
	for _, c := range Components {
		if got := refused(c); got != 0 {
			t.Errorf("after the settings validate, %s: %v, want 0", c, got)
		}
	}
}
