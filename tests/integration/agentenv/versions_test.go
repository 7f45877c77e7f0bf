package agentenv_test

import (
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// useFleetCRD replaces clusters.fleet.cattle.io with a Fleet release's CRD.
func useFleetCRD(t *testing.T, version string) { cp.UseFleetCRD(t, version) }

// TestFixtureVersions: with each Fleet release's Cluster CRD and channel,
// a cluster is written only where its agent would otherwise run another
// triple, and the agent customizations survive exactly.
func TestFixtureVersions(t *testing.T) {
	defer useFleetCRD(t, "v0.14.10") // the package's default
	cases := []struct {
		version string
		channel fleet.AgentChannel
		// want is the env written for the global Fleet defaults 30s/25s/10s
		// (nil: no write, the agent already runs them or runs no election).
		want []string
	}{
		{"v0.9.9", fleet.ChannelClusterEnvV09, []string{"HTTPS_PROXY=http://proxy:3128",
			"CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=10s"}},
		{"v0.12.0", fleet.ChannelFixedV012, nil},
		{"v0.12.0", fleet.ChannelNoElection, nil}, // the v0.10-v0.11 behaviour, on the nearest CRD
		{"v0.9.9", fleet.ChannelFixedV090, nil},   // v0.9.0 reads no env
		{"v0.14.10", fleet.ChannelAgentManagement, nil},
		{"v0.15.6", fleet.ChannelAgentManagement, nil},
		{"v0.16.1", fleet.ChannelAgentManagement, nil},
	}
	for _, c := range cases {
		t.Run(c.version+"/"+string(c.channel), func(t *testing.T) {
			useFleetCRD(t, c.version)
			ns := cp.Namespace(t)
			before := cp.Create(t, fleetGVR, fleetCluster(ns, "local", kit.WithEnv(user)))
			r := start(t, fakes.AgentTriples(election.FleetDefaults), c.channel)
			want := c.want
			if want == nil {
				want = []string{"HTTPS_PROXY=http://proxy:3128"}
			}
			framework.Eventually(t, "converged", func() bool {
				return strings.Join(kit.AgentEnv(getObj(t, fleetGVR, ns, "local")), ",") == strings.Join(want, ",")
			})
			writes := r.settle()
			if c.want == nil {
				r.writes.NoWrites(t, "nothing to write", framework.ConsistentlyMin, r.idle)
				writes = r.writes.Writes()
			}
			if (c.want == nil) != (writes == 0) {
				t.Errorf("%d writes", writes)
			}
			if a, b := kit.Stripped(t, before, notEnv...), kit.Stripped(t, getObj(t, fleetGVR, ns, "local"), notEnv...); a != b {
				t.Errorf("agent customizations changed:\n%s\n%s", a, b)
			}
			r.cancel()
			time.Sleep(100 * time.Millisecond)
		})
	}
}
