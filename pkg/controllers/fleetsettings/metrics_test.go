package fleetsettings

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

func refusedGauge(reason string) float64 {
	return testutil.ToFloat64(metrics.SettingRefused.WithLabelValues(string(settings.FleetAgent), reason))
}

// TestAgentTripleIgnored: a triple is ignored only where the channel
// cannot take it and it differs from what those agents run (or, without
// an election, from the agent settings' default).
func TestAgentTripleIgnored(t *testing.T) {
	for _, c := range []struct {
		ch   fleet.AgentChannel
		t    election.Timings
		want bool
	}{
		{fleet.ChannelAgentManagement, five, false},
		{fleet.ChannelClusterEnvV09, five, false},
		{fleet.ChannelFixedV012, election.FleetDefaults, false}, // what v0.12 agents run
		{fleet.ChannelFixedV012, five, true},
		{fleet.ChannelFixedV090, election.WranglerDefaults, false},
		{fleet.ChannelFixedV090, election.FleetDefaults, true},
		{fleet.ChannelNoElection, election.FleetDefaults, false}, // the default: nothing was asked
		{fleet.ChannelNoElection, five, true},
	} {
		if got := AgentTripleIgnored(c.ch, c.t); got != c.want {
			t.Errorf("AgentTripleIgnored(%s, %s) = %v, want %v", c.ch, c.t, got, c.want)
		}
	}
}

// TestNotApplicableGauge: leasetune_setting_refused{fleet-agent,
// not-applicable} is 1 while the agent triple in effect cannot reach the
// agents of the detected Fleet and differs from what they run, 0 otherwise.
func TestNotApplicableGauge(t *testing.T) {
	for _, c := range []struct {
		name  string
		ch    fleet.AgentChannel
		agent election.Timings
		want  float64
	}{
		{"v0.12, a customized triple", fleet.ChannelFixedV012, five, 1},
		{"v0.12, what its agents run", fleet.ChannelFixedV012, election.FleetDefaults, 0},
		{"v0.13+, a customized triple", fleet.ChannelAgentManagement, five, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctl, _, _, _ := newTestController(t, fakes.FleetTriples(election.FleetDefaults, c.agent), gomock.NewController(t))
			ctl.opts.Channels = fakes.Channel(c.ch)
			metrics.SettingRefused.WithLabelValues(string(settings.FleetAgent), metrics.RefusedNotApplicable).Set(-1)
			ctl.reportAgentTimings()
			if got := refusedGauge(metrics.RefusedNotApplicable); got != c.want {
				t.Errorf("leasetune_setting_refused{not-applicable}: %v, want %v", got, c.want)
			}
		})
	}
}

// TestAgentsRefusedGauge: leasetune_setting_refused{fleet-agent,
// agents-refused} is 1 while the judgement of every agent refuses the
// agent triple in effect, and 0 once it accepts it.
func TestAgentsRefusedGauge(t *testing.T) {
	ctrl := gomock.NewController(t)
	ctl, _, deps, _, q := newQueuedController(t, fakes.FleetTriples(election.FleetDefaults, five), ctrl)
	verdict := errors.New("cluster fleet-default/c1: its agent would run an invalid triple")
	ctl.opts.CheckAgentTriple = func(context.Context, election.Timings, election.Timings, fleet.AgentChannel) error { return verdict }
	cache := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
	deps.EXPECT().Cache().Return(cache).AnyTimes()
	// fleet-agentmanagement runs 30s/25s/10s; the agent triple in effect is 30s/25s/5s.
	cache.EXPECT().Get("cattle-fleet-system", fleet.ControllerDeployment).Return(kit.Deployment("cattle-fleet-system", fleet.ControllerDeployment,
		kit.WithContainer(fleet.AgentManagementContainer, append(append([]corev1.EnvVar{}, fleetEnv...), agentEnv...)...)), nil).AnyTimes()

	setRefused(metrics.RefusedByAgents, false)
	g := ctl.gather(context.Background())
	if g.in.AgentOK {
		t.Fatal("a refused agent triple is in the inputs")
	}
	if got := refusedGauge(metrics.RefusedByAgents); got != 0 {
		t.Errorf("refused by the agents, before the report: %v, want 0 (gathering reports nothing)", got)
	}
	ctl.reportJudgement(g)
	if got := refusedGauge(metrics.RefusedByAgents); got != 1 {
		t.Errorf("refused by the agents: %v, want 1", got)
	}
	if got, want := q.Added(), []string{"add deployment cattle-fleet-system/fleet-controller after 30s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("enqueued %q, want %q (judged again)", got, want)
	}
	verdict = nil
	g = ctl.gather(context.Background())
	if !g.in.AgentOK {
		t.Fatal("an accepted agent triple is not in the inputs")
	}
	ctl.reportJudgement(g)
	if got := refusedGauge(metrics.RefusedByAgents); got != 0 {
		t.Errorf("accepted by the agents: %v, want 0", got)
	}
}

// TestPropagationGauges: a triple change owes a sync to each target
// Deployment and to rancher-config; leasetune_propagation_pending counts
// down as they are synced, and the deadline is the change's start (the
// Deployments are written unpaced); both are 0 once all are synced.
func TestPropagationGauges(t *testing.T) {
	pending := func() float64 { return testutil.ToFloat64(metrics.PropagationPending.WithLabelValues(controllerName)) }
	deadline := func() float64 { return testutil.ToFloat64(metrics.PropagationDeadline.WithLabelValues(controllerName)) }
	ctl, _, _, _ := newTestController(t, fakes.NewTriples(nil), gomock.NewController(t))
	at := time.Unix(1_800_000_000, 500_000_000)
	fc, gj := Key{Namespace: "cattle-fleet-system", Name: "fleet-controller"}, Key{Namespace: "cattle-fleet-system", Name: "gitjob"}
	ctl.beginPropagation(at, []Key{fc, gj})
	if got, gotD := pending(), deadline(); got != 3 || gotD != 1_800_000_000.5 {
		t.Errorf("after the change: pending %v, deadline %v, want 3 and 1800000000.5", got, gotD)
	}
	ctl.synced(gj)
	ctl.synced(gj)                                                      // once only
	ctl.synced(Key{Namespace: "cattle-fleet-system", Name: "helmops"})  // not owed
	ctl.synced(Key{Namespace: "cattle-system", Name: "rancher-config"}) // a Deployment's key: not owed
	if got, gotD := pending(), deadline(); got != 2 || gotD != 1_800_000_000.5 {
		t.Errorf("after gitjob: pending %v, deadline %v, want 2 and 1800000000.5", got, gotD)
	}
	ctl.synced(fc)
	ctl.synced(ctl.rancherConfigKey())
	if got, gotD := pending(), deadline(); got != 0 || gotD != 0 {
		t.Errorf("after all: pending %v, deadline %v, want 0 and 0", got, gotD)
	}
}

// TestAgentTripleJudgedWhateverTheChannel: while the channel is not known
// (fleetchannel's record failed) or is another writer's, an agent triple
// change on a fleet-agentmanagement that carries FLEET_AGENT_ELECTION_*
// (Fleet v0.13+) is still judged, and a refusal writes nothing.
func TestAgentTripleJudgedWhateverTheChannel(t *testing.T) {
	for _, ch := range []fleet.AgentChannel{"", fleet.ChannelFixedV012, fleet.ChannelAgentManagement} {
		t.Run(string(ch)+"|", func(t *testing.T) {
			ctrl := gomock.NewController(t)
			ctl, cs, deps, _, q := newQueuedController(t, fakes.FleetTriples(election.FleetDefaults, five), ctrl)
			ctl.opts.Channels = fakes.Channel(ch)
			judged := 0
			ctl.opts.CheckAgentTriple = func(_ context.Context, _, _ election.Timings, as fleet.AgentChannel) error {
				judged++
				if as != fleet.ChannelAgentManagement {
					t.Errorf("judged as channel %q, want %s", as, fleet.ChannelAgentManagement)
				}
				return errors.New("cluster fleet-default/c1: its agent would run an invalid triple")
			}
			d := kit.Deployment("cattle-fleet-system", fleet.ControllerDeployment,
				kit.WithContainer(fleet.AgentManagementContainer, append(append([]corev1.EnvVar{}, fleetEnv...), agentEnv...)...))
			cache := fake.NewMockCacheInterface[*appsv1.Deployment](ctrl)
			deps.EXPECT().Cache().Return(cache).AnyTimes()
			cache.EXPECT().Get("cattle-fleet-system", fleet.ControllerDeployment).Return(d, nil).AnyTimes()
			if err := ctl.syncDeployment(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if got, want := q.Added(), []string{"add deployment cattle-fleet-system/fleet-controller after 30s"}; !reflect.DeepEqual(got, want) {
				t.Errorf("enqueued %q, want %q (judged again)", got, want)
			}
			if judged != 1 {
				t.Errorf("judged %d times, want once", judged)
			}
			if n := len(cs.Actions()); n != 0 {
				t.Errorf("%d API calls for a refused agent triple: %v", n, cs.Actions())
			}
		})
	}
}
