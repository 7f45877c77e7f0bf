package electionstatus

import (
	"encoding/json"
	"fmt"
	"testing"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
)

// maxObjectBytes is what etcd accepts in one request by default
// (go.etcd.io/etcd/server/v3 v3.5 embed/config.go DefaultMaxRequestBytes,
// 1.5 MiB), which bounds a stored object: the kube-apiserver refuses a
// larger write with "etcdserver: request is too large".
const maxObjectBytes = 1536 * 1024

// TestComputeStaysUnderTheObjectLimit: at 10,000 clusters whose override
// annotations each differ (a retry period spread per cluster, so that the
// agents do not all retry at once; the entry leasetune wrote for it and
// its record), the status still fits in one object, with room to spare.
func TestComputeStaysUnderTheObjectLimit(t *testing.T) {
	snap, triples := installation()
	for i := 0; i < 10000; i++ {
		snap.FleetClusters = append(snap.FleetClusters, fleetCluster("fleet-default", fmt.Sprintf("edge-%05d", i), nil,
			map[string]string{agentenv.RetryPeriodAnnotation: fmt.Sprintf("%dms", 5000+i),
				agentenv.RecordAnnotation: fmt.Sprintf(`{"CATTLE_ELECTION_RETRY_PERIOD":"%dms"}`, 5000+i)},
			e("CATTLE_ELECTION_RETRY_PERIOD", fmt.Sprintf("%dms", 5000+i))))
	}
	snap.FleetClusterCount = len(snap.FleetClusters)
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
	st := Compute(snap, triples, Options{})
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d clusters: %d groups, %d listed, %d not listed, %d bytes", st.Agents.Clusters, len(st.Agents.Groups), len(st.Clusters), st.ClustersNotListed, len(b))
	if len(b) > maxObjectBytes/2 {
		t.Errorf("the status is %d bytes, over half of etcd's %d-byte request limit", len(b), maxObjectBytes)
	}
	// The groups beyond the cap are counted, none lost: every routable
	// cluster is in a listed group or in ClustersNotGrouped.
	a := st.Agents
	n := a.ClustersNotGrouped
	for _, g := range a.Groups {
		n += g.Count
	}
	if len(a.Groups) != MaxGroups || a.GroupsNotListed != 10003-MaxGroups || n != a.Clusters-a.Unroutable {
		t.Errorf("groups %d listed, %d not listed, %d clusters in them; want %d, %d and %d", len(a.Groups), a.GroupsNotListed, n, MaxGroups, 10003-MaxGroups, a.Clusters-a.Unroutable)
	}
	// The largest groups are the ones kept.
	if a.Groups[0].Count < a.Groups[len(a.Groups)-1].Count || a.Groups[0].Count == 1 {
		t.Errorf("the first group counts %d, the last %d: want the largest first", a.Groups[0].Count, a.Groups[len(a.Groups)-1].Count)
	}
}
