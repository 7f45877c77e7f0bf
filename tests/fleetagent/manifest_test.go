package fleetagent

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
)

func names(ps *corev1.PodSpec) map[string][]string {
	out := map[string][]string{}
	for _, c := range podContainers(ps) {
		l := []string{}
		for _, e := range c.Env {
			l = append(l, e.Name+"="+e.Value)
		}
		out[c.Name] = l
	}
	return out
}

// TestRender pins what each release renders without cluster env (the
// citations are in manifest.go).
func TestRender(t *testing.T) {
	triple := election.Timings{LeaseDuration: time.Minute, RenewDeadline: 50 * time.Second, RetryPeriod: 20 * time.Second}
	ns, scope, ci := "NAMESPACE=", "AGENT_SCOPE=", "CHECKIN_INTERVAL=15m0s"
	w := []string{"BUNDLEDEPLOYMENT_RECONCILER_WORKERS=50", "DRIFT_RECONCILER_WORKERS=50"}
	cat := func(a ...[]string) []string {
		var out []string
		for _, x := range a {
			out = append(out, x...)
		}
		return out
	}
	fixed := []string{"CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RETRY_PERIOD=10s", "CATTLE_ELECTION_RENEW_DEADLINE=25s"}
	fromTriple := []string{"CATTLE_ELECTION_LEASE_DURATION=1m0s", "CATTLE_ELECTION_RETRY_PERIOD=20s", "CATTLE_ELECTION_RENEW_DEADLINE=50s"}
	v10 := map[string][]string{
		"fleet-agent-register":      {ns},
		"fleet-agent":               {ns, scope},
		"fleet-agent-clusterstatus": {ns, ci},
	}
	v11 := map[string][]string{
		"fleet-agent-register":      {ns},
		"fleet-agent":               cat(w, []string{ns, scope}),
		"fleet-agent-clusterstatus": {ns, ci},
	}
	cases := map[string]map[string][]string{
		"v0.9.9":   {"fleet-agent": {ns, scope, ci}},
		"v0.10.0":  v10,
		"v0.10":    v10,
		"v0.11.2":  v10,
		"v0.11.3":  v11,
		"v0.11":    v11,
		"v0.12.0":  {"fleet-agent": cat(w, []string{ns, scope, ci}, fixed)},
		"v0.13.0":  {"fleet-agent": cat(w, []string{ns, scope, ci}, fromTriple)},
		"v0.14.10": {"fleet-agent": cat(w, []string{ns, scope, ci}, fromTriple, []string{"EXPERIMENTAL_COPY_RESOURCES_DOWNSTREAM=false"})},
		"v0.15.2":  {"fleet-agent": cat(w, []string{ns, scope, ci}, fromTriple, []string{"EXPERIMENTAL_COPY_RESOURCES_DOWNSTREAM=false"})},
		"v0.16.1":  {"fleet-agent": cat(w, []string{ns, scope, ci}, fromTriple)},
		"v0.16":    {"fleet-agent": cat(w, []string{ns, scope, ci}, fromTriple)},
	}
	for v, want := range cases {
		obj := Object(v, triple, nil, DefaultOptions(v))
		if got := names(PodSpec(obj)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", v, got, want)
		}
		if d := Duplicates(PodSpec(obj)); len(d) > 0 {
			t.Errorf("%s renders duplicates itself: %v", v, d)
		}
	}
}

// TestAppendEverywhere: the cluster's entries follow Fleet's in every
// container; a name Fleet renders is then duplicated.
func TestAppendEverywhere(t *testing.T) {
	env := []corev1.EnvVar{{Name: "X", Value: "1"}, {Name: EnvRetryPeriod, Value: "3s"}}
	for _, v := range []string{"v0.9.9", "v0.10.16", "v0.11.14", "v0.12.0", "v0.13.0", "v0.14.10", "v0.16.1"} {
		ps := PodSpec(Object(v, election.FleetDefaults, env, DefaultOptions(v)))
		for _, c := range podContainers(ps) {
			n := len(c.Env)
			if n < 2 || c.Env[n-2].Name != "X" || c.Env[n-1].Name != EnvRetryPeriod {
				t.Errorf("%s %s: cluster env not appended last: %v", v, c.Name, c.Env)
			}
		}
		_, dup := Duplicates(ps)[Name]
		if dup != RendersElectionEnv(v) {
			t.Errorf("%s: duplicate %v, want %v", v, dup, RendersElectionEnv(v))
		}
	}
}

// TestGVKMapping: v0.15.2+ add CATTLE_WRANGLER_CHECK_GVK_ERROR_MAPPING
// from fleet-agentmanagement's env unless the cluster's entries name it.
func TestGVKMapping(t *testing.T) {
	o := DefaultOptions("v0.16.1")
	o.WranglerCheckGVKErrorMapping = "x"
	c := Object("v0.16.1", election.FleetDefaults, nil, o)
	if got := PodSpec(c).Containers[0].Env; got[len(got)-1].Name != EnvWranglerCheckGVKErrorMapping {
		t.Errorf("not rendered: %v", got)
	}
	c = Object("v0.16.1", election.FleetDefaults, []corev1.EnvVar{{Name: EnvWranglerCheckGVKErrorMapping, Value: "y"}}, o)
	if d := Duplicates(PodSpec(c)); len(d) > 0 {
		t.Errorf("duplicated although the cluster names it: %v", d)
	}
	c = Object("v0.14.10", election.FleetDefaults, nil, o)
	for _, e := range PodSpec(c).Containers[0].Env {
		if e.Name == EnvWranglerCheckGVKErrorMapping {
			t.Errorf("v0.14.10 renders %s", e.Name)
		}
	}
}

// TestRenderDeployment: Render gives a Deployment for every release, with
// the StatefulSet's pod template for v0.10-v0.11.
func TestRenderDeployment(t *testing.T) {
	for _, v := range []string{"v0.9.9", "v0.10.16", "v0.11.14", "v0.12.0", "v0.14.10", "v0.16.1"} {
		d := Render(v, election.FleetDefaults, nil)
		if d.Kind != "Deployment" || d.Name != Name {
			t.Errorf("%s: %s %s", v, d.Kind, d.Name)
		}
		if !reflect.DeepEqual(&d.Spec.Template.Spec, PodSpec(Object(v, election.FleetDefaults, nil, DefaultOptions(v)))) {
			t.Errorf("%s: Render's pod spec differs from Object's", v)
		}
		if IsStatefulSet(v) != (v == "v0.10.16" || v == "v0.11.14") {
			t.Errorf("%s: IsStatefulSet = %v", v, IsStatefulSet(v))
		}
	}
}
