// Package limit is a per-key token bucket over an unbounded key space in
// constant memory: a limiter for every client IP, user or API key that
// never needs purging. It follows golang.org/x/time/rate's conventions
// (Limit, Every, Inf; AllowN(t, key, n), ReserveN, WaitN) and answers a
// Decision in the shape of redis_rate's Result.
//
// # Model: debt form
//
// Each key owes a debt. A request for n tokens adds n; the debt drains at
// Limit per second and never goes below 0. A request is admitted iff
// debt + n <= burst. This is the token bucket (tokens = burst - debt)
// written so that an absent key is a zero debt: the state of every key
// lives in a rotator.Rotator of count-min sketches with
//
//	Decay: decay.Linear(limit), Lo: 0, Hi: MaxDebt, Aggregator: Min,
//	Hasher: sketch.SipHash() keyed from crypto/rand (WithSeed to fix it)
//
// so memory is Generations x Levels x CellsPerLevel x 8 bytes whatever
// the number of keys. Strict mode (the default) is one call:
//
//	admitted := rotator.TryUpdate(key, n, burst)  // exact under contention
//	if !admitted && rejectCost > 0 { rotator.Update(key, rejectCost) }
//
// Optimistic mode (WithStrict(false)) is Query, then Update if it fits: a
// little cheaper on the admitted path, but callers racing on one key can
// all pass the read, so it over-admits by at most the number of racers.
//
// # Error side
//
// With Min aggregation a key's read debt is at least its own debt (every
// cell holds the key's debt plus its collisions' debt, rounded up in
// float32), so a collision can only deny a key early, never admit it
// past its own limit. RetryAfter is derived from the debt the sketch
// reads, so it is exact for a key alone in its cells and only late, never
// early, under collisions.
//
// # Rotation and amnesty
//
// Rotation exists to re-roll the seeds, so that a key unlucky enough to
// share all its cells with a heavy hitter is unlucky for one Period at
// most. A generation becomes the primary (the one read) after it has
// received every write for (G-1) periods, G = Generations. What it has
// not seen is the debt a key already had when the generation was built,
// and that debt drains at rate. So a key that went silent at MaxDebt is
// never amnestied when (G-1) x Period x rate >= MaxDebt: by the time the
// generation that missed its debt is read, the debt has drained anyway.
// New refuses a shorter Period. A key that keeps being admitted at
// exactly its rate can keep its old debt unseen by the young generation
// (both drain at the same rate), and gains at most that debt, <= MaxDebt,
// once per (G-1) x Period; the default Period is PeriodFactor (16) times
// the minimum, which bounds that gain to 1/16 of the rate in the worst
// case (a client hammering at the limit), and to nothing for any client
// that pauses for MaxDebt/rate in a Period.
//
// # Multi-window
//
// Multi decides several limiters all-or-nothing: see its doc for what a
// concurrent reader can observe.
//
// # Input
//
// New returns an error for a NaN, zero or negative limit, a burst < 1, or
// an invalid option. n <= 0 panics ("limit: AllowN: n must be > 0; got
// 0"). n > burst is never admitted and its Decision says Never.
package limit
