// Package sketch is a lock-free, constant-memory sketch that maps an
// unbounded key space to a decaying score: a count-min sketch whose cells
// hold scores that fade over time. It is a drop-in alternative to the
// mutex-based grudge sketch (same Config, same methods, same semantics);
// sketch/reference holds the mutex version we measure against.
//
// # Model
//
// A Sketch has L levels (rows) of M cells. A key is hashed once (XXH3 by
// default, SipHash for untrusted keys) and mapped to one cell per level
// (see Index). Each cell is one 64-bit word: a float32 score and a 32-bit
// age stamp in milliseconds (package atomiccell). A key's estimate is the
// Aggregator (Min by default) of its L cells, each decayed to now.
//
// [Sketch.Hash] returns a key's hash as a [Hashed] for the Hashed twins of
// the At methods, and [Sketch.Prefetch] starts loading its cells without
// waiting: a caller touching several sketches or keys (the rotator's
// generations, a batch) hashes once and overlaps the cache misses.
//
// Decay is lazy: nothing runs in the background and no goroutine is ever
// started. Whoever touches a cell applies the decay law for the time since
// its stamp; this is exact because the laws compose over time subdivision.
//
// # Guarantees
//
//   - Every operation touches exactly L cells and reads the clock once.
//     Update, Query, UpdateAndQuery, TryUpdate and the string twins never
//     allocate; QueryDetailed allocates its result.
//   - No locks: Update and UpdateAndQuery are per-cell CAS loops
//     (lock-free: a CAS fails only because another one succeeded). Query
//     and a denied TryUpdate only read. An admitted TryUpdate waits only
//     for an admitted TryUpdate on the same stripe (see below).
//   - A backwards clock step counts as zero elapsed time, never as growth:
//     every clock reading and At time passes the high-water mark of the
//     sketch's Timebase, so after a step back time stands still until the
//     clock catches up. An At time ahead of the clock counts as the
//     clock's reading.
//   - Any idle time, 1 ms to years, decays as the reference's int64
//     stamps do: cell stamps are 32-bit, and a lazy sweep, performed by
//     the operations themselves, keeps every stamp within 2^31 ms of now
//     (no goroutine; see docs/design.md, "The stamp horizon").
//   - Each cell is linearizable on its own. Operations on several cells
//     are not atomic snapshots: a Query can combine levels read before and
//     after a concurrent Update (as with grudge's per-cell locks), so only
//     TryUpdate-with-Query histories of one key are linearizable (tested
//     with porcupine; see docs/design.md).
//   - NaN or ±Inf delta or limit panics with a message that starts
//     "sketch:" before any cell is touched; no cell ever holds NaN or Inf.
//   - No lost mass: scores are narrowed to float32 rounding toward +Inf,
//     and exponential decay is biased upward by 2^-40, so with Min
//     aggregation and non-negative deltas Query(k) >= the key's true
//     score, and >= what sketch/reference returns for the same history
//     (docs/precision.md has the measured error).
//   - TryUpdate(k, d, limit) applies d to all L cells only if
//     aggregate + d <= limit, atomically with respect to every other
//     TryUpdate, of k or of any key sharing cells with it: N goroutines
//     racing TryUpdate(k, 1, 1000) with no decay admit exactly 1000, and
//     with every key colliding the total admitted never exceeds the limit.
//     Any finite limit is accepted, above Hi too, as in grudge (scores
//     stay clamped at Hi; an admitted add the clamp cuts is still one
//     admission in that order).
//   - Roll-backs (a TryUpdate's undo after a commit conflict, Refund) are
//     exact or nothing: a cell gets its previous value back only while it
//     still holds the very word the call stored; otherwise it keeps the
//     increment (an over-estimate, never another key's mass).
//   - Snapshots (MarshalBinary, WriteTo, UnmarshalBinary, ReadFrom) are
//     checksummed, refuse another configuration, and restore on a new
//     process clock with every score aged by its downtime; Merge adds a
//     replica under the additive law (exact for None and Exponential,
//     safe-side for Linear through MergeWithin). See docs/snapshots.md;
//     sketch/snapshot saves periodically and atomically.
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
// docs/design.md argues exactness, progress and memory ordering.
//
// # Differences from grudge
//
//   - Scores are float32 (rounded up) and ages 32-bit, kept exact by the
//     lazy sweep.
//   - Aggregator is an enum (Min, Max, Mean) rather than a function, so
//     the zero value means Min; a custom function goes in
//     Config.AggregateFunc (the slow path: an indirect call on a pooled
//     copy of the scores).
//   - The At twins take a time.Time first, as golang.org/x/time/rate does.
//   - Index uses multiply-shift instead of mod M (same uniformity, no
//     divide); sketch/reference uses the same layout.
//   - The default clock is the runtime's monotonic clock, not wall time.
package sketch
