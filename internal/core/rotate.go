package core

import (
	"math"

	"github.com/lfgrudge/grudge/asm"
)

// promote is called by an operation at time now that found gs past its
// deadline. The first such operation claims gs (one CAS), builds the
// successor and publishes it. Every other one waits for that publish
// (spinning, then yielding) and returns the set published: its time is
// past gs's deadline, so its writes belong in the successor. Writing gs
// instead would lose them when the successor keeps none of gs's
// generations (an idle of N periods or more) and leave them out of the
// newborn ones otherwise (docs/design.md, "Operations during a
// promotion"). The wait is the claimer's build, once per Period. A
// claim given back (a build that panicked) is taken by a waiter. It
// returns the set the caller should use, which may itself be past now's
// deadline if another operation promoted at an earlier time (settle
// loops).
func (r *Rotator) promote(gs *genSet, now int64) *genSet {
	var bo asm.Backoff
	for {
		if gs.claimed.CompareAndSwap(false, true) {
			next, k := r.successor(gs, now)
			r.publish(gs, next)
			r.promotions.Add(1)
			r.periods.Add(k)
			return next
		}
		if cur := r.cur.Load(); cur != gs {
			return cur
		}
		bo.Spin()
	}
}

// publish replaces gs, whose claim the caller holds, by next. It first
// closes the retiring primary's stripes (Sketch.closeStripes): that waits
// for the admitted TryUpdates still writing the younger generations, each
// a few CASes, and turns away later ones, so next's primary holds every
// admission of gs's before anyone decides on it (docs/design.md,
// "TryUpdate across promotions"). The successor is built before, so the
// TryUpdates turned away wait only for the close and the swap.
func (r *Rotator) publish(gs, next *genSet) {
	gs.gens[0].closeStripes()
	if !r.cur.CompareAndSwap(gs, next) {
		// Only the claimer of the current set may replace it.
		panic("rotator: generation set replaced without its claim")
	}
}

// successor builds the set that follows gs at time now >= gs.deadline,
// and returns it with the number k >= 1 of whole periods that elapsed.
// Cost is O(N) whatever k is: the k oldest generations retire; when
// k >= N every generation does, and N fresh ones replace them.
// Precondition: the caller holds gs's claim.
func (r *Rotator) successor(gs *genSet, now int64) (*genSet, uint64) {
	p := r.periodMs
	// now - gs.deadline >= 0, but may pass MaxInt64 (a deadline near
	// MinInt64, a clock near MaxInt64): unsigned, it is exact.
	over := uint64(now) - uint64(gs.deadline)
	k := over/uint64(p) + 1
	next := r.successorN(gs, k, now)
	// The deadline stays on the grid of the original one: the first
	// multiple of p past gs.deadline that is after now. Saturate rather
	// than overflow near the end of int64 (settle never crosses a
	// deadline of MaxInt64).
	next.deadline, next.endless = deadlineAfter(now-int64(over%uint64(p)), p)
	return next, k
}

// successorN returns gs with its k oldest generations retired and fresh
// ones appended, their epoch at now (the promotion's time, not a clock
// read); the caller sets the deadline. If building panics (a user's
// HasherFactory), it gives gs's claim back, or no later operation could
// promote again.
// Precondition: the caller holds gs's claim.
func (r *Rotator) successorN(gs *genSet, k uint64, now int64) (next *genSet) {
	defer func() {
		if next == nil {
			gs.claimed.Store(false)
		}
	}()
	n := len(gs.gens)
	set := &genSet{gens: make([]*Sketch, n), next: gs.next}
	keep := 0
	if k < uint64(n) {
		keep = n - int(k)
		copy(set.gens, gs.gens[k:])
	}
	for i := keep; i < n; i++ {
		set.gens[i] = r.buildSeeded(r.cfg.Sketch.Seed, set.next, &now)
		set.next++
	}
	return set
}

// deadlineAfter returns a + d saturated at the int64 range (addSat),
// and whether it saturated past MaxInt64 ms: a deadline past int64 time,
// never crossed.
func deadlineAfter(a, d int64) (int64, bool) {
	return addSat(a, d), d > 0 && a > math.MaxInt64-d
}
