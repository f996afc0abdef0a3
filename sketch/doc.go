// Package sketch is a lock-free, constant-memory sketch that maps an
// unbounded key space to a decaying score: a count-min sketch whose cells
// hold scores that fade over time. It is a drop-in alternative to the
// mutex-based grudge sketch (same Config, same methods, same semantics);
// package sketch/reference holds the mutex version, for A/B comparisons.
//
// # Model
//
// A Sketch has L levels (rows) of M cells. A key is hashed once and mapped
// to one cell per level. Each cell is one 64-bit word: a float32 score and
// a 32-bit age stamp in milliseconds (package atomiccell). A key's
// estimate is the Aggregator (Min by default) of its L cells, each decayed
// to now.
//
// Decay is lazy: nothing runs in the background and no goroutine is ever
// started. Whoever touches a cell applies the decay law for the time since
// its stamp; this is exact because the laws compose over time subdivision.
//
// # Guarantees
//
// These hold for Sketch, rotator.Rotator, the reference implementations
// and the readings built on them (packages limit and meter), and are what
// sketchtest.TestScorer (and TestRotator, for rotators) checks, except
// the clock reads and the goroutines, which differ in the reference:
//
//   - Every operation touches exactly L cells (per generation) and reads
//     the clock once (the reference rotator once per generation, as
//     grudge does; limit's Decide, Peek and DecideContext take a reading
//     and decide at it through the time-first path, which reads the clock
//     again to bound a time ahead of it, and meter's Novelty.Seen of a
//     key already seen is two operations: two reads); nothing starts a
//     goroutine (the reference rotator's
//     ticker runs one until Close; the suite checks that none outlives
//     its Scorer). Update, Query, UpdateAndQuery, TryUpdate, their
//     String twins and their At forms never allocate; QueryDetailed
//     allocates its result.
//   - No locks: Update and UpdateAndQuery are per-cell CAS loops
//     (lock-free: a CAS fails only because another one succeeded). Query
//     and a denied TryUpdate only read their key's cells. An admitted
//     TryUpdate waits only for an admitted TryUpdate of a key on the same
//     stripe. Two exceptions keep the 32-bit stamps exact (docs/design.md,
//     "The stamp horizon"): an operation that finds the periodic sweep
//     due (about every 2^29 ms, 6.2 days, of sketch time) first
//     re-stamps up to 16,384 cells, values unchanged, where no other
//     operation is sweeping at that instant (it never waits for one); and
//     an operation at or past 2^31 ms after the last sweep (the sketch
//     sat idle 24.8 days, or a clock jumped) takes the sweep lock and
//     re-bases every cell, so the operations that arrive meanwhile wait
//     for it (about a millisecond at L=4, M=100k), once per such gap.
//   - Time never runs backwards: a clock step back counts as zero elapsed
//     time, never as growth, and an At time ahead of the clock counts as
//     the clock's reading. Any idle time, 1 ms to years, decays as int64
//     stamps would (a lazy sweep keeps the 32-bit stamps exact).
//   - NaN or ±Inf delta or limit panics with a message that starts
//     "sketch:" before any cell is touched (the Scorers: Sketch, the
//     rotator, the reference and the root package's; the readings check
//     their own arguments and panic with their own prefix, "meter:" or
//     "limit:"); no cell ever holds NaN or Inf.
//   - Never below the truth: scores are narrowed to float32 rounding up,
//     and exponential decay is biased up by 2^-40, so with Min aggregation
//     and non-negative deltas Query(k) >= the key's true score, whatever
//     the collisions, clamps, roll-backs, rotations or clock jumps
//     (docs/precision.md has the measured error), within the float32
//     range: with Hi = +Inf a score saturates at MaxFloat32 (3.4e38), as
//     if Hi were MaxFloat32 (the float64 reference at MaxFloat64). A Hi
//     that no float32 holds (0.1) is stored rounded up and read back
//     capped at Hi: no level's read exceeds Hi, nor the built-in
//     aggregators' (an AggregateFunc's result is its own). Every add
//     stores the least float32 at or above the exact sum (the float64
//     add's rounding error is kept and stepped over), so a delta below
//     half a float64 ulp of the score, which the reference and grudge
//     lose, still counts; a TryUpdate's aggregate + delta <= limit is a
//     float64 compare, as theirs. The linear law rounds its drain
//     toward +Inf too (the exact errors of rate x dt/1000 and of the subtraction are kept:
//     docs/precision.md, "Linear decay"). The reference implementations decay in float64 rounded to
//     nearest and write the decayed score back at every access, as
//     grudge does: for them this holds up to float64 rounding, which
//     grows with the reads (a relative 5e-14 below the law after a
//     thousand reads under Exponential, 4.5e-12 after 100,000; audits 54
//     and 56).
//   - TryUpdate(k, d, limit) applies d to all L cells only if
//     aggregate + d <= limit, atomically with respect to every other
//     TryUpdate of any key that shares cells with k: N goroutines racing
//     TryUpdate(k, 1, 1000) with no decay admit exactly 1000, and with
//     every key colliding the total admitted never exceeds the limit. Any
//     finite limit is accepted, above Hi too, as in grudge (scores stay
//     clamped at Hi). With negative deltas a reader (a Query, or a
//     TryUpdate of a key sharing the cells on another stripe) can see the
//     decrement of a negative TryUpdate that then meets a conflicting
//     write and is denied, before it is given back: a transient
//     under-estimate, which such a TryUpdate can be admitted on.
//   - Roll-backs (a TryUpdate's undo after a commit conflict, a cancelled
//     reservation) are exact or nothing: a
//     cell gives an increment back only where that cannot take another
//     key's mass (it still holds the very word the call stored, or was
//     written since only within the same millisecond, below Hi, and
//     less than 2^31 ms ago, as 32-bit stamps repeat); otherwise it keeps
//     the increment, an over-estimate. A negative increment, which kept
//     would be an under-estimate, is always given back: exactly, or by
//     adding it back as an Update would (rounded up, never below the
//     cell's value without it).
//   - Each cell is linearizable on its own; a Query is not an atomic
//     snapshot of the L cells (as with grudge's per-cell locks), but
//     TryUpdate-with-Query histories of one key, under Min or Max and
//     with no other key writing its cells, are linearizable (a Mean, or
//     another key's write forcing a roll-back, can show a Query part of
//     an admission in flight: docs/design.md, "What is linearizable").
//   - Snapshots (MarshalBinary, WriteTo, UnmarshalBinary, ReadFrom) are
//     checksummed, refuse another configuration, and restore on a new
//     process clock with every score aged by its downtime
//     (docs/snapshots.md); package sketch/snapshot saves periodically and
//     atomically. Merge adds a replica under the additive law.
//   - An invalid Config is a *ConfigError naming the field and the value,
//     matched by errors.Is(err, ErrInvalidConfig).
//
// docs/design.md argues exactness, progress and memory ordering.
//
// # Naming
//
// One rule across sketch, rotator, the reference, limit, meter, httplimit
// and redis:
//
//   - Keys. The in-process methods whose names come from grudge (Update,
//     Query, UpdateAndQuery, TryUpdate, QueryDetailed) take key []byte,
//     because grudge fixed those signatures; all but QueryDetailed (a
//     diagnostic that may allocate) have a String twin (UpdateString, ...)
//     that takes a string without allocating. Every other method takes
//     key string, and has no twin; so do redis.Sketch's methods, whose
//     grudge names take (ctx, key string) like the rest of that package.
//   - Time. Each in-process operation that decides or writes has a short
//     form that reads the clock and one full form that takes t time.Time
//     first, as golang.org/x/time/rate does: limit's decisions, which
//     take an int count of tokens n as x/time/rate's do, are
//     (t, key, n) and named with its N (AllowN, ReserveN, and limit's
//     own DecideN and PeekN in the same shape); every other full form is
//     named with At (UpdateAt, QueryAt, UpdateAndQueryAt, TryUpdateAt
//     here; ObserveAt, whose n is a float64 weight, and SeenAt in
//     meter). limit.Multi.DecideKeys(t, n, keys...) takes one key per
//     window, so its keys come last (a variadic parameter must). A t is converted to the sketch's own
//     scale through its monotonic reading when present, so time.Now(), a
//     fake clock's Now() and a stored wall time each mean what they say.
//     The default clock (Config.Clock nil, and in every package built on
//     this one) is the runtime's monotonic clock, which a testing/synctest
//     bubble does not fake: scores do not decay across a bubble's fake
//     sleeps unless the clock reads time.Now (limittest.TimeClock does).
//     The exceptions take no t, for a reason: QueryDetailed reads at the
//     clock's now; WaitN blocks on the limiter's clock (ctx first, as
//     x/time/rate's WaitN); redis decides on the server's clock (TIME),
//     so its methods take ctx first and no t.
//
// # Hashing
//
// The default hasher is XXH3, seeded with Config.Seed: fast, and fine
// where keys do not come from an adversary. Wherever keys come from
// clients (IP addresses, user ids, API keys), use SipHash, a keyed PRF,
// with a secret seed (RandomSeed), or a client can choose keys that
// collide with a victim's: packages limit, meter and limit/httplimit do
// that by default. Use a rotator (package rotator) as well: it rehashes
// every generation under a new seed, so even a collision found by
// probing lasts at most one rotation.
//
// # TryUpdate (pseudo-code)
//
//	for {
//		seq := stripe.Load()                 // seqlock read side
//		w, v := load and decay the L cells   // read only
//		if agg(v)+d > limit {
//			return false                   // denial: nothing written
//		}
//		if seq is even && stripe.CAS(seq, seq+1) {
//			break                          // stripe held; snapshot current
//		}
//		backoff
//	}
//	commit:
//	for each cell i {
//		if !cell[i].CAS(w[i], next(w[i], d)) {
//			undo cells < i                 // exact, or keep d there
//			w, v := a fresh snapshot
//			if agg(v)+d > limit { release; return false }
//			goto commit                    // decide again
//		}
//	}
//	stripe.Add(1)                            // release
//
// # Differences from grudge
//
//   - Scores are float32 (rounded up) and ages 32-bit, kept exact by the
//     lazy sweep; a score saturates at ±MaxFloat32 (grudge's float64
//     cells at ±MaxFloat64), so an infinite bound works as that value.
//   - Aggregator is an enum (Min, Max, Mean) rather than a function, so
//     the zero value means Min; a custom function goes in
//     Config.AggregateFunc (the slow path).
//   - The At forms take a time.Time first, as golang.org/x/time/rate does.
//   - Cells are indexed with a multiply-shift instead of mod M (same
//     uniformity, no divide); sketch/reference uses the same layout.
//   - The default clock is the runtime's monotonic clock, not wall time.
package sketch
