package uiapi

import (
	"context"
	"fmt"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/settings"
)

// MaxClusters is the most clusters GET /clusters lists; Total still
// counts them all.
const MaxClusters = 500

// ClusterView is one downstream cluster whose agents do not simply run
// the global agent triple.
type ClusterView struct {
	// Cluster is the fleet Cluster, "<namespace>/<name>".
	Cluster string `json:"cluster"`
	// Source is the object its agent env and overrides are on (agentenv.Route).
	Source string `json:"source"`
	// Overrides are its override annotations by field (source "override").
	Overrides map[string]string `json:"overrides"`
	// Effective is the global agent triple with the overrides on top (nil
	// when it does not parse).
	Effective *Triple `json:"effective"`
	// Runs is what its fleet-agent runs once leasetune's entries are in
	// place; nil where the agent runs no leader election (Elects false).
	Runs   *Triple `json:"runs"`
	Elects bool    `json:"elects"`
	// Problem is why it is left alone or its overrides do not apply
	// (invalid, foreign, unsupported, reverted; "" when none) and Reason
	// the details; Status is its leasetune.io/agent-env-status annotation,
	// the controller's own account.
	Problem string `json:"problem,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Status  string `json:"status,omitempty"`
	// Ignored lists other objects of the cluster that carry override
	// annotations which do not apply (Rancher never reads them there).
	Ignored []string `json:"ignored"`
}

// Clusters is GET /clusters.
type Clusters struct {
	// Global is the global agent triple in effect (nil: none yet).
	Global  *Triple `json:"global"`
	Channel string  `json:"channel"`
	// Total is the number of fleet Clusters; Differing how many are listed
	// in Clusters (at most MaxClusters; Truncated when more differ).
	Total     int           `json:"total"`
	Differing int           `json:"differing"`
	Truncated bool          `json:"truncated"`
	Clusters  []ClusterView `json:"clusters"`
	Notes     []string      `json:"notes"`
}

func (s *Server) clusters(ctx context.Context, c *clients) (*Clusters, error) {
	inv, err := s.read(ctx, c, inventory.Settings|inventory.State|s.channelParts()|inventory.Clusters,
		inventory.State|inventory.ChannelRecord|inventory.FleetDeployments|inventory.RancherDeployment)
	if err != nil {
		return nil, err
	}
	snap, _ := inv.Triples()
	global, ok := inEffect(snap, lastInEffect(inv.StateData()), settings.FleetAgent)
	agent := settings.ComponentStatus{Effective: global, HasEffective: ok}
	out := &Clusters{Notes: notes(inv), Clusters: []ClusterView{}, Channel: string(inv.Channel), Total: len(inv.FleetClusters)}
	if agent.HasEffective {
		out.Global = tripleOf(agent.Effective)
	}
	for _, cl := range inv.Clusters {
		cv, differs := view(cl, agent, inv.Channel)
		if !differs {
			continue
		}
		out.Differing++
		if len(out.Clusters) < MaxClusters {
			out.Clusters = append(out.Clusters, cv)
		} else {
			out.Truncated = true
		}
	}
	return out, nil
}

// view describes one routed fleet Cluster as the agentenv controller
// decides it, and whether its agents differ from the global triple
// (overrides, a problem, a status, ignored overrides, or another triple
// run).
func view(cl inventory.Cluster, agent settings.ComponentStatus, ch fleet.AgentChannel) (ClusterView, bool) {
	fc := cl.Fleet
	cv := ClusterView{Cluster: fc.GetNamespace() + "/" + fc.GetName(), Overrides: map[string]string{}, Ignored: []string{}}
	if cl.Err != nil {
		cv.Problem, cv.Reason = "unrouted", cl.Err.Error()
		return cv, true
	}
	rt := cl.Routing
	cv.Source = rt.TargetRef.String()
	ann := rt.Target.GetAnnotations()
	for i, a := range agentenv.OverrideAnnotations {
		if v, ok := ann[a]; ok {
			cv.Overrides[string(election.Fields[i])] = v
		}
	}
	cv.Status = ann[agentenv.StatusAnnotation]
	for _, o := range rt.Ignored {
		cv.Ignored = append(cv.Ignored, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	differs := len(cv.Overrides) > 0 || cv.Status != "" || len(cv.Ignored) > 0
	if !agent.HasEffective {
		return cv, differs
	}
	d := rt.Decide(agent.Effective, ch)
	if d.Problem != agentenv.ProblemInvalid && len(cv.Overrides) > 0 {
		cv.Effective = tripleOf(d.Effective)
	}
	if d.Elects {
		cv.Runs = tripleOf(d.Runs)
		cv.Elects = true
		differs = differs || d.Runs != agent.Effective
	}
	if d.Problem != "" {
		cv.Problem = string(d.Problem)
		if d.Err != nil {
			cv.Reason = d.Err.Error()
		}
		differs = true
	}
	return cv, differs
}
