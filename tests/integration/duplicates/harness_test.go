package duplicates_test

import (
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/fleetagent"
)

// releases are the Fleet releases checked: one per agent-manifest layout
// (tests/fleetagent), with v0.10 and v0.11 at their first and last patch.
var releases = []string{"v0.9.9", "v0.10.0", "v0.10.16", "v0.11.0", "v0.11.14", "v0.12.0", "v0.13.0", "v0.14.10", "v0.15.2", "v0.16.1"}

// Names leasetune writes.
const (
	L = "CATTLE_ELECTION_LEASE_DURATION"
	D = "CATTLE_ELECTION_RENEW_DEADLINE"
	P = "CATTLE_ELECTION_RETRY_PERIOD"
)

func e(name, value string) map[string]interface{} {
	return map[string]interface{}{"name": name, "value": value}
}

// Entries of the cluster's own that leasetune must keep in place.
var (
	user    = e("HTTPS_PROXY", "http://proxy:3128")
	fromRef = map[string]interface{}{"name": "TOKEN", "valueFrom": map[string]interface{}{
		"secretKeyRef": map[string]interface{}{"name": "s", "key": "k"}}}
)

// Agent triples.
var (
	g0 = election.Timings{LeaseDuration: 60 * time.Second, RenewDeadline: 50 * time.Second, RetryPeriod: 20 * time.Second}
	g1 = election.Timings{LeaseDuration: 40 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 5 * time.Second}
)

// state is what Decide reads besides the env: the global agent triple and
// the override annotations.
type state struct {
	global election.Timings
	vals   [3]string
	set    [3]bool
}

// withRetry returns s with the retryPeriod override annotation set to v.
func (s state) withRetry(v string) state {
	for i, f := range election.Fields {
		if f == election.RetryPeriod {
			s.vals[i], s.set[i] = v, true
		}
	}
	return s
}

// input is what Decide reads of a cluster whose source object has the
// agent env env, leasetune's record rec (nil: none) and s's overrides.
func (s state) input(env []map[string]interface{}, rec map[string]string, ch fleet.AgentChannel, rancher bool) agentenv.Input {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{}}}
	if env != nil {
		items := make([]interface{}, 0, len(env))
		for _, e := range env {
			items = append(items, e)
		}
		u.Object["spec"].(map[string]interface{})["agentEnvVars"] = items
	}
	ann := map[string]string{}
	if rec != nil {
		b, _ := json.Marshal(rec)
		ann[agentenv.RecordAnnotation] = string(b)
	}
	for i, a := range agentenv.OverrideAnnotations {
		if s.set[i] {
			ann[a] = s.vals[i]
		}
	}
	u.SetAnnotations(ann)
	return agentenv.Input{Facts: agentenv.FactsOf(u), Global: s.global, Channel: ch, ClusterAgentReads: rancher}
}

// channelOf is the channel leasetune detects for a release: from the
// fleet-controller image's tag (fleet.DetectChannel, rule 1).
func channelOf(t testing.TB, tag string) fleet.AgentChannel {
	t.Helper()
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: fleet.ControllerContainer, Image: "rancher/fleet:" + tag}}
	det := fleet.DetectChannel(d, "leasetune", "")
	if !det.Certain {
		t.Fatalf("%s: channel %s not certain: %s", tag, det.Channel, det.Evidence)
	}
	return det.Channel
}

// toEnvVars converts Decide's raw items to what Fleet's Cluster type holds.
func toEnvVars(t testing.TB, env []map[string]interface{}) []corev1.EnvVar {
	t.Helper()
	if env == nil {
		return nil
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.EnvVar
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// render is the agent workload Fleet renders in ns.
func render(tag, ns string, agentTriple election.Timings, env []corev1.EnvVar) runtime.Object {
	o := fleetagent.DefaultOptions(tag)
	o.Namespace = ns
	return fleetagent.Object(tag, agentTriple, env, o)
}

// runs is the triple the fleet-agent container runs with, read from the
// rendered env the way a container's env and wrangler/v2 pkg/leader read
// it: the last entry of a name wins, an absent one means wrangler's
// default.
func runs(t testing.TB, ps *corev1.PodSpec) election.Timings {
	t.Helper()
	got := election.WranglerDefaults
	for _, c := range ps.Containers {
		if c.Name != fleetagent.Name {
			continue
		}
		for _, f := range election.Fields {
			name := election.CattlePrefix.EnvName(f)
			for _, ev := range c.Env {
				if ev.Name == name {
					d, err := time.ParseDuration(ev.Value)
					if err != nil {
						t.Fatalf("%s=%q: %v", name, ev.Value, err)
					}
					got = got.With(f, d)
				}
			}
		}
	}
	return got
}
