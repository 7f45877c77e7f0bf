package agentenv

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/election"
)

// The fixtures of the sync tests: a user's entries, the global agent
// triple 60s/50s/20s and the entries and record leasetune writes for it.

func e(name, value string) map[string]interface{} {
	return map[string]interface{}{"name": name, "value": value}
}

const (
	L = "CATTLE_ELECTION_LEASE_DURATION"
	D = "CATTLE_ELECTION_RENEW_DEADLINE"
	P = "CATTLE_ELECTION_RETRY_PERIOD"
)

var (
	user    = e("HTTPS_PROXY", "http://proxy:3128")
	global  = election.Timings{LeaseDuration: 60e9, RenewDeadline: 50e9, RetryPeriod: 20e9}
	rec6050 = map[string]string{L: "1m0s", D: "50s", P: "20s"}
)

// TestPlanBookkeepingKeepsTheFence: Rancher's Update of the applied-hash
// annotation after each change of an imported cluster's env (v2.15) is not
// a change "otherwise": it keeps the revert guard's fence (else every round
// of a fight with another writer would re-plan every node twice).
func TestPlanBookkeepingKeepsTheFence(t *testing.T) {
	mk := func(ann map[string]interface{}) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": "c-m-1", "resourceVersion": "7", "annotations": ann},
			"spec":     map[string]interface{}{"agentEnvVars": []interface{}{}}, "status": map[string]interface{}{"driver": "rke2"}}}
	}
	l := newLedger()
	l.fence("fleet-default/prod", slim.Fingerprint(mk(map[string]interface{}{"management.cattle.io/applied-system-agent-upgrader-hash": "h1"})), "fenced")
	for _, ann := range []map[string]interface{}{
		{"management.cattle.io/applied-system-agent-upgrader-hash": "h2"},
		{"management.cattle.io/applied-system-agent-upgrader-hash": "h2", "operations.cattle.io/imported-cleaning-state": "operations"},
	} {
		if _, still := l.fencedMessage("fleet-default/prod", slim.Fingerprint(mk(ann))); !still {
			t.Errorf("%v lifted the fence", ann)
		}
	}
	// A change by someone of anything else still lifts it.
	if _, still := l.fencedMessage("fleet-default/prod", slim.Fingerprint(mk(map[string]interface{}{"team": "a"}))); still {
		t.Error("a user's annotation kept the fence")
	}
}
