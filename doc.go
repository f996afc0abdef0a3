// Package grudge is a grudge-compatible face over the lock-free sketch
// (package sketch) and rotator (package rotator): code written against
// github.com/satmihir/grudge v0.1.0 compiles by changing its import path
// to github.com/lfgrudge/grudge (and grudgetest's), and behaves as
// grudge's README promises, within the float32 rounding described below.
//
// # Model
//
// A Sketch maps an unbounded key space to a score that decays toward 0:
// L levels of M cells; a key owns one cell per level (Kirsch-Mitzenmacher
// double hashing of one 64-bit hash), every operation decays the key's L
// cells to now, applies its delta clamped to [Lo, Hi] and aggregates the L
// scores (Min by default, count-min). A Rotator keeps N such generations:
// writes go to all, reads to the oldest, and the oldest retires every
// Period, so stale collisions last at most N x Period.
//
//	op(key, delta):
//	    h := hash(key)
//	    for l in 0..L-1:
//	        c := cell[l][index(h, l)]
//	        loop:                           // one CAS per cell, no lock
//	            w := load(c)
//	            s := clamp(decay(w.score, now-w.age) + delta, Lo, Hi)
//	            if cas(c, w, {roundUp32(s), now}): break
//	        v[l] = roundUp32(s)             // the score as stored
//	    return aggregate(v)
//
// # What is the same as grudge
//
// Config, RotatorConfig, New, NewRotator, the methods Update, Query,
// UpdateAndQuery, TryUpdate and QueryDetailed (returning Result) on both
// types, Rotator.Close and Rotations, Decay (Exponential, Linear, None),
// Aggregator (Min, Max, Mean or any function), Hasher and HasherFactory
// (Murmur3, the default, and SipHash), Clock, Ticker, SuggestLevels, and
// grudgetest's FakeClock and FakeTicker. No method takes a lock; three
// waits remain, each stated in package sketch ("No locks") or rotator:
// an admitted TryUpdate holds its key's stripe (one of 256) until its
// increment is in every cell (every generation of a Rotator), and
// another admitted TryUpdate on that stripe waits for it; a lazy
// Rotator's operations past a Period's end wait for the one that builds
// the next generation (once per Period); and after 2^31 ms (24.8 days) of
// a sketch's time without a sweep, its first operation re-bases every
// cell under the sweep lock and operations arriving meanwhile wait. A
// custom Decay or HasherFactory runs inside those holds, so a slow one
// lengthens them. All methods are safe for concurrent use. Update,
// Query, UpdateAndQuery and TryUpdate do not allocate with a built-in
// aggregator, except the lazy Rotator's one operation per Period that
// builds the next generation. NaN or ±Inf deltas panic. A
// backwards clock counts as no time passing. TryUpdate is exact: N
// goroutines racing TryUpdate(k, 1, 1000) admit exactly 1000.
//
// # What differs, and why (docs/migrating.md has the details)
//
//   - Scores are float32, rounded toward +Inf on every store, so Min
//     never under-estimates; the error is measured in docs/precision.md
//     (about (score/delta)*2^-23 relative for a decayed counter). Reads
//     are capped at Hi (each level's, and Min's, Max's and Mean's; a
//     custom Aggregator gets the capped levels and its result is its
//     own, as in grudge), and a score saturates at ±MaxFloat32 (3.4e38),
//     so an infinite bound works as that value.
//   - Without a Ticker a Rotator rotates lazily, on the first operation
//     after a Period ends, and starts no goroutine; with a Ticker it
//     rotates once per tick, from one goroutine that Close stops.
//     Periods are counted on Config.Clock (grudge's ticker counts real
//     time: a FakeClock's Advance rotates a lazy Rotator), a lazy
//     Rotator keeps rotating after Close, and its Period is at least 1 ms,
//     rounded up to whole ms.
//   - Each Sketch (each generation) draws a random hash seed; Config has no
//     Seed, as in grudge. Use package sketch for a fixed Seed.
//   - Levels is at most 8; SuggestLevels answers at most 8 and refuses
//     degenerate inputs with an error.
//   - The Ticker interface is C() <-chan time.Time and Stop(): a
//     *time.Ticker has a C field, not a method, so wrap one (see Ticker);
//     Close stops it. grudgetest.FakeTicker.Tick returns once its own
//     rotation is visible, concurrent Ticks included.
//   - New's and NewRotator's errors are the core's (prefix "sketch: " or
//     "rotator: "), naming the field and the value, and match
//     ErrInvalidConfig; SuggestLevels' start "grudge: ".
//
// Native returns the lock-free type underneath, whose API adds string
// keys and time.Time twins (UpdateAt(t, key, delta), ...).
package grudge
