package fleetchannel

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/ownstate"
)

// record keeps the detected channel in memory and in its ConfigMap.
type record struct {
	client    corev1client.ConfigMapsGetter
	namespace string
	override  fleet.AgentChannel

	mu        sync.RWMutex
	channel   fleet.AgentChannel // recorded or detected; "" when unknown
	evidence  string
	cm        *corev1.ConfigMap
	listeners []func()
}

// load reads the recorded channel; a missing ConfigMap records nothing.
func (r *record) load(ctx context.Context) error {
	cm, err := ownstate.Load(ctx, r.client, r.namespace, fleetenv.ChannelConfigMapName)
	if err != nil || cm == nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cm = cm
	if ch, err := fleet.ParseChannel(cm.Data["channel"]); err == nil {
		r.channel, r.evidence = ch, cm.Data["evidence"]
	}
	return nil
}

// Channel implements fleet.ChannelSource; the flag override wins over
// detection.
func (r *record) Channel() (fleet.AgentChannel, bool) {
	if r.override != "" {
		return r.override, true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.channel, r.channel != ""
}

// Evidence returns the channel in effect, as Channel does, and what decided
// it: "--fleet-agent-channel" for the flag's override, else the detection's
// or the record's evidence.
func (r *record) Evidence() (fleet.AgentChannel, string, bool) {
	if r.override != "" {
		return r.override, "--fleet-agent-channel", true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.channel, r.evidence, r.channel != ""
}

// recorded returns the channel recorded so far (not the override).
func (r *record) recorded() fleet.AgentChannel {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.channel
}

// OnChannelChange implements fleet.ChannelSource.
func (r *record) OnChannelChange(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners = append(r.listeners, f)
}

// set records a detection, writing the ConfigMap before the new channel is
// used; it reports whether the channel changed. A channel another writer
// recorded since this one last read (an outgoing or a new leader, in a
// handover) stays recorded, and in use: set then returns an error, for the
// work queue to detect again with that record.
func (r *record) set(ctx context.Context, d fleet.Detection) (bool, error) {
	r.mu.RLock()
	same := r.channel == d.Channel // a new reason for the same channel is not worth a write
	cm := r.cm
	r.mu.RUnlock()
	if same {
		return false, nil
	}
	var base string
	if cm != nil {
		base = cm.Data["channel"]
	}
	data := map[string]string{"channel": string(d.Channel), "evidence": d.Evidence}
	out, err := ownstate.Save(ctx, r.client, r.namespace, fleetenv.ChannelConfigMapName, cm, func(current map[string]string) (map[string]string, error) {
		if _, perr := fleet.ParseChannel(current["channel"]); perr == nil && current["channel"] != base {
			return current, nil // recorded by another writer meanwhile
		}
		return data, nil
	})
	if err != nil {
		return false, fmt.Errorf("record fleet agent channel: %w", err)
	}
	ch, evidence := d.Channel, d.Evidence
	if stored, perr := fleet.ParseChannel(out.Data["channel"]); perr == nil && stored != d.Channel {
		ch, evidence = stored, out.Data["evidence"]
		err = fmt.Errorf("record fleet agent channel: another writer recorded %s meanwhile; detecting again", stored)
	}
	r.mu.Lock()
	changed := r.channel != ch
	r.channel, r.evidence, r.cm = ch, evidence, out
	listeners := append([]func(){}, r.listeners...)
	r.mu.Unlock()
	setChannelMetric(ch)
	if changed && r.override == "" {
		for _, f := range listeners {
			f()
		}
	}
	return changed, err
}

func setChannelMetric(ch fleet.AgentChannel) {
	applicable := 0.0
	if ch.GlobalReachesAgents() {
		applicable = 1
	}
	metrics.AgentTimingsApplicable.Set(applicable)
	for _, c := range fleet.Channels {
		v := 0.0
		if c == ch {
			v = 1
		}
		metrics.AgentChannel.WithLabelValues(string(c)).Set(v)
	}
}
