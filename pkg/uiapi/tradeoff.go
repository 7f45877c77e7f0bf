package uiapi

import (
	"context"
	"fmt"
	"time"

	"github.com/rancher/norman/httperror"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/recommend"
	"leasetune.io/leasetune/pkg/settings"
)

// Locks is how many leader-election locks of a component the
// installation has, and the followers of each: what a triple's cost is
// multiplied by.
type Locks struct {
	// Count is the number of locks: the Fleet controller processes (one
	// lock each, from the Fleet Deployments), the fleet Clusters (one
	// fleet-agent lock each), or 1 for Rancher's kube-system/cattle-controllers.
	Count int `json:"count"`
	// Followers is the followers of each lock (Rancher: its replicas - 1).
	Followers int `json:"followers"`
	// What says in words what was counted; Estimated is true when it could
	// not be counted (no rights, nothing installed) and a typical number is
	// used instead.
	What      string `json:"what"`
	Estimated bool   `json:"estimated"`
}

// Point is one triple on the trade-off curve, for the whole installation.
type Point struct {
	Triple Triple `json:"triple"`
	// RetryPeriodSeconds, RequestsPerHour (lock requests of all the
	// component's locks, election.CostOf with client-go before v0.30) and
	// FailoverSeconds (election.CostOf's worst case after a leader dies
	// without releasing the lock) are the plotted numbers; Failover is the
	// same in Go's duration syntax.
	RetryPeriodSeconds float64 `json:"retryPeriodSeconds"`
	RequestsPerHour    float64 `json:"requestsPerHour"`
	FailoverSeconds    float64 `json:"failoverSeconds"`
	Failover           string  `json:"failover"`
}

// Tradeoff is GET /tradeoff.
type Tradeoff struct {
	Component string `json:"component"`
	Locks     Locks  `json:"locks"`
	// Behaviour is the client-go behaviour the costs assume.
	Behaviour string `json:"behaviour"`
	// Curve has, for retry periods from 1s up, the valid triple with the
	// shortest failover for that retry period (renewDeadline = 2 ×
	// retryPeriod, leaseDuration 1s more): requests per hour fall with the
	// retry period, the failover grows with it.
	Curve []Point `json:"curve"`
	// Current is the triple in effect on the same axes (nil: none).
	Current *Point `json:"current"`
	// MaxFailover is the target the recommendation meets; Recommended is
	// recommend.Best for it, or RecommendError why none meets it.
	MaxFailover    string `json:"maxFailover"`
	Recommended    *Point `json:"recommended,omitempty"`
	RecommendError string `json:"recommendError,omitempty"`
}

// DefaultMaxFailover is the failover target when the page names none:
// about the worst case of Fleet's own 30s/25s/10s (1m14s), rounded up.
const DefaultMaxFailover = 90 * time.Second

// behaviour is what the plan's totals assume: client-go before v0.30, the
// line wrangler v2, Fleet up to v0.12 and Rancher 2.8 build with.
const behaviour = election.LeaderGetsAndUpdates

func pointOf(t election.Timings, l Locks) Point {
	c := election.CostOf(t, l.Followers, behaviour)
	return Point{Triple: *tripleOf(t), RetryPeriodSeconds: t.RetryPeriod.Seconds(),
		RequestsPerHour: float64(l.Count) * c.TotalRequestsPerHour(),
		FailoverSeconds: c.WorstCaseFailover.Seconds(), Failover: election.FormatDuration(c.WorstCaseFailover)}
}

func (s *Server) tradeoff(ctx context.Context, c *clients, component, maxFailover string) (*Tradeoff, error) {
	comp := settings.Component(component)
	if _, ok := Titles[comp]; !ok {
		return nil, httperror.NewFieldAPIError(httperror.InvalidFormat, "component",
			fmt.Sprintf("component %q: want one of fleet-controller, fleet-agent, rancher", component))
	}
	target := DefaultMaxFailover
	if maxFailover != "" {
		d, err := time.ParseDuration(maxFailover)
		if err != nil || d <= 0 {
			return nil, httperror.NewFieldAPIError(httperror.InvalidFormat, "maxFailover",
				fmt.Sprintf("maxFailover %q must be a positive duration such as 90s or 2m", maxFailover))
		}
		target = d
	}
	counted := map[settings.Component]inventory.Part{settings.FleetController: inventory.FleetDeployments,
		settings.FleetAgent: inventory.ClusterCount, settings.Rancher: inventory.RancherDeployment}[comp]
	inv, err := s.read(ctx, c, inventory.Settings|inventory.State|counted, inventory.State|counted)
	if err != nil {
		return nil, err
	}
	snap, _ := inv.Triples()
	locks := locksOf(inv, comp)
	out := &Tradeoff{Component: string(comp), Locks: locks, Behaviour: behaviour.String(), MaxFailover: election.FormatDuration(target)}
	top := 60 * time.Second
	if cur, ok := inEffect(snap, lastInEffect(inv.StateData()), comp); ok {
		p := pointOf(cur, locks)
		out.Current = &p
		if r := 2 * cur.RetryPeriod; r > top {
			top = r
		}
	}
	best, err := recommend.Best(recommend.Target{MaxFailover: target, Followers: locks.Followers, Behaviour: behaviour})
	if err != nil {
		out.RecommendError = err.Error()
	} else {
		p := pointOf(best.Timings, locks)
		out.Recommended = &p
		if r := 2 * best.Timings.RetryPeriod; r > top {
			top = r
		}
	}
	maxRetry := election.MaxDuration / election.MinRenewAttempts // renewDeadline = 2 × retry stays within 1h
	if top > maxRetry {
		top = maxRetry
	}
	step := time.Second
	if n := top / time.Second; n > 120 {
		step = time.Duration((n+119)/120) * time.Second
	}
	for r := election.MinRetryPeriod; r <= top; r += step {
		t := election.Timings{LeaseDuration: 2*r + time.Second, RenewDeadline: 2 * r, RetryPeriod: r}
		if t.Validate() == nil {
			out.Curve = append(out.Curve, pointOf(t, locks))
		}
	}
	return out, nil
}

// locksOf counts the component's locks in what the caller could read;
// what could not be counted is estimated, and says so.
func locksOf(inv *inventory.Snapshot, comp settings.Component) Locks {
	o := inv.Options
	switch comp {
	case settings.FleetController:
		if n := inv.FleetLocks(); n > 0 {
			return Locks{Count: n, What: fmt.Sprintf("%d Fleet controller processes in %s (one lock each)", n, o.FleetNamespace)}
		}
		why := "no Fleet Deployments found"
		if inv.Unread[inventory.FleetDeployments] != nil {
			why = "the Fleet Deployments could not be read with your rights"
		}
		return Locks{Count: recommend.DefaultControllerLocks, Estimated: true,
			What: fmt.Sprintf("%d locks, as Fleet v0.14 has (%s)", recommend.DefaultControllerLocks, why)}
	case settings.FleetAgent:
		why := ""
		switch {
		case inv.Unread[inventory.ClusterCount] != nil:
			why = "the fleet Clusters could not be read with your rights"
		case inv.Absent&inventory.ClusterCount != 0:
			why = "no fleet Cluster kind here"
		default:
			n := inv.FleetClusterCount
			return Locks{Count: n, What: fmt.Sprintf("%d fleet Clusters (one fleet-agent lock each)", n)}
		}
		return Locks{Count: 1, Estimated: true, What: "1 cluster (" + why + ")"}
	}
	if inv.Rancher != nil {
		replicas := max(inv.RancherReplicas, 1)
		return Locks{Count: 1, Followers: replicas - 1,
			What: fmt.Sprintf("kube-system/cattle-controllers, %d Rancher replica(s): 1 leader, %d follower(s)", replicas, replicas-1)}
	}
	why := apierrors.NewNotFound(appsv1.Resource("deployments"), o.RancherDeployment).Error()
	if err := inv.Unread[inventory.RancherDeployment]; err != nil {
		why = reason(err)
	}
	return Locks{Count: 1, Followers: 2, Estimated: true,
		What: fmt.Sprintf("kube-system/cattle-controllers with Rancher's chart default of 3 replicas (Deployment %s/%s: %s)", o.RancherNamespace, o.RancherDeployment, why)}
}
