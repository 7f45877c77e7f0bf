package electionstatus

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// withVersions gives every fleet Cluster of snap a resourceVersion, as an
// informer's objects have, and routes them again.
func withVersions(snap *inventory.Snapshot) {
	for i := range snap.FleetClusters {
		snap.FleetClusters[i].SetResourceVersion(strconv.Itoa(100 + i))
	}
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
}

// replaced is snap with its cluster i replaced by a changed copy under a new
// resourceVersion, as an informer replaces an object it sees updated.
func replaced(snap *inventory.Snapshot, i int, rv string, change func(u *unstructured.Unstructured)) {
	u := *snap.FleetClusters[i].DeepCopy()
	change(&u)
	u.SetResourceVersion(rv)
	snap.FleetClusters[i] = u
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
}

// TestMemoGivesTheSameStatus: through a sequence of changes (a cluster
// edited, none, the global triple, the channel, a cluster gone and back,
// one unroutable, one without a resourceVersion), Compute with a Memo
// gives the status Compute without one gives, byte for byte, and derives
// only the clusters whose part may have changed.
func TestMemoGivesTheSameStatus(t *testing.T) {
	snap, triples := installation()
	withVersions(snap)
	memo := NewMemo()
	check := func(step string, derived int) {
		t.Helper()
		want, _ := json.Marshal(Compute(snap, triples, Options{}))
		got, _ := json.Marshal(Compute(snap, triples, Options{Memo: memo}))
		if string(got) != string(want) {
			t.Fatalf("%s: with the memo\n%s\nwithout\n%s", step, got, want)
		}
		if memo.Derived != derived {
			t.Errorf("%s: %d clusters derived, want %d", step, memo.Derived, derived)
		}
	}
	check("first", 5)
	check("nothing changed", 0)

	replaced(snap, 0, "200", func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "7s"})
	})
	check("an override added to a", 1)
	replaced(snap, 4, "201", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []interface{}{e("CATTLE_ELECTION_RETRY_PERIOD", "4s")}, "spec", "agentEnvVars")
	})
	check("the hand-written entry edited", 1)

	agent := triples[settings.FleetAgent]
	agent.Effective = election.Timings{LeaseDuration: 60e9, RenewDeadline: 50e9, RetryPeriod: 12e9}
	triples[settings.FleetAgent] = agent
	check("the global agent triple changed", 5)
	check("nothing changed after it", 0)

	snap.Channel = fleet.ChannelAgentManagement
	check("the channel changed", 5)

	gone := snap.FleetClusters[1]
	snap.FleetClusters = append(snap.FleetClusters[:1:1], snap.FleetClusters[2:]...)
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
	check("b deleted", 0)
	snap.FleetClusters = append(snap.FleetClusters, gone)
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
	check("b back: forgotten when it was gone", 1)

	snap.Clusters[2].Err = errors.New("its provisioning Cluster is not found")
	check("c unroutable", 1)
	check("c still unroutable", 0)
	snap.Clusters[2].Err = errors.New("its management Cluster is not found")
	check("c unroutable for another reason", 1)
	snap.Clusters[2].Err = nil
	check("c routable again", 1)

	snap.FleetClusters[3].SetResourceVersion("")
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
	check("a cluster without a resourceVersion", 1)
	check("it is never kept", 1)
}

// TestNilMemoKeepsNothing: Compute without a Memo derives every cluster
// (the nil Memo's methods are no-ops).
func TestNilMemoKeepsNothing(t *testing.T) {
	var m *Memo
	m.begin(settings.ComponentStatus{}, "")
	m.end()
	snap, triples := installation()
	a, _ := json.Marshal(Compute(snap, triples, Options{Memo: m}))
	b, _ := json.Marshal(Compute(snap, triples, Options{}))
	if string(a) != string(b) {
		t.Errorf("a nil Memo changes the status:\n%s\n%s", a, b)
	}
}

// tenThousand is installation() with 10,000 more clusters on the v0.9
// channel, a tenth with a retry-period override and what leasetune wrote
// for it, each with a resourceVersion: the bench's size.
func tenThousand() (*inventory.Snapshot, map[settings.Component]settings.ComponentStatus) {
	snap, triples := installation()
	for i := 0; i < 10000; i++ {
		var ann map[string]string
		var env []map[string]interface{}
		if i%10 == 0 {
			ann = map[string]string{agentenv.RetryPeriodAnnotation: "15s", agentenv.RecordAnnotation: `{"CATTLE_ELECTION_RETRY_PERIOD":"15s"}`}
			env = append(env, e("CATTLE_ELECTION_RETRY_PERIOD", "15s"))
		}
		env = append(env, e("HTTP_PROXY", "http://proxy:3128"), e("NO_PROXY", "10.0.0.0/8"))
		snap.FleetClusters = append(snap.FleetClusters, fleetCluster("fleet-default", fmt.Sprintf("edge-%05d", i), nil, ann, env...))
	}
	snap.FleetClusterCount = len(snap.FleetClusters)
	withVersions(snap)
	return snap, triples
}

// BenchmarkComputeAt10000 is one computation of the status at 10,000
// clusters: without a memo (every cluster derived: what every Debounce
// cost before the Memo), and with a memo where 268 clusters changed since
// the last (a global change at the bench's 134 writes/s, one Debounce).
func BenchmarkComputeAt10000(b *testing.B) {
	b.Run("no-memo", func(b *testing.B) {
		snap, triples := tenThousand()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			Compute(snap, triples, Options{})
		}
	})
	b.Run("memo-268-changed", func(b *testing.B) {
		snap, triples := tenThousand()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		memo := NewMemo()
		Compute(snap, triples, Options{Memo: memo})
		runtime.GC()
		runtime.ReadMemStats(&after)
		// What the memo keeps, per cluster (the heap it holds after a GC).
		kept := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(snap.Clusters))
		rv := 1000000
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			for j := 0; j < 268; j++ {
				rv++
				snap.FleetClusters[(i*268+j)%len(snap.FleetClusters)].SetResourceVersion(strconv.Itoa(rv))
			}
			snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
			b.StartTimer()
			Compute(snap, triples, Options{Memo: memo})
			if memo.Derived != 268 {
				b.Fatalf("%d derived, want 268", memo.Derived)
			}
		}
		b.ReportMetric(kept, "memo-B/cluster")
	})
}
