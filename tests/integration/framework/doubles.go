package framework

import (
	"crypto/rand"
	"math/big"
	"sync"
	"testing"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
)

// AgentTriples is a settable settings.Triples that knows only the agent
// triple, for the tests that run the agentenv controller on its own.
type AgentTriples struct {
	mu        sync.Mutex
	agent     election.Timings
	listeners []func()
}

// NewAgentTriples returns AgentTriples holding t.
func NewAgentTriples(t election.Timings) *AgentTriples { return &AgentTriples{agent: t} }

// Effective implements settings.Triples.
func (s *AgentTriples) Effective(c settings.Component) (election.Timings, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent, c == settings.FleetAgent
}

// OnChange implements settings.Triples.
func (s *AgentTriples) OnChange(f func()) {
	s.mu.Lock()
	s.listeners = append(s.listeners, f)
	s.mu.Unlock()
}

// Set changes the agent triple and tells the listeners, as the Provider
// does when a triple takes effect.
func (s *AgentTriples) Set(t election.Timings) {
	s.mu.Lock()
	s.agent = t
	ls := append([]func(){}, s.listeners...)
	s.mu.Unlock()
	for _, f := range ls {
		f()
	}
}

// FixedChannel is a fleetsettings.Channels that never changes.
type FixedChannel fleet.AgentChannel

// Channel implements fleetsettings.Channels.
func (c FixedChannel) Channel() (fleet.AgentChannel, bool) { return fleet.AgentChannel(c), true }

// OnChannelChange implements fleetsettings.Channels: it never changes.
func (c FixedChannel) OnChannelChange(func()) {}

// LegacyClusterName returns a random legacy Rancher management Cluster
// name, c-xxxxx (rancher/rancher pkg/controllers/provisioningv2/cluster
// controller.go, mgmtNameRegexp).
func LegacyClusterName(t testing.TB) string {
	t.Helper()
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = chars[n.Int64()]
	}
	return "c-" + string(b)
}
