// Package rotator makes a sketch forget: N generations of sketch.Sketch,
// read from the oldest, written to all, the oldest retired every Period.
// It is a lock-free alternative to grudge's rotator (grudge's Config
// fields but Ticker, sketch.Sketch's Scorer methods plus Close, Stats in
// place of Rotations: see "Differences from grudge"); the grudge root
// package keeps grudge's exact surface and is the drop-in.
// sketch/reference has the mutex version, for A/B comparisons. Package sketch's documentation
// states the guarantees every generation keeps, the naming rule and the
// hashing rule.
//
// # Model
//
// A Rotator holds an immutable generation set behind one atomic.Pointer:
// N >= 2 sketches, oldest first, and the deadline at which the oldest (the
// primary) retires. Every generation hashes under its own seed, derived
// from Config.Sketch.Seed, so keys that collide in one generation almost
// surely do not in the next.
//
// Each operation loads the set and reads the clock once (one clock and
// one high-water mark of time for every generation; a TryUpdate turned
// away by a promotion loads the new set and reads it again). Writes (Update,
// UpdateAndQuery, an admitted TryUpdate) go to all N generations; reads
// (Query, QueryDetailed, the decision of TryUpdate) to the primary. A
// generation becomes primary after N-1 periods of writes (a warm start: a
// steadily written key keeps its score across rotations) and retires one
// period later.
//
// # Rotation on access (pseudo-code)
//
// There is no goroutine and no ticker. The operation that first sees the
// deadline passed performs the promotion; the others past the deadline
// wait for it (its build, once per Period):
//
//	set := cur.Load()
//	now := clock()
//	for now >= set.deadline {
//		if set.claimed.CompareAndSwap(false, true) {  // exactly one winner
//			k := (now-set.deadline)/Period + 1        // periods elapsed
//			gens := set.gens[min(k, N):]              // k oldest retire
//			append N-len(gens) fresh sketches          // each under a new seed
//			deadline := first set.deadline + j*Period > now
//			close set.gens[0]'s TryUpdate stripes       // waits for admissions in flight
//			cur.CompareAndSwap(set, {gens, deadline})  // cannot fail: we hold the claim
//			set = that new set
//		} else {
//			spin until cur.Load() != set, then set = cur.Load()  // the published set
//		}
//	}
//	operate on set.gens at time now
//
// # Guarantees
//
// Besides package sketch's:
//
//   - No background work: no goroutine or ticker, ever. Close is an
//     idempotent no-op kept so that code written for grudge compiles. No
//     lock but package sketch's one exception: where N x Period is 2^31
//     ms (24.8 days) or more, a generation can sit that long without a
//     sweep, and the first operation then re-bases it under its sweep
//     lock while operations arriving meanwhile wait (package sketch, "No
//     locks"); below that a promotion replaces every generation before
//     any old cell is read.
//   - Exactly one promotion per deadline crossed; a forward clock jump of
//     k periods is one promotion of O(N) work, and a backwards step
//     rotates nothing.
//   - Forgetting: a write is gone from every generation at most
//     N x Period after it was made, in the rotator's time (its
//     high-water mark: a write made after the clock stepped back b
//     Periods counts at the mark, so on the clock's own readings it
//     lives up to (N+b) x Period). A deadline past the largest int64
//     millisecond is held there and never crossed (a write within N x
//     Period of the end of int64 time is kept); one exactly at it is
//     crossed as any other.
//   - TryUpdate is decided by the primary's exact TryUpdate and stays
//     exact across promotions: an admission holds its stripe of the
//     primary until its increment is in every generation, a promotion
//     closes the primary's stripes before it publishes the next set, and
//     a call that finds the primary closed decides again on the new set.
//     Nothing is rolled back. The promoting operation waits for the
//     admissions in flight on the primary, each a few CASes.
//   - The hot methods do not allocate, except in the one operation per
//     Period that builds the new generation.
//
// Operations during a promotion. An operation whose time is past the
// deadline while another operation builds the next set waits for that
// set (the build, once per Period: allocating the newborn generations)
// and works on it, so its writes are in every generation that follows.
// Only an operation whose time is before the deadline, in flight when the
// promotion starts, finishes on the old set: the newborn generation may
// miss its writes, which are then at least N-1 periods old when the
// newborn becomes the primary, so the window above holds. The build
// calls Config.Sketch.Hasher's factory: a factory must not operate on its
// own rotator, or that operation would wait for the build it is in.
//
// # Differences from grudge
//
//   - Rotation is driven by the clock the sketch uses, not a wall-clock
//     ticker, so a sketchtest.FakeClock drives it in tests (the grudge
//     root package keeps grudge's Ticker).
//   - Period must be at least 1 ms (clocks count whole milliseconds), and
//     is counted in whole ms rounded up (2.9 ms is 3).
//   - Sizes counts the live generations; Stats counts promotions, periods
//     and sketches built. There is no Rotations method: grudge's count is
//     Stats().Periods (the root package's Rotations reads it, after
//     bringing a lazy rotator up to date).
package rotator
