package settings

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/restart"
)

// Event reasons on Setting objects.
const (
	// ReasonRefused: a value was refused; the last good triple stays.
	ReasonRefused = "TimingsRefused"
	// ReasonApplied: a new triple took effect.
	ReasonApplied = "TimingsApplied"
	// ReasonRestored: a deleted Setting was recreated.
	ReasonRestored = "SettingRestored"
	// ReasonPending: a new valid triple waits for the settle time.
	ReasonPending = "TimingsPending"
)

// The provider's reporting: every Event, metric and log line of a sync
// about the triples is made here, after the sync's writes (the objects it
// restored are reported right after restore, before the state is written).

// reportRestored records an Event on each Setting restore created again.
func (p *Provider) reportRestored(rs []restored) {
	for _, r := range rs {
		p.event(r.name, corev1.EventTypeNormal, ReasonRestored,
			fmt.Sprintf("Setting %s was deleted and has been restored with value %q", r.name, r.value))
	}
}

// reportSync reports what a sync settled, with stored the state now stored
// and applied the components whose triple in effect it changed, in this
// order: each component's refusal (reportRefusal), the triples that began
// to wait, the triples that took effect.
func (p *Provider) reportSync(s settlement, stored State, applied []Component) {
	for _, c := range Components {
		p.reportRefusal(c, s.status[c], stored)
	}
	for _, c := range s.waiting {
		p.reportPending(c, s.status[c], stored)
	}
	for _, c := range applied {
		t := stored.Effective[c]
		p.log.Info("timings applied", "setting-component", c, "timings", t.String())
		metrics.SettingsApplied.WithLabelValues(string(c)).Inc()
		for _, d := range Of(c) {
			p.event(d.Name, corev1.EventTypeNormal, ReasonApplied, fmt.Sprintf("%s now in effect for %s, which %s; %s", t, c, c.Restarts(), ledger()))
		}
	}
}

// reportPending says, once per pending triple, when it takes effect: a log
// line and an Event on each of c's settings.
func (p *Provider) reportPending(c Component, st ComponentStatus, stored State) {
	p.mu.Lock()
	if pt, ok := p.pending[c]; ok && pt.t == *st.Pending {
		pt.said = true
		p.pending[c] = pt
	}
	p.mu.Unlock()
	keep := "nothing is in effect yet"
	if t, ok := stored.Effective[c]; ok {
		keep = t.String() + " stays in effect until then"
	}
	msg := fmt.Sprintf("%s takes effect for %s at %s, once the settings have been unchanged for %s, and then %s; %s",
		*st.Pending, c, st.PendingAt.UTC().Format(time.RFC3339), p.opts.Settle, c.Restarts(), keep)
	p.log.Info("timings pending", "setting-component", c, "timings", st.Pending.String(), "at", st.PendingAt)
	for _, d := range Of(c) {
		p.event(d.Name, corev1.EventTypeNormal, ReasonPending, msg)
	}
}

// ledger says what leasetune's writes have restarted so far in this
// process (the restart ledger, metric leasetune_restarts_total), before
// the writes of the change just applied.
func ledger() string {
	t := metrics.RestartTotals()
	return fmt.Sprintf("before this change leasetune's writes had restarted (since its start): %.0f Fleet Deployment rollout(s), %.0f Rancher rollout(s), %.0f fleet-agent, %.0f cattle-cluster-agent redeploy(s), %.0f node plan(s)",
		t[restart.DeploymentRollout], t[restart.RancherRollout], t[restart.FleetAgent], t[restart.ClusterAgent], t[restart.NodePlan])
}

// reportRefusal logs and records a refusal of c's inputs (st.Refused) once
// per distinct input, with s the state stored, and forgets it when the
// input becomes valid. metrics.SettingRefused{c, "invalid"} says, on every
// sync, whether c's inputs are refused now.
func (p *Provider) reportRefusal(c Component, st ComponentStatus, s State) {
	refused := 0.0
	if st.Refused != nil {
		refused = 1
	}
	metrics.SettingRefused.WithLabelValues(string(c), metrics.RefusedInvalid).Set(refused)
	if st.Refused == nil {
		p.mu.Lock()
		delete(p.refused, c)
		p.mu.Unlock()
		return
	}
	key := fmt.Sprint(st.Inputs)
	p.mu.Lock()
	seen := p.refused[c] == key
	p.refused[c] = key
	p.mu.Unlock()
	if seen {
		return
	}
	metrics.SettingsRefused.WithLabelValues(string(c)).Inc()
	keep := "no valid triple is known, so nothing is propagated for " + string(c)
	if t, ok := s.Effective[c]; ok {
		keep = "still in effect: " + t.String()
	}
	defs := Of(c)
	var parts []string
	for i, d := range defs {
		parts = append(parts, fmt.Sprintf("%s=%q", d.Name, st.Inputs[i].Value))
	}
	msg := fmt.Sprintf("refused %s: %v; %s", strings.Join(parts, " "), st.Refused, keep)
	p.log.Warn("timings refused", "setting-component", c, "values", strings.Join(parts, " "), "error", st.Refused.Error(), "kept", keep)
	last, hasLast := s.Effective[c]
	for i, d := range defs {
		// Put the Event on the settings whose value is not the one in effect.
		if hasLast {
			if dur, err := election.ParseDuration(d.Field, st.Inputs[i].Value); err == nil && dur == last.Get(d.Field) {
				continue
			}
		}
		p.event(d.Name, corev1.EventTypeWarning, ReasonRefused, msg)
	}
}

// event records an Event on the cluster-scoped Setting called name (with
// its uid when the cache has it).
func (p *Provider) event(name, eventType, reason, msg string) {
	if p.opts.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: v3.SchemeGroupVersion.String(), Kind: "Setting", Name: name}
	if obj, err := p.opts.Settings.Cache().Get(name); err == nil {
		ref.UID = obj.UID
	}
	p.opts.Recorder.Event(ref, eventType, reason, msg)
}
