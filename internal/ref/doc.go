// Package ref is the mutex reference sketch (the implementation behind
// the public package sketch/reference, which returns its types as
// sketch.Scorer): a faithful, simple
// re-implementation of grudge (github.com/satmihir/grudge) with the API of
// package sketch. It is the oracle of differential tests and the baseline
// of A/B benchmarks for the lock-free sketch.Sketch; it is not tuned.
//
// # Model
//
// A Sketch is L rows (levels) of M cells. A cell is
//
//	struct{ mu sync.Mutex; score float64; last int64 }   // 24 bytes
//
// where score is the value as of last, a time in milliseconds read from
// Config.Clock (the wall clock, time.Now().UnixMilli(), when nil, as grudge
// does). A key is hashed once, h := Config.Hasher(Config.Seed).Sum64(key)
// (Sum64String for the string twins), and owns cell sketch.Index(h, l, M)
// of each row l: the same layout sketch.Sketch uses, so the two can be
// compared cell for cell (see Sketch.CellScore).
//
// Decay is lazy: every access first brings a cell to the present,
//
//	dt := now - last
//	if dt > 0 { score = Decay.Apply(score, dt); last = now }
//
// so a clock that steps backwards counts as zero elapsed time, never grows
// a score and never moves last back. Every addition is clamped to
// [Config.Lo, Config.Hi]. A key's estimate is Config.Aggregator applied to
// its L decayed scores (Min by default: with non-negative deltas it never
// falls below the key's true score).
//
// # Guarantees
//
//   - Every operation reads the clock once and touches exactly L cells.
//   - Update, Query, UpdateAndQuery, TryUpdate and the string twins
//     UpdateString, QueryString, UpdateAndQueryString, TryUpdateString do
//     not allocate. QueryDetailed allocates its result.
//   - A NaN or ±Inf delta (or limit) panics with a message starting
//     "sketch: " before any cell is touched.
//   - Query writes the decayed score back, as grudge does; by composition of
//     the decay laws this changes no later result (up to rounding).
//   - TryUpdate is atomic with respect to every other operation on the
//     key's cells: N goroutines racing TryUpdate(k, 1, 1000) without decay
//     admit exactly 1000.
//
// # Locking
//
// Update, Query, UpdateAndQuery and QueryDetailed lock one cell at a time,
// in ascending level order, and hold no lock between cells: they are
// atomic per cell, not per key. TryUpdate holds all L locks at once, taken
// in ascending level order; rows are distinct arrays, so the L cells are
// distinct and every caller takes them in the same global order (by
// level), which rules out deadlock.
//
// # TryUpdate
//
//	now := clock()
//	for l := 0; l < L; l++ { lock(cell[l]); decay(cell[l], now); s[l] = cell[l].score }
//	ok := Aggregate(s) + delta <= limit
//	if ok { for l { cell[l].score = clamp(cell[l].score + delta, Lo, Hi) } }
//	for l { unlock(cell[l]) }
//	return ok
//
// # Deviations from grudge
//
//   - Scratch scores live in a [sketch.MaxLevels]float64 array on the
//     stack instead of grudge's sync.Pool of []float64 buffers: as
//     allocation-free, simpler, and no pool traffic.
//   - The level index is Lemire's multiply-shift reduction of the
//     Kirsch-Mitzenmacher hash h1 + l*h2 (h2 forced odd) instead of
//     (h1 + l*h2) mod M; see sketch.Index. The hash functions are XXH3
//     (default) and SipHash-2-4 instead of murmur3 and SipHash.
//   - Cells start with last = the sketch's creation time (grudge starts
//     at 0, which with a clock reading below 0, as a fake clock may,
//     never decays until the clock passes 0).
//   - Every lock, on a cell or on all L cells of a TryUpdate, is
//     released by defer, so a custom decay law or aggregator that panics
//     cannot leave a cell locked.
//   - TryUpdate accepts any finite limit, as grudge does.
//   - An infinite clamp bound (allowed with a draining decay) is applied
//     as ±MaxFloat64, so a sum of huge finite deltas saturates instead of
//     reaching ±Inf (grudge has that hole: Inf, then NaN once exp
//     underflows to 0); no cell ever holds Inf or NaN.
//   - Every clock reading goes through a high-water mark
//     (sketch.Timebase): after a backwards step time stands still for
//     every cell until the clock catches up. grudge keeps the step per
//     cell, so a cell last touched before the step decays to the earlier
//     time; the lock-free sketch cannot do that with a read-only Query, and
//     the oracle must share its time semantics.
//   - The default clock is the wall clock, time.Now().UnixMilli(), as in
//     grudge (costlier to read, and not monotonic); the lock-free sketch
//     defaults to a monotonic clock. Benchmarks that want to separate the
//     two effects give both the same Clock.
//
// Rotator (NewRotator) is grudge's rotator over these sketches: N
// generations under a sync.RWMutex taken on every operation, rotated every
// Period by a time.Ticker goroutine that Close stops (idempotently). It is
// the A/B baseline for package rotator.
package ref
