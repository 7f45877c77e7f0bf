package fleetchannel

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/ownstate/ownstatetest"
)

func seedChannel(t *testing.T, tracker k8stesting.ObjectTracker, ch fleet.AgentChannel) {
	t.Helper()
	if err := tracker.Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "leasetune", Name: fleetenv.ChannelConfigMapName, ResourceVersion: "1"},
		Data:       map[string]string{"channel": string(ch), "evidence": "seeded"},
	}); err != nil {
		t.Fatal(err)
	}
}

func storedChannel(t *testing.T, tracker k8stesting.ObjectTracker) map[string]string {
	t.Helper()
	obj, err := tracker.Get(ownstatetest.GVR, "leasetune", fleetenv.ChannelConfigMapName)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.ConfigMap).Data
}

// The new leader (B) records a channel while the outgoing one (A), from a
// stale cache, is between its read and its write of another: B's record
// stays, A takes it over (its listeners are told) and asks to detect again.
func TestChannelInterleavedWriters(t *testing.T) {
	ctx := context.Background()
	tracker := ownstatetest.NewTracker()
	seedChannel(t, tracker, fleet.ChannelClusterEnvV09)
	csA, csB := ownstatetest.NewWriter(tracker), ownstatetest.NewWriter(tracker)
	a := &record{client: csA.CoreV1(), namespace: "leasetune"}
	b := &record{client: csB.CoreV1(), namespace: "leasetune"}
	for _, r := range []*record{a, b} {
		if err := r.load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	told := 0
	a.OnChannelChange(func() { told++ })

	ownstatetest.Before(csA, "update", func() {
		if _, err := b.set(ctx, fleet.Detection{Channel: fleet.ChannelAgentManagement, Evidence: "image v0.14.0"}); err != nil {
			t.Error(err)
		}
	})
	changed, err := a.set(ctx, fleet.Detection{Channel: fleet.ChannelFixedV012, Evidence: "stale"})
	if err == nil {
		t.Error("A's set: no error; want one, for its work queue to detect again")
	}
	if got := storedChannel(t, tracker); got["channel"] != string(fleet.ChannelAgentManagement) || got["evidence"] != "image v0.14.0" {
		t.Errorf("stored %v: A reverted B's record", got)
	}
	if ch, _ := a.Channel(); ch != fleet.ChannelAgentManagement || !changed || told != 1 {
		t.Errorf("A uses %s (changed %v, listeners told %d times); want B's %s, changed, told once", ch, changed, told, fleet.ChannelAgentManagement)
	}
	if n := ownstatetest.Count(csA, "update"); n != 1 {
		t.Errorf("A updated %d times, want 1 (the conflict; nothing after it)", n)
	}

	// Detecting again, with B's record as the prior, changes nothing.
	if changed, err := a.set(ctx, fleet.Detection{Channel: fleet.ChannelAgentManagement, Evidence: "recorded at first detection"}); err != nil || changed {
		t.Errorf("set again = %v, %v", changed, err)
	}
}

// Without another writer, a detection is recorded (created, then updated).
func TestChannelRecorded(t *testing.T) {
	ctx := context.Background()
	tracker := ownstatetest.NewTracker()
	r := &record{client: ownstatetest.NewWriter(tracker).CoreV1(), namespace: "leasetune"}
	if err := r.load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []fleet.AgentChannel{fleet.ChannelClusterEnvV09, fleet.ChannelAgentManagement} {
		changed, err := r.set(ctx, fleet.Detection{Channel: ch, Evidence: "e " + string(ch)})
		if err != nil || !changed {
			t.Fatalf("set %s = %v, %v", ch, changed, err)
		}
		if got := storedChannel(t, tracker); got["channel"] != string(ch) || got["evidence"] != "e "+string(ch) {
			t.Errorf("stored %v, want %s", got, ch)
		}
	}
}
