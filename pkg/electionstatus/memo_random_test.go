package electionstatus

import (
	"encoding/json"
	"fmt"
	"math/rand"
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

// rvBook gives objects resourceVersions as an informer's cache has them:
// an object (kind, namespace, name) keeps its resourceVersion while its
// content is unchanged and gets the next one when it changes. The counter
// is per object, so that different objects (of one kind or of different
// kinds) carry equal resourceVersion strings, which the same-content rule
// allows.
type rvBook struct {
	last map[string]string // identity → content
	rv   map[string]int
	hist map[string]map[int]string // identity → rv → content: the rule checked
}

func newRVBook() *rvBook {
	return &rvBook{last: map[string]string{}, rv: map[string]int{}, hist: map[string]map[int]string{}}
}

func (b *rvBook) stamp(t *testing.T, kind string, u *unstructured.Unstructured) {
	t.Helper()
	u.SetResourceVersion("")
	content, _ := json.Marshal(u.Object)
	id := kind + " " + u.GetNamespace() + "/" + u.GetName()
	if b.last[id] != string(content) {
		b.rv[id]++
		b.last[id] = string(content)
	}
	if b.hist[id] == nil {
		b.hist[id] = map[int]string{}
	}
	if c, ok := b.hist[id][b.rv[id]]; ok && c != string(content) {
		t.Fatalf("the generator broke the rule for %s", id)
	}
	b.hist[id][b.rv[id]] = string(content)
	u.SetResourceVersion(strconv.Itoa(b.rv[id]))
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

// randomEnvAndAnnotations gives u random override annotations, record,
// status and spec.agentEnvVars (well-formed or not).
func randomEnvAndAnnotations(r *rand.Rand, u *unstructured.Unstructured) {
	ann := map[string]string{}
	if r.Intn(3) == 0 {
		ann[agentenv.RetryPeriodAnnotation] = pick(r, "5s", "7s", "bad", "1s")
	}
	if r.Intn(5) == 0 {
		ann[agentenv.LeaseDurationAnnotation] = pick(r, "90s", "10s")
	}
	if r.Intn(4) == 0 {
		ann[agentenv.RecordAnnotation] = pick(r, `{"CATTLE_ELECTION_RETRY_PERIOD":"5s"}`,
			`{"CATTLE_ELECTION_LEASE_DURATION":"60s","CATTLE_ELECTION_RENEW_DEADLINE":"50s","CATTLE_ELECTION_RETRY_PERIOD":"5s"}`, `not json`)
	}
	if r.Intn(6) == 0 {
		ann[agentenv.StatusAnnotation] = pick(r, "leasetune stops writing this object: reverted 3 times", "something else")
	}
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	switch r.Intn(8) {
	case 0:
		_ = unstructured.SetNestedSlice(u.Object, []interface{}{e("CATTLE_ELECTION_RETRY_PERIOD", "5s")}, "spec", "agentEnvVars")
	case 1:
		_ = unstructured.SetNestedSlice(u.Object, []interface{}{e("HTTP_PROXY", "http://p:3128"),
			e("CATTLE_ELECTION_LEASE_DURATION", "60s"), e("CATTLE_ELECTION_RENEW_DEADLINE", "50s"), e("CATTLE_ELECTION_RETRY_PERIOD", "5s")}, "spec", "agentEnvVars")
	case 2:
		_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD",
			"valueFrom": map[string]interface{}{"configMapKeyRef": map[string]interface{}{"name": "x", "key": "y"}}}}, "spec", "agentEnvVars")
	case 3:
		_ = unstructured.SetNestedField(u.Object, "not a list", "spec", "agentEnvVars")
	case 4:
		_ = unstructured.SetNestedSlice(u.Object, []interface{}{"not an object"}, "spec", "agentEnvVars")
	}
}

type world struct {
	fleets, provs, mgmts map[string]*unstructured.Unstructured
	old                  map[string]unstructured.Unstructured // a fleet Cluster's previous version (for duplicates)
}

func randomFleet(r *rand.Rand, ns, name string) *unstructured.Unstructured {
	var labels map[string]string
	if r.Intn(2) == 0 {
		labels = map[string]string{rancher.ClusterNameLabel: pick(r, "c-m-1", "c-m-2", "c-abcde", "local")}
	}
	u := fleetCluster(ns, name, labels, nil)
	randomEnvAndAnnotations(r, &u)
	return &u
}

func randomProv(r *rand.Rand, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": name, "namespace": "fleet-default"}, "spec": map[string]interface{}{}}}
	if cn := pick(r, "c-m-1", "c-m-2", "c-abcde", ""); cn != "" {
		_ = unstructured.SetNestedField(u.Object, cn, "status", "clusterName")
	}
	if r.Intn(2) == 0 {
		_ = unstructured.SetNestedMap(u.Object, map[string]interface{}{}, "spec", "rkeConfig")
	}
	randomEnvAndAnnotations(r, u)
	return u
}

func randomMgmt(r *rand.Rand, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": name}, "spec": map[string]interface{}{}}}
	randomEnvAndAnnotations(r, u)
	return u
}

// TestMemoRandomSequences: random sequences of installations
// (standalone, provisioned, imported and legacy clusters; objects edited,
// deleted, back; duplicates of a fleet Cluster in one snapshot; the
// Rancher version, channel and global agent triple changing; objects
// without a resourceVersion), each object's resourceVersion following the
// same-content rule (per object: equal strings across objects). With a
// shared Memo Compute gives the status it gives without one.
func TestMemoRandomSequences(t *testing.T) {
	versions := []rancher.Version{{}}
	for _, s := range []string{"v2.8.2", "v2.9.0", "v2.11.0", "v2.12.3"} {
		v, _ := rancher.Parse(s)
		versions = append(versions, v)
	}
	channels := []fleet.AgentChannel{"", fleet.ChannelAgentManagement, fleet.ChannelFixedV012, fleet.ChannelClusterEnvV09, fleet.ChannelFixedV090, fleet.ChannelNoElection}
	agents := []election.Timings{{LeaseDuration: 60e9, RenewDeadline: 50e9, RetryPeriod: 20e9}, {LeaseDuration: 45e9, RenewDeadline: 30e9, RetryPeriod: 2e9}, election.FleetDefaults}
	fleetNames := [][2]string{{"fleet-default", "a"}, {"fleet-default", "b"}, {"fleet-default", "c"}, {"fleet-local", "a"}, {"fleet-default", "d"}}
	for seed := int64(0); seed < 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		snap, triples := installation()
		book := newRVBook()
		w := world{fleets: map[string]*unstructured.Unstructured{}, provs: map[string]*unstructured.Unstructured{},
			mgmts: map[string]*unstructured.Unstructured{}, old: map[string]unstructured.Unstructured{}}
		memo := NewMemo()
		rv, ch := versions[0], channels[3]
		for step := 0; step < 40; step++ {
			for _, fn := range fleetNames {
				id := fn[0] + "/" + fn[1]
				switch {
				case w.fleets[id] == nil && r.Intn(2) == 0, w.fleets[id] != nil && r.Intn(4) == 0:
					if w.fleets[id] != nil {
						w.old[id] = *w.fleets[id]
					}
					w.fleets[id] = randomFleet(r, fn[0], fn[1])
				case w.fleets[id] != nil && r.Intn(12) == 0:
					delete(w.fleets, id)
				}
			}
			for _, n := range []string{"p1", "p2", "p3"} {
				if (w.provs[n] == nil && r.Intn(2) == 0) || r.Intn(5) == 0 {
					w.provs[n] = randomProv(r, n)
				} else if r.Intn(10) == 0 {
					delete(w.provs, n)
				}
			}
			for _, n := range []string{"c-m-1", "c-m-2", "c-abcde", "local"} {
				if (w.mgmts[n] == nil && r.Intn(2) == 0) || r.Intn(5) == 0 {
					w.mgmts[n] = randomMgmt(r, n)
				} else if r.Intn(10) == 0 {
					delete(w.mgmts, n)
				}
			}
			if r.Intn(6) == 0 {
				rv = pick(r, versions...)
			}
			if r.Intn(8) == 0 {
				ch = pick(r, channels...)
			}
			if r.Intn(8) == 0 {
				a := triples[settings.FleetAgent]
				a.Effective, a.HasEffective = pick(r, agents...), r.Intn(5) != 0
				triples[settings.FleetAgent] = a
			}
			// The snapshot, in a random order, each object stamped.
			build := func(m map[string]*unstructured.Unstructured, kind string) []unstructured.Unstructured {
				var out []unstructured.Unstructured
				for _, u := range m {
					book.stamp(t, kind, u)
					c := *u.DeepCopy()
					if r.Intn(30) == 0 {
						c.SetResourceVersion("")
					}
					out = append(out, c)
				}
				r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
				return out
			}
			fleets := build(w.fleets, "fleet")
			if len(fleets) > 0 && r.Intn(5) == 0 { // a duplicate: the same version
				fleets = append(fleets, *fleets[r.Intn(len(fleets))].DeepCopy())
			}
			if r.Intn(5) == 0 { // a duplicate: an older version, with its resourceVersion
				for id, o := range w.old {
					if w.fleets[id] != nil && o.GetResourceVersion() != "" && o.GetResourceVersion() != w.fleets[id].GetResourceVersion() {
						fleets = append(fleets, *o.DeepCopy())
						break
					}
				}
			}
			provs, mgmts := build(w.provs, "prov"), build(w.mgmts, "mgmt")
			snap.FleetClusters, snap.ProvisioningClusters, snap.ManagementClusters = fleets, provs, mgmts
			snap.FleetClusterCount = len(fleets)
			snap.RancherVersion, snap.Channel = rv, ch
			snap.Clusters = inventory.Route(fleets, provs, mgmts, rv)
			for k := 0; k < 2; k++ {
				want, _ := json.Marshal(Compute(snap, triples, Options{}))
				got, _ := json.Marshal(Compute(snap, triples, Options{Memo: memo}))
				if string(got) != string(want) {
					t.Fatalf("seed %d step %d call %d: with the memo\n%s\nwithout\n%s", seed, step, k, got, want)
				}
			}
			if len(memo.prev) > len(snap.Clusters) || len(memo.groups) > len(snap.Clusters) {
				t.Fatalf("seed %d step %d: the memo keeps %d clusters and %d groups for %d clusters", seed, step, len(memo.prev), len(memo.groups), len(snap.Clusters))
			}
		}
	}
}

// TestMemoTargetSwitchWithEqualResourceVersions: a Rancher-managed cluster whose
// source changes from its provisioning Cluster to its management Cluster
// (the Rancher version goes to v2.11, the cluster is imported) and back,
// every object at resourceVersion "1": the routing (TargetRef) tells them
// apart.
func TestMemoTargetSwitchWithEqualResourceVersions(t *testing.T) {
	snap, triples := installation()
	fc := fleetCluster("fleet-default", "imp", map[string]string{rancher.ClusterNameLabel: "c-m-1"}, nil)
	prov := unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "imp", "namespace": "fleet-default",
			"annotations": map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s"}},
		"status": map[string]interface{}{"clusterName": "c-m-1"}}}
	mgmt := unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "c-m-1", "annotations": map[string]interface{}{agentenv.RetryPeriodAnnotation: "9s"}}}}
	for _, u := range []*unstructured.Unstructured{&fc, &prov, &mgmt} {
		u.SetResourceVersion("1")
	}
	snap.FleetClusters = []unstructured.Unstructured{fc}
	snap.ProvisioningClusters, snap.ManagementClusters = []unstructured.Unstructured{prov}, []unstructured.Unstructured{mgmt}
	memo := NewMemo()
	for i, v := range []string{"v2.10.0", "v2.11.0", "v2.10.0", "v2.8.2", "v2.12.0"} {
		rv, _ := rancher.Parse(v)
		snap.RancherVersion = rv
		snap.Clusters = inventory.Route(snap.FleetClusters, snap.ProvisioningClusters, snap.ManagementClusters, rv)
		want, _ := json.Marshal(Compute(snap, triples, Options{}))
		got, _ := json.Marshal(Compute(snap, triples, Options{Memo: memo}))
		if string(got) != string(want) {
			t.Fatalf("step %d (%s): with the memo\n%s\nwithout\n%s", i, v, got, want)
		}
	}
}

// TestMemoStatusIsNotShared: what Compute returns with a Memo must not
// share its maps, slices and *Triple with the memo, or a caller that edits
// the status it got (a redaction, a sort, a default filled in) would change
// the statuses of the next calls, which Compute without a memo (a pure
// function) never does. (Found by review: the first Memo handed out its
// own groups and clusters.)
func TestMemoStatusIsNotShared(t *testing.T) {
	snap, triples := installation()
	withVersions(snap)
	// "over" (an override: listed with Overrides, Effective and Runs, its
	// group with Overrides) and "hand" (its group with Entries).
	memo := NewMemo()
	want, _ := json.Marshal(Compute(snap, triples, Options{}))
	first := Compute(snap, triples, Options{Memo: memo})
	// The caller edits its copy of the status.
	for i := range first.Agents.Groups {
		g := &first.Agents.Groups[i]
		for k := range g.Overrides {
			g.Overrides[k] = "edited"
		}
		for j := range g.Entries {
			g.Entries[j].Value = "edited"
		}
	}
	for i := range first.Clusters {
		c := &first.Clusters[i]
		for k := range c.Overrides {
			c.Overrides[k] = "edited"
		}
		if c.Effective != nil {
			c.Effective.RetryPeriod = "edited"
		}
	}
	got, _ := json.Marshal(Compute(snap, triples, Options{Memo: memo}))
	if string(got) != string(want) {
		t.Errorf("an edit of the status a call returned changed the next call's:\nwith the memo\n%s\nwithout\n%s", got, want)
	}
}

// TestMemoUnroutableEntriesNotShared: the same for an unroutable
// cluster's entries (Agents.UnroutableEntries).
func TestMemoUnroutableEntriesNotShared(t *testing.T) {
	snap, triples := installation()
	fc := fleetCluster("fleet-default", "lost", map[string]string{rancher.ClusterNameLabel: "c-m-9"}, nil, e("CATTLE_ELECTION_RETRY_PERIOD", "3s"))
	snap.FleetClusters = append(snap.FleetClusters, fc)
	withVersions(snap)
	memo := NewMemo()
	want, _ := json.Marshal(Compute(snap, triples, Options{}))
	first := Compute(snap, triples, Options{Memo: memo})
	if len(first.Agents.UnroutableEntries) != 1 {
		t.Fatalf("unroutable entries %+v", first.Agents.UnroutableEntries)
	}
	first.Agents.UnroutableEntries[0].Entries[0].Value = "edited"
	got, _ := json.Marshal(Compute(snap, triples, Options{Memo: memo}))
	if string(got) != string(want) {
		t.Errorf("an edit of the status a call returned changed the next call's:\nwith the memo\n%s\nwithout\n%s", got, want)
	}
}

// TestMemoBounded: clusters coming and going under new names never
// grow the memo beyond the clusters and groups of the last call.
func TestMemoBounded(t *testing.T) {
	snap, triples := installation()
	memo := NewMemo()
	for i := 0; i < 200; i++ {
		snap.FleetClusters = nil
		for j := 0; j < 5; j++ {
			u := fleetCluster("fleet-default", fmt.Sprintf("n-%d-%d", i, j), nil,
				map[string]string{agentenv.RetryPeriodAnnotation: fmt.Sprintf("%ds", 1+i%50)})
			u.SetResourceVersion("1")
			snap.FleetClusters = append(snap.FleetClusters, u)
		}
		snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
		Compute(snap, triples, Options{Memo: memo})
		if len(memo.prev) > 5 || len(memo.groups) > 5 {
			t.Fatalf("round %d: %d clusters and %d groups kept", i, len(memo.prev), len(memo.groups))
		}
	}
}
