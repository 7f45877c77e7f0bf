package manager

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"leasetune.io/leasetune/pkg/metrics"
)

// TestServerUp: leasetune_server_up follows each server: the webhook is 1
// only while it listens with its certificate in place, the UI server while
// it listens; a server that stopped stays 0 whatever comes after.
func TestServerUp(t *testing.T) {
	up := func(server string) float64 { return testutil.ToFloat64(metrics.ServerUp.WithLabelValues(server)) }
	metrics.ServerUp.Reset()
	h := newHealth()

	h.wait(readyWebhookCert, "not in place yet: the Secret cannot be read")
	if n := testutil.CollectAndCount(metrics.ServerUp); n != 0 {
		t.Fatalf("%d series before any server listens, want none", n)
	}
	h.serving(healthWebhookServer)
	if got := up("webhook"); got != 0 {
		t.Errorf("webhook listening without its certificate: %v, want 0", got)
	}
	h.wait(readyWebhookCert, "")
	if got := up("webhook"); got != 1 {
		t.Errorf("webhook listening with its certificate: %v, want 1", got)
	}
	h.serving(healthUIServer)
	if got := up("ui"); got != 1 {
		t.Errorf("ui listening: %v, want 1", got)
	}
	h.wait(readySettingCRD, "the Setting CRD is not served")
	if got, gotUI := up("webhook"), up("ui"); got != 1 || gotUI != 1 {
		t.Errorf("a missing Setting CRD changed the servers: webhook %v, ui %v, want 1 and 1", got, gotUI)
	}
	h.fail(healthUIServer, "accept: too many open files")
	if got := up("ui"); got != 0 {
		t.Errorf("ui stopped: %v, want 0", got)
	}
	h.fail(healthWebhookServer, "accept: too many open files")
	h.wait(readyWebhookCert, "")
	if got := up("webhook"); got != 0 {
		t.Errorf("webhook stopped, then its certificate looked at again: %v, want 0", got)
	}
	if n := testutil.CollectAndCount(metrics.ServerUp); n != 2 {
		t.Errorf("%d series, want 2 (webhook, ui)", n)
	}
}
