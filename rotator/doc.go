// Package rotator makes a sketch forget: N generations of sketch.Sketch,
// read from the oldest, written to all, the oldest retired every Period.
// It is a drop-in, lock-free alternative to grudge's rotator (same Config
// fields, the methods of sketch.Sketch plus Close); reference.Rotator is
// the mutex version we measure against.
//
// # Model
//
// A Rotator holds an immutable generation set behind one atomic.Pointer:
// N >= 2 sketches, oldest first, and the deadline at which the oldest (the
// primary) retires. Every generation hashes under its own seed, output i
// of the splitmix64 stream seeded with Config.Sketch.Seed for the i-th
// generation ever built, so keys that collide in one generation almost
// surely do not in the next.
//
// Each operation loads the set, reads the clock once through the
// rotator's one sketch.Timebase (shared by every generation: one clock,
// one high-water mark), and passes that time to every generation through
// the sketch's At twins (a generation may see a later time if a
// concurrent operation already used one; never an earlier one):
// writes (Update, UpdateAndQuery, an admitted TryUpdate) go to all N
// generations, reads (Query, QueryDetailed, the decision of TryUpdate)
// to the primary. A generation built by the promotion at deadline t
// becomes primary at t + (N-1)*Period, having received every write for
// N-1 periods (a warm start: a steadily written key keeps its score
// across rotations), and retires at t + N*Period. New builds all N at
// once; the i-th of them (from 0) retires at i+1 periods.
//
// With Config.Prefetch, a write hashes the key for every generation
// first, prefetching each generation's L cells as soon as it has their
// hash (sketch.Sketch.Hash, Prefetch), and only then acts on them, oldest
// first: the N x L cache misses of a key not in cache overlap instead of
// queueing generation behind generation. TryUpdate does the same before
// the primary decides, so a denial pays the younger generations' hashing
// and prefetch for an admission that finds their cells arriving. On keys
// whose cells are cached that is only extra work, so it is off by
// default (package limit turns it on); without it, the younger
// generations are hashed and written after the primary.
//
// # Rotation on access (pseudo-code)
//
// There is no goroutine and no ticker. The operation that first sees the
// deadline passed performs the promotion; the others do not wait:
//
//	set := cur.Load()
//	now := clock()
//	if now >= set.deadline {
//		if set.claimed.CompareAndSwap(false, true) {  // exactly one winner
//			k := (now-set.deadline)/Period + 1        // periods elapsed
//			gens := set.gens[min(k, N):]              // k oldest retire
//			append N-len(gens) fresh sketches          // seeds next, next+1, ...
//			deadline := first set.deadline + j*Period > now
//			cur.CompareAndSwap(set, {gens, deadline})  // cannot fail: we hold the claim
//			set = that new set
//		} else {
//			set = cur.Load()                           // old or new; carry on
//		}
//	}
//	operate on set.gens at time now
//
// # Guarantees
//
//   - No background work: no goroutine, ticker or lock, ever. Close is an
//     idempotent no-op kept so that code written for grudge compiles; the
//     rotator stays usable after it.
//   - Exactly one promotion per deadline crossed: the claim is a CAS on a
//     flag of the immutable set, so concurrent operations that see the
//     deadline passed build nothing and keep using the set they loaded.
//   - Forgetting: a write is gone from every generation at most
//     N x Period after it was made (a false positive lives at most
//     Generations x Period).
//   - Clock jumps: a forward jump of k periods is one promotion of O(N)
//     work: it retires min(k, N) generations and keeps the deadline on
//     the Period grid. A backwards step rotates and decays nothing. The
//     deadline saturates near the end of int64.
//   - TryUpdate is decided by the primary's exact TryUpdate and is exact
//     across promotions (see Rotator.TryUpdate): no generation's admitted
//     total ever exceeds the limit. A denial by the primary writes
//     nothing.
//   - Manual rotators (Config.Manual) rotate only on Rotate, which the
//     grudge-compatible root package drives from a Ticker.
//   - Update, Query, UpdateAndQuery, TryUpdate and their string twins do
//     not allocate, except in the one operation per Period that performs
//     the promotion. NaN or ±Inf delta or limit panics with a message
//     starting "sketch:" before any cell is touched.
//   - Scores of a key in a fresh generation start at 0.
//
// # Races with a promotion
//
// An operation that loaded the set just before a promotion finishes on
// that set. Its writes reach the N-1 generations that carry over but not
// the newborn one, so the newborn may miss the few writes made during the
// promotion: writes at the very start of its window, N-1 periods before
// it is read. TryUpdate is the exception: it checks that the set it
// decided on is still current, and decides again if not.
//
// # Allocate, don't reset
//
// A promotion allocates its fresh generations (a fresh epoch and seed;
// no writer can be stalled in a generation being reset) and leaves the
// retired ones to the garbage collector; docs/design.md, section 6, has
// the measurements behind the choice.
//
// # Differences from grudge
//
//   - Rotation is driven by the clock the sketch uses, not a wall-clock
//     ticker, so a sketchtest.FakeClock drives it in tests and the Period
//     grid follows the monotonic clock.
//   - Period must be at least 1 ms (clocks count whole milliseconds).
//   - Sizes counts the live generations; Stats counts promotions, periods
//     and sketches built.
//   - Any Period works: the generations keep their own stamps inside the
//     32-bit window (sketch.Sketch's lazy sweep).
package rotator
