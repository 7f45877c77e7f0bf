// Package index keeps the fleet Clusters that carry CATTLE_ELECTION_*
// entries of their own at hand, for the judgement of a global agent triple
// change (agentenv.JudgeGlobal) that the admission webhook and the
// fleetsettings controller make, and shares its informer of the fleet
// Clusters (slim copies, pkg/agentenv/slim) with the agentenv controller.
package index

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// The indexes of the fleet Cluster informer (FleetIndexers).
const (
	// ByManagementName indexes fleet Clusters by their management
	// Cluster's name (rancher.ClusterNameLabel).
	ByManagementName    = "byMgmtName"
	withElectionEntries = "withElectionEntries"
)

// Index watches the fleet Clusters (slim.NewInformer: only the fields the
// project reads), indexed so that the clusters carrying CATTLE_ELECTION_*
// entries of their own are found without a scan: what agentenv.JudgeGlobal
// needs at 10,000 clusters, on every replica that serves the webhook. On the
// leader the controller shares its informer.
type Index struct {
	informer cache.SharedIndexInformer
	client   dynamic.Interface
}

// New builds the index; call Start. stream, when not nil
// (slim.NewRESTClient), is what its informer lists and watches through
// (slim.NewInformer).
func New(client dynamic.Interface, stream rest.Interface) *Index {
	return &Index{informer: slim.NewInformer(client, stream, fleet.ClusterGVR, FleetIndexers()), client: client}
}

// Start starts the informer; it stops when ctx ends.
func (x *Index) Start(ctx context.Context) { go x.informer.Run(ctx.Done()) }

// Informer is the index's informer of the fleet Clusters, for the
// controller to share (Options.Fleet) rather than keep a second copy.
func (x *Index) Informer() cache.SharedIndexInformer { return x.informer }

// HasSynced reports whether the index has listed the clusters once.
func (x *Index) HasSynced() bool { return x.informer.HasSynced() }

// Candidates returns the clusters that carry CATTLE_ELECTION_* entries, as
// the index has them.
func (x *Index) Candidates() []agentenv.ClusterEnv {
	objs, _ := x.informer.GetIndexer().ByIndex(withElectionEntries, "yes")
	out := make([]agentenv.ClusterEnv, 0, len(objs))
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		out = append(out, agentenv.ClusterEnvOf(u))
	}
	return out
}

// Judge runs agentenv.JudgeGlobal on the index's candidates and confirms each
// cluster it finds with a live read (a cache may lag behind the very write
// before this one), so that a refusal never rests on a stale copy.
func (x *Index) Judge(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) ([]agentenv.Broken, error) {
	if cur == next || !ch.RendersElectionEnv() || !ch.GlobalReachesAgents() {
		return nil, nil
	}
	candidates := x.Candidates()
	if !x.HasSynced() {
		// Not listed yet: judge from a live list rather than from nothing.
		l, err := x.client.Resource(fleet.ClusterGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list fleet Clusters: %w", err)
		}
		candidates = candidates[:0]
		for i := range l.Items {
			if c := agentenv.ClusterEnvOf(&l.Items[i]); len(c.Env) > 0 {
				candidates = append(candidates, c)
			}
		}
	}
	found := agentenv.JudgeGlobal(cur, next, ch, candidates)
	if len(found) == 0 {
		return nil, nil
	}
	live := make([]agentenv.ClusterEnv, 0, len(found))
	for _, b := range found {
		u, err := x.client.Resource(fleet.ClusterGVR).Namespace(b.Cluster.Namespace).Get(ctx, b.Cluster.Name, metav1.GetOptions{})
		if err != nil {
			continue // gone: it breaks nothing
		}
		live = append(live, agentenv.ClusterEnvOf(u))
	}
	return agentenv.JudgeGlobal(cur, next, ch, live), nil
}

// FleetIndexers are the indexes of the fleet Cluster informer the
// controller and the judgement index share.
func FleetIndexers() cache.Indexers {
	return cache.Indexers{
		ByManagementName: func(obj interface{}) ([]string, error) {
			if n, ok := obj.(*unstructured.Unstructured).GetLabels()[rancher.ClusterNameLabel]; ok {
				return []string{n}, nil
			}
			return nil, nil
		},
		withElectionEntries: func(obj interface{}) ([]string, error) {
			if u, ok := obj.(*unstructured.Unstructured); ok && len(agentenv.ClusterEnvOf(u).Env) > 0 {
				return []string{"yes"}, nil
			}
			return nil, nil
		},
	}
}
