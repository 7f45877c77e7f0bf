package manager

import (
	"context"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// AgentJudge judges a change of the global agent triple from cur to next by
// its effect on every agent (index.Index.Judge): an error names the
// clusters it would break. Nil when there are no fleet Clusters to judge.
type AgentJudge func(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) error

// startIndex starts, on every replica, the index of the fleet Clusters
// that the webhook and the fleetsettings controller judge agent triple
// changes with, and whose informer the agentenv controller shares on the
// leader; nil without the fleet Cluster kind. Errors: rc is a config no
// REST client can be made of.
func startIndex(ctx context.Context, rc *rest.Config, cs kubernetes.Interface) (*index.Index, error) {
	if !served(cs.Discovery(), fleet.ClusterGVR) {
		return nil, nil
	}
	stream, err := slim.NewRESTClient(rc)
	if err != nil {
		return nil, err
	}
	ix := index.New(dynamic.NewForConfigOrDie(rc), stream) //nolint:contextcheck // client-go v0.28 list-watch functions take no context; the informer stops them with ctx (Start)
	ix.Start(ctx)
	return ix, nil
}

// agentsOf counts the fleet Clusters in ix's cache, one fleet-agent each
// (nil when ix is).
func agentsOf(ix *index.Index) func() int {
	if ix == nil {
		return nil
	}
	return func() int { return len(ix.Informer().GetStore().ListKeys()) }
}

// judgeWith is the AgentJudge over ix (nil when ix is).
func judgeWith(ix *index.Index) AgentJudge {
	if ix == nil {
		return nil
	}
	return func(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) error {
		broken, err := ix.Judge(ctx, cur, next, ch)
		if err != nil {
			return err
		}
		if len(broken) > 0 {
			return agentenv.BrokenError(next, broken)
		}
		return nil
	}
}
