package core

import (
	"math"
	"time"

	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/law"
)

// TryUpdate adds delta to the key's score at every level only if the
// aggregate (decayed to now) plus delta is at most limit, and reports
// whether it did. Any finite limit is accepted, as in grudge: with limit
// above Hi the decision is still aggregate + delta <= limit, and the
// scores an admitted call stores are clamped at Hi. It panics if delta or
// limit is NaN or ±Inf.
//
// Admitted TryUpdates are linearizable among themselves, for one key and
// for keys that share cells: each decides on values that all L cells held
// at one instant. So N goroutines racing TryUpdate(k, 1, 1000) with no
// decay admit exactly 1000, and with every key colliding (CellsPerLevel=1)
// the total admitted over all keys never exceeds the limit. A denial
// writes nothing, except after a commit conflict whose roll-back could not
// be exact (see [Sketch.Refund]): then a positive increment stays in the
// cells it could not restore, an over-estimate, and a negative one is
// added back (rollback). docs/design.md has the protocol and its
// argument.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	CheckTry(delta, limit)
	return s.tryUpdate(s.sum64(key), delta, limit, s.nowMillis())
}

// TryUpdateString is TryUpdate for a string key, without allocating.
func (s *Sketch) TryUpdateString(key string, delta, limit float64) bool {
	CheckTry(delta, limit)
	return s.tryUpdate(s.sum64String(key), delta, limit, s.nowMillis())
}

// CheckTry panics, with a message that starts "sketch:", if delta or
// limit is NaN or ±Inf: one compare chain on the hot path, the message
// from the slow path. Any finite limit is valid (above Hi too: the
// decision is aggregate + delta <= limit).
// It inlines (TestInlining), so the check costs its caller two
// subtractions and a compare.
func CheckTry(delta, limit float64) {
	if (delta-delta)+(limit-limit) != 0 {
		panicTry(delta, limit)
	}
}

//go:noinline
func panicTry(delta, limit float64) {
	CheckFinite("TryUpdate", "delta", delta)
	CheckFinite("TryUpdate", "limit", limit)
}

// Receipt records, per level, the word an admitted call stored in the
// key's cell and the word that takes the increment back out, so that
// Refund can restore the cells nothing else has written since. The zero
// Receipt refunds nothing. A Receipt is a value (no allocation) and
// belongs to the sketch that issued it.
type Receipt struct {
	h      uint64 // the key's hash
	resets uint64 // the sketch's Reset/load count when issued: a Receipt from before is void
	levels uint32 // 0 for the zero Receipt
	held   uint32 // bit l: level l kept an increment of the call's that a conflict could not undo; Refund cannot give it back
	ms     int64  // the call's time (at most its words' stamps): a Refund 2^31 ms later gives nothing back (rollback)
	// stored[l] is the word the call left in level l's cell; restore[l]
	// the cell's previous value decayed to that word's stamp (rounded up)
	// at the same stamp. restore[l] == stored[l]: nothing to give back
	// (a zero increment, or a level whose roll-back already failed).
	// A conservative sketch's receipt holds the words the call left in
	// stored, for Reserved only (its Refund gives nothing back).
	stored, restore [MaxLevels]atom.Word
}

// TryReserveAt is TryUpdateAt that also returns a Receipt of the admitted
// increment, for a caller that may have to take it back (the rotator's
// generations, a limiter's reservation or a multi-window decision).
func (s *Sketch) TryReserveAt(t time.Time, key []byte, delta, limit float64) (Receipt, bool) {
	CheckTry(delta, limit)
	var rc Receipt
	ok := s.tryUpdateReceipt(s.sum64(key), delta, limit, s.tb.Millis(t), &rc)
	return rc, ok
}

// TryReserveStringAt is TryReserveAt for a string key.
func (s *Sketch) TryReserveStringAt(t time.Time, key string, delta, limit float64) (Receipt, bool) {
	CheckTry(delta, limit)
	var rc Receipt
	ok := s.tryUpdateReceipt(s.sum64String(key), delta, limit, s.tb.Millis(t), &rc)
	return rc, ok
}

// Refund takes back what rc recorded, cell by cell, never taking another
// key's mass, whatever the decay law:
//   - a cell that still holds the very word the call stored gets its
//     previous value back (decayed to the same time);
//   - a cell written since, in the same millisecond, has the increment
//     subtracted, provided no clamp can have cut an add meanwhile (its
//     score is below Hi, and no negative delta has ever been applied to
//     the sketch: see docs/design.md, "Roll-backs");
//   - any other cell (time has passed, the cell is at Hi, the call's own
//     add reached Hi, or negative deltas are in use) keeps the increment:
//     an over-estimate;
//   - a negative increment is always given back (kept, it would be an
//     under-estimate): by the CAS above, or else added back as an Update
//     adds, rounded up (rollback says why that is never too little).
//
// It reports whether every level was given back, and clears rc, so a
// second Refund does nothing. The zero Receipt refunds nothing and
// reports true. A Receipt is void after Reset or a snapshot load. A
// conservative sketch (Config.Conservative) gives nothing back and
// reports false (conservative.go says why).
func (s *Sketch) Refund(rc *Receipt) bool {
	if rc.levels == 0 {
		return true
	}
	levels := rc.levels
	rc.levels = 0
	if rc.resets != s.resets.Load() || s.cu {
		return false // void, or conservative (conservative.go): nothing comes back
	}
	var c [MaxLevels]*atom.Cell
	s.cellsOf(rc.h, &c)
	all := rc.held == 0 // a held level keeps its increment (audit 106)
	for l := range levels {
		if !s.rollback(c[l], rc.stored[l], rc.restore[l], rc.ms) {
			all = false
		}
	}
	return all
}

// Reserved returns the key's estimate right after the admitted call rc
// records, its own increment included, and the time it holds at (ms on
// the sketch's Timebase): what a Query at that instant would have read
// had nothing written the key's cells since. Writes that reached the
// cells before the call's are in it; writes after it are not, so for
// calls of one key serialized on its stripe (TryUpdate) it is the
// estimate after this call in their order. Call it before Refund, which
// clears rc; the zero Receipt's answer means nothing.
func (s *Sketch) Reserved(rc *Receipt) (ms int64, v float64) {
	// A word stamped after the call's time (a conflict's fresh
	// snapshot, a conservative raise that found a later writer's word,
	// or a call whose time was behind a racing one's) moves the reading
	// to its stamp: decayed only to the call's time, the word would
	// read as if it held there, which is early.
	now := s.stamp(rc.ms)
	ms = rc.ms
	for l := range s.levels {
		if d := int32(rc.stored[l].Stamp() - now); d > 0 {
			now += uint32(d)
			ms += int64(d)
		}
	}
	var vs [MaxLevels]float64
	lowest := s.rules.ValueN(&rc.stored, s.levels, now, &vs) // only reads rc
	return ms, s.aggregateOf(vs[:s.levels], lowest)
}

// rollback takes an increment back out of c, which the call set from a
// word worth restore to stored. It reports whether the cell no longer
// holds the increment. Three cases, each safe (docs/design.md,
// "Roll-backs"):
//
//   - stored at Hi: never. A later add that the clamp cut entirely would
//     leave the very same word, so neither a CAS nor the score can tell
//     whether the increment still stands alone above the others' mass.
//   - the cell still holds stored: one CAS back to restore, exact for any
//     law (restore is the previous value decayed to stored's stamp).
//   - the cell was written since, at stored's stamp (no time has passed,
//     so no decay), is below Hi, and the sketch has never applied a
//     negative delta: subtract the increment. Without negative deltas a
//     cell that reached Hi stays at Hi for the rest of that millisecond,
//     so a cell below Hi has had no add cut since the call stored its
//     word, and it holds the others' mass plus the increment exactly
//     (rounded up).
//
// Otherwise the cell keeps the increment: an over-estimate.
//
// Both tests read 32-bit stamps, which repeat every 2^32 ms (49.7 days):
// a word written exactly 2^32 ms after stored, or the identical word, is
// another key's mass. So once the sketch's time is 2^31 ms past ms, the
// time of the call that stored the word, nothing is given back.
//
// A negative increment (stored below restore) is always given back:
// kept, it would be an under-estimate. The cell that still holds stored
// gets restore back by CAS, as above; any other gets the difference
// added, as an Update adds it (decayed, rounded up, clamped). That is
// never below the cell's value without the call: the laws and the
// clamps are monotone and move two values no further apart, so the cell
// is at most the difference below it (docs/design.md, "Roll-backs",
// case 6).
func (s *Sketch) rollback(c *atom.Cell, stored, restore atom.Word, ms int64) bool {
	if stored == restore {
		return true
	}
	if stored.Score() < restore.Score() {
		if !c.CompareAndSwap(stored, restore) {
			s.addLoop(c, &ms, atom.SumUp(float64(restore.Score()), -float64(stored.Score())), false)
		}
		return true
	}
	// A conserved sketch reads no stamp: its subtraction below holds
	// however long ago the call was (audit 109: a clock jump of 2^31 ms
	// during a refused TryAcquire kept its +1 for good).
	if stored.Score() == s.hi32 || !s.conserved && s.tb.hw.Load()-ms >= 1<<31 {
		return false
	}
	if c.CompareAndSwap(stored, restore) {
		return true
	}
	for {
		w := c.Load()
		// The flag is read after the word: a negative write that changed
		// the cell before that load had set it already. A conserved
		// sketch (SetConserved) subtracts whatever the time and the
		// negative writes: no decay, and no clamp reached.
		if w.Score() == s.hi32 || !s.conserved && (w.Stamp() != stored.Stamp() || s.negative.Load()) {
			return false
		}
		// w - (stored - restore), each step rounded upward: exact for
		// integers below 2^53, and never below the exact difference.
		v := atom.SumUp(atom.SumUp(float64(w.Score()), -float64(stored.Score())), float64(restore.Score()))
		if c.CompareAndSwap(w, atom.Pack(s.rules.Round(v), w.Stamp())) {
			return true
		}
	}
}

// SetConserved declares that every increment s receives is taken back,
// later, by the same delta negated (meter.Inflight: each +1 by its
// Release's -1), that s has no decay, and that its scores stay far
// inside [Lo, Hi] (Hi = MaxFloat32; Lo = 0, which no cell goes below,
// holding its keys' own increments). Then no clamp ever cuts an add and
// no time changes a score, so a roll-back (a TryUpdate's undo after a
// commit conflict) may always subtract its increment from a cell written
// since: exactly while the cell is an integer below 2^24, rounded up (an
// over-count) beyond. Without it a roll-back after a negative write
// restores only a cell that still holds the word it stored, and a denied
// TryUpdate can leave its increment in a cell for good (docs/design.md,
// "Writers outside the stripe, and the roll-back"). It must be called
// before s is used,
// and panics if s decays.
func (s *Sketch) SetConserved() {
	if s.rules.Kind() != law.KindNone {
		panic("sketch: SetConserved needs decay.None")
	}
	s.conserved = true
}

// markNegative records that a negative delta reaches the cells; from
// then on roll-backs only restore exactly (see rollback). A writer calls
// it before its first CAS that changes a cell (the flag must be set
// before the cell changes: rollback reads it after the word), and only
// then: a denied TryUpdate or a write that changes nothing leaves the
// sketch as it was, flag included (audit 106). One compare on the hot
// path; the store happens once.
func (s *Sketch) markNegative(delta float64) {
	if delta < 0 && !s.negative.Load() {
		s.negative.Store(true)
	}
}

// undoWord is the word that takes an increment back out of a cell that
// held a word of value v (decayed to now) and was set to nw: v rounded up
// as a cell stores it, at nw's stamp, so the horizon sweep sees the stamp
// it already knows.
func (s *Sketch) undoWord(v float64, nw atom.Word) atom.Word {
	return atom.Pack(s.rules.Round(v), nw.Stamp())
}

// snapshot is a TryUpdate's view of the key's cells: the cells, the words
// it loaded and their values decayed to now.
type snapshot struct {
	c [MaxLevels]*atom.Cell
	w [MaxLevels]atom.Word
	v [MaxLevels]float64
}

// loadAll fills the snapshot at *ms: it loads the L words, then decays
// them in one batch (Rules.ValueN: one dispatch on the decay law, as
// Query does). If the horizon moved past *ms meanwhile (a stale
// operation), it moves *ms to the clock's reading first (see fresh). It
// returns the stamp of *ms and the snapshot's aggregate.
func (s *Sketch) loadAll(sn *snapshot, ms *int64) (uint32, float64) {
	cs := sn.c[:s.levels]
	for l, p := range cs {
		sn.w[l] = p.Load()
	}
	if *ms < s.low.Load() {
		s.reloadWords(cs, &sn.w, ms)
	}
	now := s.stamp(*ms)
	lowest := s.rules.ValueN(&sn.w, uint32(len(cs)), now, &sn.v)
	return now, s.aggregateOf(sn.v[:len(cs)], lowest)
}

// tryUpdate is tryUpdateReceipt without a receipt, spelled out rather
// than calling it: through it, it no longer inlines into TryUpdate.
func (s *Sketch) tryUpdate(h uint64, delta, limit float64, ms int64) bool {
	st, _ := s.tryHold(h, delta, limit, ms, nil, false)
	return st == tryAdmitted
}

// tryUpdateReceipt is TryUpdate at ms; when rc is not nil and the call is
// admitted, it records the increments in rc.
func (s *Sketch) tryUpdateReceipt(h uint64, delta, limit float64, ms int64, rc *Receipt) bool {
	st, _ := s.tryHold(h, delta, limit, ms, rc, false)
	return st == tryAdmitted
}

// tryStatus is how a TryUpdate that may hold its stripe ended.
type tryStatus uint8

const (
	tryDenied   tryStatus = iota // nothing written
	tryAdmitted                  // delta added to every level
	tryRetired                   // the sketch's stripes are closed (closeStripes): nothing written, decide elsewhere
)

// closedSeq is the seq of a closed stripe (closeStripes): odd, so no
// TryUpdate acquires it, and never reached by counting.
const closedSeq = ^uint64(0)

// tryHold is TryUpdate at ms. Without hold it is tryUpdateReceipt. With
// hold (the rotator's primary) an admitted call returns with its stripe
// still held, for the caller to release (atom.Release(&st.seq)) once it has
// written the younger generations, and an admission that changes no cell
// takes the stripe too; a call on a closed sketch, or a denial whose
// loads may postdate the close, returns tryRetired. So every admission
// of a rotator's primary, younger generations included, completes
// before the primary's stripes are closed, and every denial reads the
// primary before they are (docs/design.md, "TryUpdate across promotions").
func (s *Sketch) tryHold(h uint64, delta, limit float64, ms int64, rc *Receipt, hold bool) (tryStatus, *stripe) {
	if s.cu {
		return s.cuTry(h, delta, limit, ms, rc, hold)
	}
	s.maintain(ms)
	var sn snapshot
	s.cellsOf(h, &sn.c)
	st := &s.stripes[stripeOf(h)]
	bo := atom.ContentionBackoff()
	for {
		// Seqlock read side: seq, then the cells. If seq is unchanged when
		// we acquire the stripe below, no TryUpdate of this stripe wrote
		// in between, so the snapshot still holds every commit of the
		// stripe in full.
		seq := st.seq.Load()
		if s.hooks != nil {
			s.hooks.call(s.hooks.load, 0)
		}
		// The snapshot (loadAll, inline), the decision and the new words.
		// With the Min aggregator and words that need no decay (a hot
		// key within a millisecond: the first word's stamp is the cheap
		// guess) one Rules.DecideN does all three; otherwise ValueN, the
		// aggregate, and for an admission ApplyN.
		cs := sn.c[:s.levels]
		for l, p := range cs {
			sn.w[l] = p.Load()
		}
		if ms < s.low.Load() {
			s.reloadWords(cs, &sn.w, &ms)
		}
		now := s.stamp(ms)
		var nw [MaxLevels]atom.Word
		verdict := atom.Slow
		if s.minAgg && int32(now-sn.w[0].Stamp()) <= 0 {
			verdict = s.rules.DecideN(&sn.w, s.levels, now, delta, limit, &sn.v, &nw)
			// DecideN reads scores as stored; a denial with every
			// word at hi32, a Hi no float32 holds rounded up, is
			// decided again on the scores capped at Hi (capped).
			if verdict == atom.Deny && sn.w[0].Score() == s.hi32 && s.hiOver {
				verdict = atom.Slow
			}
		}
		if verdict == atom.Slow {
			lowest := s.rules.ValueN(&sn.w, s.levels, now, &sn.v)
			if agg := s.aggregateOf(sn.v[:len(cs)], lowest); !(agg+delta <= limit) {
				verdict = atom.Deny
			} else {
				// sn.v[l] is sn.w[l] decayed to now, so each new word
				// is Next(sn.w[l], now, delta) without a second decay.
				verdict = atom.Admit
				if s.rules.ApplyN(&sn.w, &sn.v, s.levels, now, delta, &nw) {
					verdict = atom.AdmitSame
				}
			}
		}
		if verdict == atom.Deny {
			// Deny without writing anything. The cells hold every
			// completed commit, plus possibly part of one in flight,
			// which can only make the aggregate larger if the delta is
			// positive; so a denial here is a denial at some point
			// during the call.
			if hold && st.seq.Load() == closedSeq {
				return tryRetired, nil
			}
			return tryDenied, nil
		}
		same := verdict == atom.AdmitSame && !hold
		if seq&1 == 0 {
			if same {
				// An admission that changes no cell (every level pinned
				// at Hi or Lo at the same stamp, or a zero delta) is a
				// read: it validates the snapshot instead of taking the
				// stripe, so many cores on a saturated key write nothing
				// (docs/design.md, "No write when nothing changes").
				if s.unchanged(&sn, st, seq) {
					if rc != nil {
						rc.stored, rc.restore = sn.w, sn.w // nothing to give back
						rc.h, rc.levels, rc.resets, rc.ms = h, s.levels, s.resets.Load(), ms
					}
					return tryAdmitted, nil
				}
				bo.Spin() // a writer got in: decide again
				continue
			}
			if st.seq.CompareAndSwap(seq, seq+1) {
				if verdict == atom.Admit {
					// Before the commit's first write, and only once the
					// stripe is ours: a call that waits for it may be
					// denied after all (audit 110); a denial or a no-op
					// writes nothing.
					s.markNegative(delta)
				}
				if rc != nil {
					// The commit's time: a conflict's fresh snapshot moves
					// it with the words it stamps (commitConflict), so that
					// Reserved reads them at their time (audit 106).
					rc.ms = ms
				}
				if hold {
					if !s.commitHeld(st, &sn, &nw, ms, delta, limit, rc) {
						return tryDenied, nil
					}
					if rc != nil {
						rc.h, rc.levels, rc.resets = h, s.levels, s.resets.Load()
					}
					return tryAdmitted, st
				}
				var ok bool
				if s.hooks != nil {
					ok = s.commitAndRelease(st, &sn, &nw, ms, delta, limit, rc)
				} else if i := s.commitLevels(&sn, &nw); i == s.levels {
					// The conflict-free commit calls no user code (no
					// decay law, no aggregator), so it releases without
					// a defer.
					atom.Release(&st.seq)
					if rc != nil {
						s.record(&sn, &nw, rc)
					}
					ok = true
				} else {
					ok = s.conflictAndRelease(st, &sn, &nw, i, ms, delta, limit, rc)
				}
				if !ok {
					return tryDenied, nil
				}
				if rc != nil {
					rc.h, rc.levels, rc.resets = h, s.levels, s.resets.Load()
				}
				return tryAdmitted, nil
			}
		}
		// Another admitted TryUpdate holds the stripe (or took it
		// first). Wait for its release watching seq alone: reloading the
		// cells meanwhile would pull their lines out of the committer's
		// cache in the middle of its CASes. After 10 rounds each round
		// yields the processor, so a preempted holder gets to run. Keep
		// ms: a snapshot decayed to a slightly stale time is higher,
		// never lower, and stamps never move backwards.
		bo.Spin()
		for q := st.seq.Load(); q&1 != 0; q = st.seq.Load() {
			if q == closedSeq {
				return tryRetired, nil // retired: nothing here will be admitted again
			}
			bo.Spin()
		}
	}
}

// closeStripes closes every stripe of s for good: it waits for each
// admitted TryUpdate in flight to release its stripe, then sets the
// stripe's seq to closedSeq, which no TryUpdate acquires. The rotator
// closes a primary it retires before it publishes the successor
// (docs/design.md, "TryUpdate across promotions"); a closed sketch admits no
// TryUpdate again (plain TryUpdate denies, tryHold reports tryRetired).
func (s *Sketch) closeStripes() {
	for i := range s.stripes {
		st := &s.stripes[i]
		bo := atom.ContentionBackoff()
		for q := st.seq.Load(); q != closedSeq; q = st.seq.Load() {
			if q&1 == 0 && st.seq.CompareAndSwap(q, closedSeq) {
				break
			}
			bo.Spin()
		}
	}
}

// commitHeld is the commit of a tryHold with hold: the stripe stays held
// when it admits (the caller releases it), and is released when it
// denies or when a custom decay law or aggregator panics.
// Precondition: the caller holds the stripe.
func (s *Sketch) commitHeld(st *stripe, sn *snapshot, nw *[MaxLevels]atom.Word, ms int64, delta, limit float64, rc *Receipt) (ok bool) {
	defer func() {
		if !ok {
			atom.Release(&st.seq)
		}
	}()
	if s.hooks != nil {
		return s.commit(sn, nw, ms, delta, limit, rc)
	}
	if i := s.commitLevels(sn, nw); i < s.levels {
		return s.commitConflict(sn, nw, i, ms, delta, limit, rc)
	}
	if rc != nil {
		s.record(sn, nw, rc)
	}
	return true
}

// unchanged is the validation of an admission that writes nothing: every
// cell still holds its snapshot word, loaded after all of the snapshot's
// loads, and the stripe's seq is still the even seq read before them. So
// every cell held its word at the instant after the snapshot's last load
// (as a CAS from that word would have proved), and no commit of the
// stripe was in flight at any time from the first seq read to the last:
// the call is what an admission holding the stripe would have been, with
// L successful CASes that each stored the word they replaced.
func (s *Sketch) unchanged(sn *snapshot, st *stripe, seq uint64) bool {
	for l := range s.levels {
		if s.hooks != nil {
			s.hooks.call(s.hooks.skip, l)
		}
		if sn.c[l].Load() != sn.w[l] {
			return false
		}
	}
	return st.seq.Load() == seq
}

// put is one level of a commit: the CAS from the snapshot word w to nw,
// or, when nw == w (the add changes nothing), a load that checks the cell
// still holds w. Either way it reports whether the cell held w at that
// instant, which is all the decision-instant argument uses; the load
// leaves the line shared where the CAS would take it exclusive.
func (s *Sketch) put(c *atom.Cell, w, nw atom.Word, level uint32) bool {
	if nw == w {
		if s.hooks != nil {
			s.hooks.call(s.hooks.skip, level)
		}
		return c.Load() == w
	}
	return c.CompareAndSwap(w, nw)
}

// commitLevels is commit's loop without the test hooks: each level's CAS
// from the snapshot word to nw, or its check (put), in level order. It
// returns how many levels it committed: s.levels, or the level whose CAS
// or check failed.
func (s *Sketch) commitLevels(sn *snapshot, nw *[MaxLevels]atom.Word) uint32 {
	for i, p := range sn.c[:s.levels] {
		if nw[i] == sn.w[i] {
			if p.Load() != sn.w[i] {
				return uint32(i)
			}
		} else if !p.CompareAndSwap(sn.w[i], nw[i]) {
			return uint32(i)
		}
	}
	return s.levels
}

// record fills rc for a commit of nw over the snapshot: per level the
// stored word and its undo word.
func (s *Sketch) record(sn *snapshot, nw *[MaxLevels]atom.Word, rc *Receipt) {
	for l := range s.levels {
		rc.stored[l], rc.restore[l] = nw[l], s.undoWord(sn.v[l], nw[l])
	}
}

// conflictAndRelease is commitConflict (level i failed, nw[:i] committed)
// with the stripe released even if a custom decay law or aggregator
// panics, as commitAndRelease does.
func (s *Sketch) conflictAndRelease(st *stripe, sn *snapshot, nw *[MaxLevels]atom.Word, i uint32, ms int64, delta, limit float64, rc *Receipt) bool {
	defer atom.Release(&st.seq)
	return s.commitConflict(sn, nw, i, ms, delta, limit, rc)
}

// commitAndRelease commits the admitted TryUpdate and releases the stripe
// (even again) even if a custom decay law or aggregator panics, so one
// bad call cannot wedge every later TryUpdate on the stripe.
// Precondition: the caller holds the stripe (its seq is odd).
func (s *Sketch) commitAndRelease(st *stripe, sn *snapshot, nw *[MaxLevels]atom.Word, ms int64, delta, limit float64, rc *Receipt) bool {
	defer atom.Release(&st.seq)
	return s.commit(sn, nw, ms, delta, limit, rc)
}

// commit applies delta to each cell, CASing it from the snapshot word to
// nw (the new words, computed from the snapshot), level by level; a level
// whose new word is its snapshot word is checked with a load instead
// (put). If every level succeeds, the decision is sound: every load
// preceded the first CAS and no cell changed between its load and its
// CAS (or check), so all L cells held the snapshot values together at the
// instant after the last load. A level fails only when a writer outside
// the stripe (an Update, or a TryUpdate of a colliding key on another
// stripe) changed the cell; then the cells already committed are rolled
// back (undo), and the call decides again from a fresh snapshot, still
// holding the stripe. Each retry means another writer succeeded, so the
// loop is lock-free.
//
// A level whose roll-back failed keeps the increment ("held"): in the
// fresh snapshot its value includes the call's own increment, so the new
// decision counts it twice (stricter, never looser), and a commit writes
// it with a zero delta (a CAS, or at the same stamp a load, that still
// proves the cell unchanged since the snapshot), so an admitted call adds
// delta to every level once.
//
// On success, when rc is not nil, rc records per level the stored word
// and its undo word (nothing for a held level, whose increment went in
// with an earlier word).
// Precondition: the caller holds the stripe.
func (s *Sketch) commit(sn *snapshot, nw *[MaxLevels]atom.Word, ms int64, delta, limit float64, rc *Receipt) bool {
	L := s.levels
	i := uint32(0)
	for ; i < L; i++ {
		if s.hooks != nil {
			s.hooks.call(s.hooks.beforeCAS, i)
		}
		if !s.put(sn.c[i], sn.w[i], nw[i], i) {
			break
		}
	}
	if i < L {
		return s.commitConflict(sn, nw, i, ms, delta, limit, rc)
	}
	if rc != nil {
		s.record(sn, nw, rc)
	}
	return true
}

// commitConflict is commit after its CAS on level i failed (nw[:i] are
// committed): roll back, decide again on a fresh snapshot, commit again,
// until a commit completes or a decision denies. Kept out of commit so
// the conflict-free path stays a tight loop.
//
//go:noinline
func (s *Sketch) commitConflict(sn *snapshot, nw *[MaxLevels]atom.Word, i uint32, ms int64, delta, limit float64, rc *Receipt) bool {
	var held uint32 // bit l: level l holds this call's increment from an earlier attempt
	L := s.levels
	// Under FinalAdmission, for priorAggregate: per level the value the
	// call's increment went in over (the snapshot value of the attempt
	// that wrote it) and the word the call has there, and the held levels
	// another writer has changed since (taken: sticky).
	var pre [MaxLevels]float64
	var mine [MaxLevels]atom.Word
	var taken uint32
	if s.final {
		pre, mine = sn.v, *nw // levels [0, i); the others are set when written
	}
	for {
		// Conflict on cell i: roll back cells [0, i), then decide again
		// on a fresh snapshot. Combining cells read at different times
		// (the committed ones with our share taken out, and fresh ones)
		// could mix a stale cell with a fresh one and over-admit.
		if s.hooks != nil {
			s.hooks.call(s.hooks.conflict, i)
		}
		held |= s.undo(sn, nw, i, held, ms)
		if s.hooks != nil {
			s.hooks.call(s.hooks.reread, i)
		}
		now, agg := s.loadAll(sn, &ms)
		if s.final && held != 0 {
			agg = s.priorAggregate(sn, &pre, &mine, held, &taken)
		}
		if !(agg+delta <= limit) {
			if s.hooks != nil {
				for l := range L {
					if held&(1<<l) != 0 {
						s.hooks.call(s.hooks.held, l)
					}
				}
			}
			return false
		}
		for i = 0; i < L; i++ {
			if s.hooks != nil {
				s.hooks.call(s.hooks.beforeCAS, i)
			}
			d := delta
			if held&(1<<i) != 0 {
				d = 0
			}
			nw[i] = s.rules.Apply(sn.w[i], sn.v[i], now, d)
			if nw[i] != sn.w[i] {
				// The retry may write where the first decision changed
				// nothing (a hold's AdmitSame, audit 108).
				s.markNegative(d)
			}
			if !s.put(sn.c[i], sn.w[i], nw[i], i) {
				break
			}
			if s.final {
				if held&(1<<i) == 0 {
					pre[i], mine[i] = sn.v[i], nw[i] // the increment went in over sn.v[i]
				} else if taken&(1<<i) == 0 {
					mine[i] = nw[i] // the call's own word, re-stamped
				}
			}
		}
		if i == L {
			s.recordHeld(sn, nw, held, ms, rc)
			return true
		}
	}
}

// priorAggregate is FinalAdmission's aggregate of a retry's fresh
// snapshot: a held level whose word is still the one this call has there
// (mine) reads at the value its increment went in over (pre, not
// decayed further: never lower than the truth), not with the call's own
// increment; a held level whose word another writer has changed since
// (taken, sticky) and every other level read as loaded. A writer that
// left the word as this call wrote it (a saturating add stamped at the
// call's time) is not seen, and neither is the horizon sweep's re-stamp
// of the call's own word, which then counts as another writer's
// (docs/design.md, "Roll-backs").
func (s *Sketch) priorAggregate(sn *snapshot, pre *[MaxLevels]float64, mine *[MaxLevels]atom.Word, held uint32, taken *uint32) float64 {
	v := sn.v
	lowest := math.Inf(1)
	for l := range s.levels {
		if held&(1<<l) != 0 {
			if sn.w[l] != mine[l] {
				*taken |= 1 << l
			}
			if *taken&(1<<l) == 0 {
				v[l] = pre[l]
			}
		}
		lowest = min(lowest, v[l])
	}
	return s.aggregateOf(v[:s.levels], lowest)
}

// recordHeld fills rc (if any) for a commit that met a conflict and
// completed at ms: per level the stored word and its undo word, but for
// the held levels, whose increment an earlier attempt left in the cell:
// nothing Refund can give back there, and Refund reports so.
func (s *Sketch) recordHeld(sn *snapshot, nw *[MaxLevels]atom.Word, held uint32, ms int64, rc *Receipt) {
	if rc == nil {
		return
	}
	rc.held, rc.ms = held, ms
	for l := range s.levels {
		rc.stored[l], rc.restore[l] = nw[l], nw[l]
		if held&(1<<l) == 0 {
			rc.restore[l] = s.undoWord(sn.v[l], nw[l])
		}
	}
}

// undo rolls this call's increment back out of cells [0, upto) and
// returns the levels it could not (rollback: exactly, or by subtraction
// in the same millisecond when no clamp can have cut an add; otherwise
// the cell keeps the increment, held: an over-estimate, never another
// key's mass). Levels already held carry no new increment
// (their word was written with a zero delta) and stay held.
func (s *Sketch) undo(sn *snapshot, nw *[MaxLevels]atom.Word, upto, held uint32, ms int64) uint32 {
	var failed uint32
	for j := range upto {
		if held&(1<<j) != 0 {
			continue
		}
		if s.hooks != nil {
			s.hooks.call(s.hooks.rollback, j)
		}
		if !s.rollback(sn.c[j], nw[j], s.undoWord(sn.v[j], nw[j]), ms) {
			failed |= 1 << j
		}
	}
	return failed
}

// AddAt is UpdateAt that returns a Receipt of what it added to each cell,
// so that Refund can take it back (the rotator adds an admitted increment
// to its younger generations, and refunds them if the generation set
// changed under the decision).
func (s *Sketch) AddAt(t time.Time, key []byte, delta float64) Receipt {
	CheckFinite("Update", "delta", delta)
	return s.add(s.sum64(key), delta, s.tb.Millis(t))
}

// AddStringAt is AddAt for a string key.
func (s *Sketch) AddStringAt(t time.Time, key string, delta float64) Receipt {
	CheckFinite("Update", "delta", delta)
	return s.add(s.sum64String(key), delta, s.tb.Millis(t))
}

func (s *Sketch) add(h uint64, delta float64, ms int64) Receipt {
	if s.cu {
		s.cuAdd("Update", h, delta, ms)
		return Receipt{h: h, levels: s.levels, resets: s.resets.Load()} // Refund refuses it
	}
	s.maintain(ms)
	var c [MaxLevels]*atom.Cell
	var w [MaxLevels]atom.Word
	var v [MaxLevels]float64
	cs := s.cellsOf(h, &c)
	rc := Receipt{h: h, levels: s.levels, resets: s.resets.Load(), ms: ms}
	// As update: every load, then one batch of decay, before the first CAS.
	for l, p := range cs {
		w[l] = p.Load()
	}
	if ms < s.low.Load() {
		s.reloadWords(cs, &w, &ms)
	}
	now := s.stamp(ms)
	s.rules.ValueN(&w, uint32(len(cs)), now, &v)
	for l, p := range cs {
		nw := s.rules.Apply(w[l], v[l], now, delta)
		if nw == w[l] {
			// No write when nothing changes, as in update.
			if s.hooks != nil {
				s.hooks.call(s.hooks.skip, uint32(l))
			}
		} else if s.markNegative(delta); !p.CompareAndSwap(w[l], nw) {
			w[l], nw = s.addLoop(p, &ms, delta, true)
			now = s.stamp(ms)
			v[l] = s.rules.Value(w[l], now)
		}
		rc.stored[l], rc.restore[l] = nw, s.undoWord(v[l], nw)
	}
	return rc
}
