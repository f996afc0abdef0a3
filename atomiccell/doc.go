// Package atomiccell is the packed, lock-free cell of the sketch: one 64-bit
// word that holds a float32 score and a 32-bit age stamp, updated with
// compare-and-swap loops.
//
// # Word layout
//
//	 63                              32 31                               0
//	+----------------------------------+----------------------------------+
//	|   score: IEEE-754 float32 bits   |  stamp: uint32 ms since epoch    |
//	+----------------------------------+----------------------------------+
//
// The stamp is the owner's clock in milliseconds, relative to an epoch the
// owner chooses (the sketch takes its creation time), truncated to 32 bits.
// Score and stamp change together in one atomic store, so a reader never sees
// a score with the wrong age.
//
// # Invariants
//
//   - A stored score is never NaN or ±Inf: every narrowing goes through
//     RoundUp, which maps values beyond the float32 range to ±MaxFloat32, and
//     a NaN delta panics (Add, Next; the sketch panics first), and
//     NewRules refuses NaN bounds and invalid laws.
//   - No update loses mass: the decayed score plus delta is narrowed to
//     float32 rounding the exact sum toward +Inf (the float64 add's
//     rounding error is kept and stepped over), so a stored score is >=
//     the exact result it stands for, a delta too small for the float64
//     add included, and by induction >= what the float64 reference would
//     hold. Bounds are
//     rounded the same way (see Rules), so a clamped score never drops below
//     Lo.
//   - A stamp never moves backwards: an update keeps the newer of the stored
//     stamp and now, compared modulo 2^32.
//
// # Age arithmetic and the horizon
//
// Elapsed time is int32(now - stamp), modular 32-bit arithmetic, so the
// relative clock may wrap past 2^32 ms (49.7 days) without harm as long as a
// cell is touched at least every 2^31-1 ms (24.8 days). A difference <= 0 is
// zero elapsed time: a clock that steps backwards never grows a score.
//
// On its own, a cell left idle for T >= 2^31 ms would read as if
// int32(T mod 2^32) ms had passed: under-decay, the safe side for a score
// >= 0 (no forgetting), but for a negative score (lo < 0) a read below its
// true value, the unsafe side. The owner keeps every stamp inside the window instead:
// package sketch re-stamps old cells lazily, from its own operations, so
// no age it computes reaches 2^31 (it decays by the true int64 age when it
// re-stamps).
//
// # Core operation (pseudo-code)
//
//	func (c *Cell) Add(r *Rules, now uint32, delta float64, w Word) Word {
//		var bo asm.Backoff        // 32, 64, ... 1024 PAUSEs per round
//		for {
//			s := r.Decay(w.Score(), Elapsed(w.Stamp(), now)) // float64
//			// the least float32 >= clamp(s+delta) with s+delta exact
//			nw := Pack(roundSumUp(s, delta, r.Lo, r.Hi), newer(w.Stamp(), now))
//			if nw == w { // nothing changes (pinned at Hi or Lo, delta 0)
//				if c.Load() == w { // w may be stale: only a load proves it
//					return w // no write: the line stays shared
//				}
//			} else if c.CompareAndSwap(w, nw) {
//				return nw
//			}
//			bo.Spin()    // someone else won: let it keep the line a while
//			w = c.Load() // then redo with the fresh word
//		}
//	}
//
// The loop is lock-free: a CAS fails only because another update succeeded.
// The backoff after a lost race is what makes a hot key fast: the winner
// keeps the line for a few of its operations instead of both cores paying
// a line transfer on every one (docs/design.md, "Hot keys and backoff").
// All operations use sync/atomic, which is sequentially consistent on every
// architecture Go supports (including arm64), so no extra fences are needed.
package atomiccell
