// Package fakes holds the test doubles of the interfaces through which a
// controller reads what other parts of the project decide: the triples in
// effect (settings.Triples, the Provider's) and the Fleet agent channel
// (fleet.ChannelSource). Unit tests and
// integration tests share them. It is a package of its own, not part of
// tests/kit, because it imports pkg/settings, whose own tests import kit.
package fakes

import (
	"sync"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
)

// Triples is a settable settings.Triples: a component has the triple it
// was given, or none (Effective reports false).
type Triples struct {
	mu        sync.Mutex
	t         map[settings.Component]election.Timings
	listeners []func()
}

var _ settings.Triples = (*Triples)(nil)

// NewTriples returns Triples holding (a copy of) t; nil holds none.
func NewTriples(t map[settings.Component]election.Timings) *Triples {
	m := make(map[settings.Component]election.Timings, len(t))
	for c, tm := range t {
		m[c] = tm
	}
	return &Triples{t: m}
}

// FleetTriples returns Triples holding ctrl for fleet-controller and agent
// for the Fleet agent, and none for Rancher.
func FleetTriples(ctrl, agent election.Timings) *Triples {
	return NewTriples(map[settings.Component]election.Timings{settings.FleetController: ctrl, settings.FleetAgent: agent})
}

// AgentTriples returns Triples holding only the Fleet agent's triple, for
// the tests that run the agentenv controller on its own.
func AgentTriples(agent election.Timings) *Triples {
	return NewTriples(map[settings.Component]election.Timings{settings.FleetAgent: agent})
}

// Effective implements settings.Triples.
func (s *Triples) Effective(c settings.Component) (election.Timings, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.t[c]
	return t, ok
}

// OnChange implements settings.Triples.
func (s *Triples) OnChange(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, f)
}

// Set changes c's triple and then calls the listeners, without the lock
// held, as the Provider does when a triple takes effect.
func (s *Triples) Set(c settings.Component, t election.Timings) {
	s.mu.Lock()
	s.t[c] = t
	ls := append([]func(){}, s.listeners...)
	s.mu.Unlock()
	for _, f := range ls {
		f()
	}
}

// Channel is a Fleet agent channel that never changes (it implements
// fleet.ChannelSource); the empty Channel is one not detected (yet).
type Channel fleet.AgentChannel

// Channel implements fleet.ChannelSource.
func (c Channel) Channel() (fleet.AgentChannel, bool) { return fleet.AgentChannel(c), c != "" }

// OnChannelChange implements fleet.ChannelSource: it never changes.
func (c Channel) OnChannelChange(func()) {}
