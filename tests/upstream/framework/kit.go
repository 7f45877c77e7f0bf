package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"leasetune.io/leasetune/pkg/election"
)

// Within polls cond every 250ms until it holds, failing t after d; what
// names the wait in the failure, and explain (if set) says why it did not
// hold.
func Within(t testing.TB, d time.Duration, what string, cond func() bool, explain ...func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, d, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		msg := ""
		for _, e := range explain {
			msg += "\n" + e()
		}
		t.Fatalf("%s: not within %s%s", what, d, msg)
	}
}

// SetSettings sets the value of each named Setting as a user with kubectl
// would (a merge patch of value, by the admin), once it exists.
func (in *Installation) SetSettings(t testing.TB, values map[string]string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range sortedKeys(values) {
		Within(t, 2*time.Minute, "Setting "+name+" exists", func() bool {
			_, err := in.Dyn.Resource(SettingGVR).Get(ctx, name, metav1.GetOptions{})
			return err == nil
		})
		body, _ := json.Marshal(map[string]string{"value": values[name]})
		if _, err := in.Dyn.Resource(SettingGVR).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatalf("set %s=%s: %v", name, values[name], err)
		}
	}
}

// SettingValues returns the value of every Setting among names (absent
// ones are missing from the map).
func (in *Installation) SettingValues(t testing.TB, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		s, err := in.Dyn.Resource(SettingGVR).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			continue
		}
		v, _ := s.Object["value"].(string)
		out[n] = v
	}
	return out
}

// TripleSettings returns the three settings of prefix (e.g.
// "fleet-agent-leader-election") with the values of t.
func TripleSettings(prefix string, t election.Timings) map[string]string {
	return map[string]string{
		prefix + "-lease-duration": t.LeaseDuration.String(),
		prefix + "-renew-deadline": t.RenewDeadline.String(),
		prefix + "-retry-period":   t.RetryPeriod.String(),
	}
}

// Deployment returns Deployment ns/name.
func (in *Installation) Deployment(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := in.CP.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ContainerTriple reads the triple of prefix in container c of
// Deployment ns/name (found false when the three names are absent).
func (in *Installation) ContainerTriple(t testing.TB, ns, name, c string, prefix election.EnvPrefix) (election.Timings, bool) {
	t.Helper()
	for _, ctr := range in.Deployment(t, ns, name).Spec.Template.Spec.Containers {
		if ctr.Name == c {
			tm, found, err := prefix.FromEnv(ctr.Env)
			if err != nil {
				t.Fatalf("%s/%s %s: %v", ns, name, c, err)
			}
			return tm, found
		}
	}
	t.Fatalf("%s/%s has no container %s", ns, name, c)
	return election.Timings{}, false
}

// DuplicateEnvNames returns, for every Deployment in the control plane,
// the env names a container lists more than once ("ns/name container:
// NAME"): never allowed (docs/design.md, rule 10).
func (in *Installation) DuplicateEnvNames(t testing.TB) []string {
	t.Helper()
	l, err := in.CP.Client.AppsV1().Deployments("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range l.Items {
		for _, c := range append(append([]corev1.Container(nil), d.Spec.Template.Spec.InitContainers...), d.Spec.Template.Spec.Containers...) {
			seen := map[string]int{}
			for _, e := range c.Env {
				seen[e.Name]++
			}
			for n, k := range seen {
				if k > 1 {
					out = append(out, fmt.Sprintf("%s/%s %s: %s ×%d", d.Namespace, d.Name, c.Name, n, k))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// Rollouts returns the Kubelet double's rollout count of each Deployment
// it runs that exists, as "ns/name" → n.
func (in *Installation) Rollouts(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	l, err := in.CP.Client.AppsV1().Deployments("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range l.Items {
		if in.Kubelet.runs(d.Namespace + "/" + d.Name) {
			out[d.Namespace+"/"+d.Name] = in.Kubelet.Rollouts(d.Namespace, d.Name)
		}
	}
	return out
}

// RolloutsSince returns the rollouts since before (a Rollouts result) that
// are not zero.
func RolloutsSince(before, now map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range now {
		if d := n - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Leasetune is the user name of leasetune's ServiceAccount.
const Leasetune = "system:serviceaccount:" + LeasetuneNamespace + ":leasetune"

// OwnBookkeeping reports whether r is a write of leasetune's to its own
// objects (its Lease, its state ConfigMaps and webhook Secret, Events, its
// ElectionStatus), which are not what the tests count as writes to the
// installation. The ElectionStatus writes are checked on their own
// (LeasetuneWrites: none at rest, a few per change).
func OwnBookkeeping(r Request) bool {
	switch {
	case r.Resource == "events" || r.Resource == "electionstatuses":
		return true
	case r.Namespace == LeasetuneNamespace && (r.Resource == "leases" || r.Resource == "configmaps" || r.Resource == "secrets"):
		return true
	}
	return false
}

// WritesBy returns the writes by user among rs that are not its own
// bookkeeping, counted by object.
func WritesBy(rs []Request, user string) map[string]int {
	return Count(rs, func(r Request) bool { return r.User == user && r.Write() && !OwnBookkeeping(r) },
		func(r Request) string { return r.Verb + " " + r.Object() })
}

// StatusWrites counts leasetune's writes of its ElectionStatus among rs.
func StatusWrites(rs []Request) int {
	n := 0
	for _, r := range rs {
		if r.User == Leasetune && r.Write() && r.Resource == "electionstatuses" {
			n++
		}
	}
	return n
}

// NoCrashes fails t if a container the Kubelet double runs exited
// without being asked to (a crash loop), or if a double could not do its
// part (a pod it could not start, a Service it could not serve, a token
// it could not fill): then the installation is not what the test thinks.
func (in *Installation) NoCrashes(t testing.TB) {
	t.Helper()
	if c := in.Kubelet.Crashes(); len(c) > 0 {
		t.Errorf("containers exited on their own (the Kubelet double restarted them):\n  %s", strings.Join(c, "\n  "))
	}
	if e := in.Kubelet.Errors(); len(e) > 0 {
		t.Errorf("the Kubelet double could not:\n  %s", strings.Join(e, "\n  "))
	}
	if e := in.Services.Errors(); len(e) > 0 {
		t.Errorf("the ServiceProxy could not:\n  %s", strings.Join(e, "\n  "))
	}
	if e := in.Tokens.Errors(); len(e) > 0 {
		t.Errorf("the TokenFiller could not:\n  %s", strings.Join(e, "\n  "))
	}
}

// WaitRunning waits up to limit for Deployment ns/name to run its
// current template.
func (in *Installation) WaitRunning(ns, name string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return in.Kubelet.WaitRunning(ctx, ns, name)
}

var settingSuffix = map[election.Field]string{
	election.LeaseDuration: "-lease-duration", election.RenewDeadline: "-renew-deadline", election.RetryPeriod: "-retry-period",
}

// SetTriple changes the three settings of prefix (e.g.
// "fleet-agent-leader-election") from cur to want as a user does: one
// Setting at a time, in an order in which every step leaves a valid
// triple, since leasetune's webhook checks each edit with the other two
// values (and says such an order when it refuses one). It fails t when
// there is no such order.
func (in *Installation) SetTriple(t testing.TB, prefix string, cur, want election.Timings) {
	t.Helper()
	orders := [][]election.Field{}
	var perm func([]election.Field, []election.Field)
	perm = func(done, rest []election.Field) {
		if len(rest) == 0 {
			orders = append(orders, done)
			return
		}
		for i := range rest {
			next := append(append([]election.Field(nil), rest[:i]...), rest[i+1:]...)
			perm(append(append([]election.Field(nil), done...), rest[i]), next)
		}
	}
	perm(nil, election.Fields[:])
	for _, o := range orders {
		tm, ok := cur, true
		for _, f := range o {
			if tm = tm.With(f, want.Get(f)); tm.Validate() != nil {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for _, f := range o {
			if cur.Get(f) != want.Get(f) {
				in.SetSettings(t, map[string]string{prefix + settingSuffix[f]: want.Get(f).String()})
			}
		}
		return
	}
	t.Fatalf("no order of edits takes %s from %s to %s through valid triples", prefix, cur, want)
}

// SettingsTriple returns the triple the three settings of prefix give
// (an empty value is the default's field).
func (in *Installation) SettingsTriple(t testing.TB, prefix string, defaults election.Timings) election.Timings {
	t.Helper()
	tm := defaults
	for f, sfx := range settingSuffix {
		v := in.SettingValues(t, []string{prefix + sfx})[prefix+sfx]
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("setting %s%s=%q: %v", prefix, sfx, v, err)
		}
		tm = tm.With(f, d)
	}
	return tm
}
