package framework

import (
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/election"
)

// WindowFor is how long the lock traffic of triples is measured: 20 retry
// periods of the slowest, at least a minute. LockRate measures over whole
// renewal intervals, so its edges do not count; `leasetune audit` counts
// the requests in the window, which at a retry period p is one request
// more or less than window/p depending on where the window starts: 20
// periods keep that within 5%, under the checks' 10% (90 s at 10 s, 9
// renewals, gave `leasetune audit` 321/h against the model's 360/h).
func WindowFor(triples ...election.Timings) time.Duration {
	w := time.Minute
	for _, t := range triples {
		if d := 20 * t.RetryPeriod; d > w {
			w = d
		}
	}
	return w
}

// rancherConfig is leasetune's write of the fleet key of Rancher's
// rancher-config ConfigMap (chart/templates/configMap.yaml), where Rancher
// reads the Fleet chart's values (docs/design.md, "How the timings reach each process").
const rancherConfig = "patch configmaps " + RancherNamespace + "/rancher-config"

// FleetCase is case 4 of the suite, against the real Fleet of in (the
// local cluster's fleet-agent in agentNS):
//
//  1. at the settings' defaults (Fleet's chart's own 30s/25s/10s) leasetune
//     writes nothing, and the locks cost what the model says;
//  2. a global agent triple reaches fleet-agentmanagement in one write
//     (and, beside Rancher, one of rancher-config)
//     (FLEET_AGENT_ELECTION_* on its container of the fleet-controller
//     Deployment, one rollout), fleet-agentmanagement renders the agent
//     Bundle anew and the agent's helm upgrade of itself changes the
//     fleet-agent Deployment once: the triple as CATTLE_ELECTION_*, one
//     entry per name, running;
//  3. a fleet-controller triple reaches the three Fleet Deployments in one
//     write each (one rollout each) and no agent;
//  4. the locks then cost what the model says for the new triples.
//
// Expected from Fleet's code at the release tag (both v0.13.14 and
// v0.14.10): charts/fleet/templates/deployment.yaml (FLEET_AGENT_ELECTION_*
// on fleet-agentmanagement; CATTLE_ELECTION_* on each container),
// internal/cmd/controller/agentmanagement/agent/manifest.go (the agent's
// CATTLE_ELECTION_* from the agentmanagement options), internal/cmd/
// options.go (NewLeaderElectionOptionsWithPrefix: both prefixes read at
// start, so a change needs the restart the Deployment write causes).
func FleetCase(t *testing.T, in *Installation, agentNS string) {
	agentLocks := map[string][]string{agentNS: {"fleet-agent"}}
	controllerLocks := map[string][]string{FleetNamespace: FleetLocks}
	defaults := election.FleetDefaults
	agentT := election.Timings{LeaseDuration: 20 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 5 * time.Second}
	// Not the agent's triple: a write of one where the other belongs
	// would go unseen.
	fleetT := election.Timings{LeaseDuration: 24 * time.Second, RenewDeadline: 16 * time.Second, RetryPeriod: 4 * time.Second}
	agent := agentNS + "/fleet-agent"
	controller := FleetNamespace + "/fleet-controller"

	ok := t.Run("1-defaults-write-nothing", func(t *testing.T) {
		if err := in.WaitRunning(agentNS, "fleet-agent", 3*time.Minute); err != nil {
			t.Fatalf("the local fleet-agent does not run: %v\n%s", err, in.Logs(FleetNamespace, "fleet-controller", 30))
		}
		in.Calm(t, 20*time.Second, 3*time.Minute)
		// From leasetune's first moment on (its install): no write but
		// its Settings, its webhook's caBundle and the Setting CRD (without
		// Rancher; the UIPlugin beside Rancher is the chart's, which helm
		// writes), and no rollout.
		since, err := in.Audit.Since(in.BeforeLeasetune)
		if err != nil {
			t.Fatal(err)
		}
		for w, n := range WritesBy(since, Leasetune) {
			switch {
			case strings.HasPrefix(w, "create settings.management.cattle.io /"),
				strings.HasPrefix(w, "patch validatingwebhookconfigurations.admissionregistration.k8s.io /leasetune"),
				w == "create customresourcedefinitions.apiextensions.k8s.io /settings.management.cattle.io":
			default:
				t.Errorf("leasetune wrote at the defaults, since its install: %s ×%d", w, n)
			}
		}
		// (The local agent's Deployment is Fleet's to make and remake while
		// it bootstraps; what leasetune writes reaches it only through
		// fleet-controller's rollout.)
		for _, d := range FleetDeployments {
			key := FleetNamespace + "/" + d
			if n := in.Kubelet.Rollouts(FleetNamespace, d) - in.RolloutsBeforeLeasetune[key]; n != 0 {
				t.Errorf("%s rolled out %d times since leasetune's install, at the defaults", key, n)
			}
		}
		if in.Opts.Rancher {
			if n := in.Kubelet.Rollouts(RancherNamespace, RancherDeployment) - in.RolloutsBeforeLeasetune[RancherNamespace+"/"+RancherDeployment]; n != 0 {
				t.Errorf("Rancher rolled out %d times since leasetune's install, at the defaults", n)
			}
		}
		in.Steady(t, defaults, controllerLocks, 2*time.Minute)
		in.Steady(t, defaults, agentLocks, 2*time.Minute)
		w := in.Measure(t, WindowFor(defaults))
		rs := in.Requests(t, w)
		LeasetuneWrites(t, rs, nil)
		in.CheckLocks(t, w, defaults, FleetClientGo, controllerLocks)
		in.CheckLocks(t, w, defaults, FleetClientGo, agentLocks)
		in.NoCrashes(t)
	})
	if !ok {
		t.FailNow()
	}
	ok = t.Run("2-global-agent-triple", func(t *testing.T) {
		before := in.Rollouts(t)
		mark, _ := in.Audit.Mark()
		in.SetTriple(t, "fleet-agent-leader-election", defaults, agentT)
		Within(t, 2*time.Minute, "FLEET_AGENT_ELECTION_* on fleet-agentmanagement", func() bool {
			got, found := in.ContainerTriple(t, FleetNamespace, "fleet-controller", "fleet-agentmanagement", election.FleetAgentPrefix)
			return found && got == agentT
		})
		Within(t, 3*time.Minute, "CATTLE_ELECTION_* on the fleet-agent Deployment (rendered by fleet-agentmanagement, applied by the agent's helm)", func() bool {
			got, found := in.ContainerTriple(t, agentNS, "fleet-agent", "fleet-agent", election.CattlePrefix)
			return found && got == agentT
		}, func() string {
			return in.Logs(FleetNamespace, "fleet-controller", 20) + in.Logs(agentNS, "fleet-agent", 20)
		})
		if err := in.WaitRunning(agentNS, "fleet-agent", 3*time.Minute); err != nil {
			t.Fatalf("fleet-agent: %v", err)
		}
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		want := map[string]int{"patch deployments.apps " + controller: 1}
		if in.Opts.Rancher {
			want[rancherConfig] = 1
		}
		LeasetuneWrites(t, rs, want)
		in.WantRollouts(t, before, map[string]int{controller: 1, agent: 1})
		if d := in.DuplicateEnvNames(t); len(d) > 0 {
			t.Errorf("duplicate env names:\n  %s", strings.Join(d, "\n  "))
		}
		in.NoCrashes(t)
	})
	if !ok {
		t.FailNow()
	}
	ok = t.Run("3-fleet-controller-triple", func(t *testing.T) {
		before := in.Rollouts(t)
		mark, _ := in.Audit.Mark()
		in.SetTriple(t, "fleet-leader-election", defaults, fleetT)
		for _, d := range FleetDeployments {
			d := d
			Within(t, 2*time.Minute, "CATTLE_ELECTION_* on "+d, func() bool {
				dep := in.Deployment(t, FleetNamespace, d)
				for _, c := range dep.Spec.Template.Spec.Containers {
					got, found, err := election.CattlePrefix.FromEnv(c.Env)
					if err != nil || !found || got != fleetT {
						return false
					}
				}
				return true
			})
		}
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		want := map[string]int{}
		if in.Opts.Rancher {
			want[rancherConfig] = 1
		}
		wantRollouts := map[string]int{}
		for _, d := range FleetDeployments {
			want["patch deployments.apps "+FleetNamespace+"/"+d] = 1
			wantRollouts[FleetNamespace+"/"+d] = 1
		}
		LeasetuneWrites(t, rs, want)
		in.WantRollouts(t, before, wantRollouts)
		if got, _ := in.ContainerTriple(t, agentNS, "fleet-agent", "fleet-agent", election.CattlePrefix); got != agentT {
			t.Errorf("the agent's triple is %s, want %s still", got, agentT)
		}
		if d := in.DuplicateEnvNames(t); len(d) > 0 {
			t.Errorf("duplicate env names:\n  %s", strings.Join(d, "\n  "))
		}
		in.NoCrashes(t)
	})
	if !ok {
		t.FailNow()
	}
	t.Run("4-locks-after", func(t *testing.T) {
		in.Steady(t, fleetT, controllerLocks, 2*time.Minute)
		in.Steady(t, agentT, agentLocks, 2*time.Minute)
		w := in.Measure(t, WindowFor(fleetT, agentT))
		LeasetuneWrites(t, in.Requests(t, w), nil)
		in.CheckLocks(t, w, fleetT, FleetClientGo, controllerLocks)
		in.CheckLocks(t, w, agentT, FleetClientGo, agentLocks)
		in.NoCrashes(t)
	})
}
