package uiapi

import (
	"context"
	"fmt"
	"time"

	"github.com/rancher/norman/httperror"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
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
	objs, state, _, err := s.readSettings(ctx, c)
	if err != nil {
		return nil, err
	}
	snap, _ := settings.Snapshot(objs, state)
	locks := s.locks(ctx, c, comp)
	out := &Tradeoff{Component: string(comp), Locks: locks, Behaviour: behaviour.String(), MaxFailover: election.FormatDuration(target)}
	top := 60 * time.Second
	if cur, ok := inEffect(snap, lastInEffect(state), comp); ok {
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

// locks counts the component's locks with the caller's rights; what cannot
// be counted is estimated, and says so.
func (s *Server) locks(ctx context.Context, c *clients, comp settings.Component) Locks {
	switch comp {
	case settings.FleetController:
		deps, err := c.cs.AppsV1().Deployments(s.Plan.FleetNamespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			n := 0
			for i := range deps.Items {
				if d := &deps.Items[i]; fleet.IsTarget(d) {
					for _, ctr := range d.Spec.Template.Spec.Containers {
						if fleet.IsFleetContainer(ctr.Name) {
							n++
						}
					}
				}
			}
			if n > 0 {
				return Locks{Count: n, What: fmt.Sprintf("%d Fleet controller processes in %s (one lock each)", n, s.Plan.FleetNamespace)}
			}
		}
		why := "no Fleet Deployments found"
		if err != nil {
			why = "the Fleet Deployments could not be read with your rights"
		}
		return Locks{Count: recommend.DefaultControllerLocks, Estimated: true,
			What: fmt.Sprintf("%d locks, as Fleet v0.14 has (%s)", recommend.DefaultControllerLocks, why)}
	case settings.FleetAgent:
		n, err := count(ctx, c, agentenv.FleetClusterGVR)
		if err == nil {
			return Locks{Count: n, What: fmt.Sprintf("%d fleet Clusters (one fleet-agent lock each)", n)}
		}
		why := "the fleet Clusters could not be read with your rights"
		if apierrors.IsNotFound(err) {
			why = "no fleet Cluster kind here"
		}
		return Locks{Count: 1, Estimated: true, What: "1 cluster (" + why + ")"}
	}
	name := s.Plan.RancherDeployment
	if name == "" {
		name = rancher.DefaultDeployment
	}
	d, err := c.cs.AppsV1().Deployments(s.Plan.RancherNamespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		replicas := 1
		if d.Spec.Replicas != nil {
			replicas = int(*d.Spec.Replicas)
		}
		if replicas < 1 {
			replicas = 1
		}
		return Locks{Count: 1, Followers: replicas - 1,
			What: fmt.Sprintf("kube-system/cattle-controllers, %d Rancher replica(s): 1 leader, %d follower(s)", replicas, replicas-1)}
	}
	return Locks{Count: 1, Followers: 2, Estimated: true,
		What: fmt.Sprintf("kube-system/cattle-controllers with Rancher's chart default of 3 replicas (Deployment %s/%s: %s)", s.Plan.RancherNamespace, name, reason(err))}
}

// count returns how many objects of gvr there are, from a list of one
// (the API server's remainingItemCount), so 10,000 clusters are not read
// to count them; a server that gives no count is listed in full.
func count(ctx context.Context, c *clients, gvr schema.GroupVersionResource) (int, error) {
	l, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	if rem := l.GetRemainingItemCount(); rem != nil {
		return len(l.Items) + int(*rem), nil
	}
	if l.GetContinue() == "" {
		return len(l.Items), nil
	}
	all, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(all.Items), nil
}
