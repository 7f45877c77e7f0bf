package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"leasetune.io/leasetune/pkg/audit"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
)

// FleetLocks are the Fleet locks in the Fleet system namespace and the
// component whose settings govern each (pkg/audit.ManagedComponent cites
// where Fleet names them); the local agent's lock "fleet-agent" is in its
// own namespace.
var FleetLocks = []string{
	"fleet-controller-leader-election-shard", "fleet-gitops-leader-election-shard",
	"fleet-helmops-leader-election-shard", "fleet-agentmanagement-lock", "fleet-cleanup-lock",
}

// FleetClientGo is how Fleet's leaders renew: Fleet v0.13.14 and v0.14.10
// build with client-go v0.33.13 and v0.34.10 (their go.mod replace
// directives), which update a held lease without reading it first.
const FleetClientGo = election.LeaderOnlyUpdates

// Window is a stretch of the audit log between two marks, with the wall
// clock times of both.
type Window struct {
	From, To         int64
	FromTime, ToTime time.Time
}

// Measure waits d and returns the window of the audit log it covered.
func (in *Installation) Measure(t testing.TB, d time.Duration) Window {
	t.Helper()
	w := Window{FromTime: time.Now()}
	var err error
	if w.From, err = in.Audit.Mark(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	w.ToTime = time.Now()
	if w.To, err = in.Audit.Mark(); err != nil {
		t.Fatal(err)
	}
	return w
}

// Requests returns the completed requests of the window.
func (in *Installation) Requests(t testing.TB, w Window) []Request {
	t.Helper()
	rs, err := in.Audit.Between(w.From, w.To)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// LockCheck is one lock's measured and modelled requests per hour.
type LockCheck struct {
	Namespace, Name   string
	Triple            election.Timings
	Measured, Model   float64
	Requests          int
	AuditPerHour      float64 // what `leasetune audit` (pkg/audit) reports for it
	AuditBehaviour    string
	AuditRetryPeriod  time.Duration
	WithinTenPercent  bool
	AuditWithinTenPct bool
}

func (c LockCheck) String() string {
	return fmt.Sprintf("%s/%s at %s: %.0f/h measured (%d requests), model %.0f/h (%+.1f%%); leasetune audit %.0f/h, retry period %s, %s",
		c.Namespace, c.Name, c.Triple.RetryPeriod, c.Measured, c.Requests, c.Model, 100*(c.Measured/c.Model-1),
		c.AuditPerHour, c.AuditRetryPeriod, c.AuditBehaviour)
}

// CheckLocks measures each lock (namespace → names) in window w, compares
// its requests per hour with pkg/election's model for triple (one leader,
// no follower: one replica each, behaviour b), and with what `leasetune
// audit` reads from the same part of the log, and fails t where either
// is more than 10% off. It returns the checks for the record.
func (in *Installation) CheckLocks(t testing.TB, w Window, triple election.Timings, b election.ClientGoBehaviour, locks map[string][]string) []LockCheck {
	t.Helper()
	rs := in.Requests(t, w)
	rep, err := in.Audit.Report(w.From, w.To)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]audit.Lock{}
	for _, l := range rep.Locks {
		byName[l.Namespace+"/"+l.Name] = l
	}
	model := election.CostOf(triple, 0, b).TotalRequestsPerHour()
	var out []LockCheck
	for _, ns := range sortedKeys(locks) {
		for _, name := range locks[ns] {
			c := LockCheck{Namespace: ns, Name: name, Triple: triple, Model: model}
			c.Measured, c.Requests = LockRate(rs, ns, name)
			if l, ok := byName[ns+"/"+name]; ok {
				c.AuditPerHour, c.AuditBehaviour, c.AuditRetryPeriod = l.PerHour, l.Behaviour().String(), l.RetryPeriod
			}
			c.WithinTenPercent = math.Abs(c.Measured/model-1) <= 0.10
			c.AuditWithinTenPct = math.Abs(c.AuditPerHour/model-1) <= 0.10
			if !c.WithinTenPercent || !c.AuditWithinTenPct {
				t.Errorf("lock requests off the model by more than 10%%: %s", c)
			} else {
				t.Logf("lock %s", c)
			}
			out = append(out, c)
		}
	}
	return out
}

// Steady waits until every lock among locks (namespace → names) has a
// holder that acquired it more than two retry periods ago and renewed it
// within the last two (a pod that replaced another may wait a whole lease
// duration before it leads, when the old one did not release the lock):
// the locks' steady state, which the model describes. It fails t after
// limit.
func (in *Installation) Steady(t testing.TB, triple election.Timings, locks map[string][]string, limit time.Duration) {
	t.Helper()
	var why string
	Within(t, limit, "every lock led and renewed", func() bool {
		now := time.Now()
		for _, ns := range sortedKeys(locks) {
			for _, name := range locks[ns] {
				l, err := in.CP.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
				switch {
				case err != nil:
					why = err.Error()
					return false
				case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.AcquireTime == nil || l.Spec.RenewTime == nil:
					why = ns + "/" + name + " has no holder"
					return false
				case now.Sub(l.Spec.AcquireTime.Time) < 2*triple.RetryPeriod:
					why = ns + "/" + name + " was acquired " + now.Sub(l.Spec.AcquireTime.Time).String() + " ago"
					return false
				case now.Sub(l.Spec.RenewTime.Time) > 2*triple.RetryPeriod:
					why = ns + "/" + name + " was renewed " + now.Sub(l.Spec.RenewTime.Time).String() + " ago"
					return false
				}
			}
		}
		return true
	}, func() string { return why })
}

// Calm waits until the installation has been still for quiet: no rollout,
// no write of a Deployment or of Fleet's Bundles and BundleDeployments
// (the agent's chain) by anyone, and the Kubelet double idle (no rollout
// or readiness wait of its own still running); it fails t after limit.
func (in *Installation) Calm(t testing.TB, quiet, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		before := in.Rollouts(t)
		mark, err := in.Audit.Mark()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(quiet)
		rs, err := in.Audit.Since(mark)
		if err != nil {
			t.Fatal(err)
		}
		writes := Count(rs, func(r Request) bool {
			switch r.Resource {
			case "deployments", "bundles", "bundledeployments":
				return r.Write() && r.Subresource == ""
			}
			return false
		}, func(r Request) string { return r.User + " " + r.Verb + " " + r.Object() })
		moved := RolloutsSince(before, in.Rollouts(t))
		pending := in.pending(t)
		behind := in.agentBehind(t)
		if len(writes) == 0 && len(moved) == 0 && len(pending) == 0 && behind == "" && in.Kubelet.Idle() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not calm within %s: in the last %s, rollouts %v, triples pending %v, %s and Deployment writes:\n%s", limit, quiet, moved, pending, behind, Format(writes))
		}
	}
}

// pending are the components whose triple waits for the settle time, as
// leasetune's ElectionStatus says (a triple saved just before takes effect
// only then: a quiet window can end before it does).
func (in *Installation) pending(t testing.TB) []string {
	t.Helper()
	st, ok := in.ElectionStatus(t)
	if !ok {
		return nil
	}
	var out []string
	for _, c := range st.Components {
		if c.Pending != nil {
			out = append(out, c.Component+" until "+c.SettlesAt)
		}
	}
	return out
}

// ElectionStatus reads leasetune's ElectionStatus; false when there is none.
func (in *Installation) ElectionStatus(t testing.TB) (electionstatus.Status, bool) {
	t.Helper()
	u, err := in.Dyn.Resource(ElectionStatuses).Get(context.Background(), electionstatus.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return electionstatus.Status{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Status electionstatus.Status `json:"status"`
	}
	b, _ := json.Marshal(u.Object)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("the ElectionStatus: %v", err)
	}
	return st.Status, true
}

// agentBehind says how the local fleet-agent lags the agent triple on
// fleet-agentmanagement ("" when it runs it, or where there is none): a
// new fleet-agentmanagement re-renders the agent only once it leads its
// lock, up to a lease duration after its start, which a quiet window can
// end before (seen beside v2.15.0: the redeploy of an earlier change landed
// in the next case's step).
func (in *Installation) agentBehind(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	fc, err := in.CP.Client.AppsV1().Deployments(FleetNamespace).Get(ctx, fleet.ControllerDeployment, metav1.GetOptions{})
	if err != nil || (fc.Spec.Replicas != nil && *fc.Spec.Replicas == 0) {
		return "" // no fleet-agentmanagement runs to render the agent (case 6 scales it to 0)
	}
	var want election.Timings
	found := false
	for _, c := range fc.Spec.Template.Spec.Containers {
		if c.Name == fleet.AgentManagementContainer {
			want, found, err = election.FleetAgentPrefix.FromEnv(c.Env)
		}
	}
	if !found || err != nil {
		return ""
	}
	ag, err := in.CP.Client.AppsV1().Deployments(FleetLocalNamespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range ag.Spec.Template.Spec.Containers {
		if c.Name != "fleet-agent" {
			continue
		}
		got, ok, err := election.CattlePrefix.FromEnv(c.Env)
		if err == nil && ok && got != want {
			return fmt.Sprintf("the local fleet-agent runs %s, fleet-agentmanagement gives %s", got, want)
		}
	}
	return ""
}

// ElectionStatuses is leasetune's ElectionStatus kind.
var ElectionStatuses = schema.GroupVersionResource{Group: electionstatus.APIGroup, Version: electionstatus.Version, Resource: electionstatus.Resource}

// maxStatusWritesPerChange bounds leasetune's writes of its ElectionStatus
// while a change propagates: the leader writes it only when what it says
// changed (the triple pending, then in effect, the Deployments' env, the
// clusters), each burst debounced into one write
// (pkg/controllers/electionstatus). More would be a write loop.
const maxStatusWritesPerChange = 10

// LeasetuneWrites fails t unless leasetune's writes among rs (its own
// bookkeeping aside) are exactly want ("verb resource ns/name" → n), and
// its ElectionStatus writes are none at rest (want nil) or at most
// maxStatusWritesPerChange during a change.
func LeasetuneWrites(t testing.TB, rs []Request, want map[string]int) {
	t.Helper()
	got := WritesBy(rs, Leasetune)
	if !equalCounts(got, want) {
		t.Errorf("leasetune's writes:\n%swant:\n%s", Format(got), Format(want))
	}
	switch n := StatusWrites(rs); {
	case want == nil && n > 0:
		t.Errorf("leasetune wrote its ElectionStatus %d times at rest, want none", n)
	case n > maxStatusWritesPerChange:
		t.Errorf("leasetune wrote its ElectionStatus %d times during one change, want at most %d", n, maxStatusWritesPerChange)
	}
}

// WantRollouts fails t unless the rollouts since before are exactly want.
func (in *Installation) WantRollouts(t testing.TB, before map[string]int, want map[string]int) {
	t.Helper()
	got := RolloutsSince(before, in.Rollouts(t))
	if !equalCounts(got, want) {
		t.Errorf("rollouts (each restarts every replica once):\n%swant (the minimum for the change):\n%s", Format(got), Format(want))
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// FleetComponents names the settings prefix of each Fleet component.
var FleetComponents = map[settings.Component]string{
	settings.FleetController: "fleet-leader-election",
	settings.FleetAgent:      "fleet-agent-leader-election",
	settings.Rancher:         "rancher-leader-election",
}

// Describe prints the checks one per line.
func Describe(cs []LockCheck) string {
	var lines []string
	for _, c := range cs {
		lines = append(lines, "  "+c.String())
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
