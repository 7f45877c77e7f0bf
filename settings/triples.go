package settings

import "leasetune.io/leasetune/pkg/election"

// Triples offers the effective triple of each component to the
// controllers. A triple it returns has passed election.Timings.Validate.
type Triples interface {
	// Effective returns the triple in effect for c, and false when none is
	// known yet (then nothing may be propagated for c).
	Effective(c Component) (election.Timings, bool)
	// OnChange registers f to be called, without locks held, after any
	// effective triple changed. f must not block.
	OnChange(f func())
}
