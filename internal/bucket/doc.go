// Package bucket is a table of per-key loads in constant memory that
// holds a key at its limit in about 5 bytes (at 1% to 0.1% of fresh keys
// denied; below about 7e-4 its 16-bit fingerprints set the size): a
// million keys at full debt in limit's default 6.10 MiB deny 0.03% of
// fresh keys, where the
// count-min sketch of the same memory denies 99.98% (docs/capacity.md).
// It is package limit's default engine wherever it is the exact token
// bucket (limit/doc.go, "Engines"; docs/design.md section 8, "In package
// limit"): where a count-min needs about ten cells per throttled key to
// tell a fresh key from a throttled one, a bucketed table needs one
// 32-bit entry. Its tests that need rapid, porcupine or goleak live in
// tests/internal/bucket, through the seams of seams.go and model.go.
//
// # Model
//
// The table is Lines cache lines of 64 bytes. A line holds a header word
// and 14 entries:
//
//	header:  lw (47 bits: the latest ms at which the line was written)
//	         moving (1 bit: a move of lw into a later epoch is on)
//	         fo (16 bits: the eviction floor, in ticks above lw's tick)
//	entry:   fingerprint (16 bits, never 0) | stamp residue (16 bits)
//	empty:   fingerprint 0 | a version (16 bits)
//
// A key is hashed once with a keyed hash (SipHash-2-4 under a seed from
// crypto/rand by default): two lines (two choices, Azar et al. 1994) and a
// 16-bit fingerprint. The key's state is a stamp: a tick count that time
// does not change. For the linear law (a limiter's debt, draining at Rate
// per second) the stamp is the tick at which the debt reaches 0, GCRA's
// "theoretical arrival time"; for the exponential law, the tick at which
// the load will have decayed to Resolution. The load at tick t is a
// function of stamp - t; a stamp at or before t is a load of 0. Decay is
// therefore free: nothing is rewritten as time passes. An entry stores the
// stamp's low 16 bits; since every stamp is within Span ticks (< 2^16) of
// its line's lw, the residue locates it in the window
// (lw + Span + 1 - 2^16, lw + Span + 1]. A writer that moves lw clears
// the entries that would fall below the new window before it publishes
// the move, in steps that no entry still live falls out of; a move into
// a later epoch of the line's time (a fraction of the window's slack)
// also seals the line, changing every word that holds a free slot, so
// that a write prepared before the move either fails its CAS or stores a
// stamp that reads correctly in every window to come; readers read a
// line's header before and after its entries; so no entry is ever read
// against a window it is not in (docs/design.md, "Moving a line's
// time").
//
// A key's estimate is the largest of: the stamps of the entries of its two
// lines that carry its fingerprint (its candidates), and the two lines'
// eviction floors. A key that is not found thus inherits the floors, the
// per-line form of Space-Saving's rule (Metwally et al. 2005): an entry is
// evicted only when both of a new key's lines are full of live entries,
// and the evicted stamp is folded into its line's floor first, so no
// key's load ever leaves the table. docs/design.md ("The bucket engine")
// proves that the estimate is never below the truth, and what a
// fingerprint collision costs.
//
// # Guarantees
//
//   - One-sided: Query(k) >= k's true load, whatever evictions, floors,
//     fingerprint collisions, decay, refunds and races; a key at its limit
//     is never admitted early.
//   - TryUpdate is exact for one key under contention: G goroutines racing
//     TryUpdate(k, 1, 1000) on a fresh engine with time frozen admit
//     exactly 1000. Across keys it never over-admits.
//   - Lock-free: 64-bit loads and CAS on the line's words, no lock, no
//     goroutine, no allocation (but the one 16-byte sweep plan per 2^28
//     floor epochs: Engine). An operation touches two cache lines,
//     prefetched together.
//   - Exact arithmetic: loads are whole ticks (Quantum.Unit: 1/1500 of a
//     token for limit.New(10, 20), 15 ticks per ms); whole-token requests
//     and limits are exact. The linear law drains at Quantum.Rate, equal
//     to Rate for rates that divide evenly into ticks and otherwise
//     slightly below it (the safe side). When MaxDebt takes longer than
//     61 s to drain (limit.New(0.5, 20)), a tick is longer than 1 ms
//     (Quantum.Tick): a write counts from the end of its tick, so a debt
//     can read up to one tick high, and a key asking for its burst one
//     token at a time within one tick may get one token fewer.
//
// # The operation
//
//	i0, i1, fp := lines and fingerprint of hash(key)
//	prefetch lines i0, i1
//	loop:
//	    load the 14 entry words of both lines, then both headers
//	    t   := max(now, lw0, lw1)                 // never before a write made
//	    est := max(floor0, floor1, stamps of fp's entries)
//	    Query: return load(est, t)
//	    TryUpdate: if load(est, t) + n > limit { return false }  // read only
//	    ns  := stamp of load(est, t) + n, written at t (clamped at Max)
//	    target := fp's first entry; else a free slot (empty or expired)
//	              of the line with fewer live entries; else the entry
//	              whose eviction raises its line's floor least
//	    if the target line's lw < t:
//	        move lw to t (clear entries long expired; into a later
//	        epoch, under the moving bit, sealing)   // changed words: loop
//	    if evicting:
//	        CAS header: floor = max(floor, victim)            // failed: loop
//	        CAS the victim's word to an empty slot            // failed: loop
//	    CAS target word with (fp, ns)                         // failed: loop
//	    reload both lines: if another entry of fp changed, or a floor
//	        rose above est, a concurrent write may be missing from est:
//	        undo ours exactly and loop
//	        (TryUpdate denies after 4 rounds, or when ours cannot be
//	        undone; Update then writes the sum of fp's entries instead,
//	        each counted from the first view's line time: high by up to
//	        the lines' idle time per extra entry and a floor of the
//	        key's lines per entry, at most Max)
//	    return true                      // at t, even if a line moved on
//
// Refund (of a TryReserve) is an exact undo: it restores the entry the
// write replaced if the entry still holds exactly what the write stored,
// and otherwise keeps the debt. An undo or a refund lowers a stamp by at
// most the window's slack less two epochs per CAS; a write larger than
// that is given back in steps, the first of which commits the refund, and
// a write of the key that lands between two steps keeps the part not yet
// given back (an over-count).
//
// # Saturation and sizing
//
// Saturation samples line pairs and returns the estimated probability
// that a fresh key is denied; Suggest picks Lines for a number of keys at
// their limit and an acceptable rate of such denials. Both, and their
// accuracy, are in docs/capacity.md.
package bucket
