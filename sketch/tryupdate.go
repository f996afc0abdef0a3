package sketch

import (
	"strconv"
	"time"

	"github.com/lfgrudge/grudge/atomiccell"
)

// TryUpdate adds delta to the key's score at every level only if the
// aggregate (decayed to now) plus delta is at most limit, and reports
// whether it did. It panics if delta or limit is NaN or ±Inf, or if limit
// is above Hi (the score is clamped at Hi, so such a limit could never
// deny).
//
// Admitted TryUpdates are linearizable among themselves, for one key and
// for keys that share cells: each decides on values that all L cells held
// at one instant and commits only if no cell changed from that instant to
// its CAS. So N goroutines racing TryUpdate(k, 1, 1000) with no decay
// admit exactly 1000, and with every key colliding (CellsPerLevel=1) the
// total admitted over all keys never exceeds the limit. A denial only
// reads. The protocol and its argument are in docs/design.md.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	s.checkTry(delta, limit)
	return s.tryUpdate(s.hasher.Sum64(key), delta, limit, s.nowMillis())
}

// TryUpdateString is TryUpdate for a string key, without allocating.
func (s *Sketch) TryUpdateString(key string, delta, limit float64) bool {
	s.checkTry(delta, limit)
	return s.tryUpdate(s.hasher.Sum64String(key), delta, limit, s.nowMillis())
}

// checkTry panics on a non-finite delta or limit, or a limit above Hi.
// It is Config.CheckTryUpdate with the bound precomputed (s.maxLimit).
// One compare chain on the hot path; the slow path says which check
// failed.
func (s *Sketch) checkTry(delta, limit float64) {
	if delta-delta != 0 || limit-limit != 0 || limit > s.maxLimit {
		s.cfg.CheckTryUpdate(delta, limit) // panics with the message
	}
}

//go:noinline
func panicLimitAboveHi(limit, hi float64) {
	panic("sketch: TryUpdate limit " + formatValue(limit) + " is above Hi " + formatValue(hi) +
		": scores are clamped at Hi, so it could never deny")
}

// Receipt records what an admitted TryReserve added to each of its key's
// cells, so that Refund can take it back. The zero Receipt refunds
// nothing. A Receipt is a value (no allocation) and belongs to the sketch
// that issued it.
type Receipt struct {
	h      uint64             // the key's hash
	ms     int64              // time of the commit, on the sketch's scale
	levels uint32             // 0 for the zero Receipt
	inc    [MaxLevels]float64 // the increment stored in each level's cell
}

// TryReserveAt is TryUpdateAt that also returns a Receipt of the admitted
// increment, for a caller that may have to take it back (the rotator's
// generations, a limiter's reservation or a multi-window decision).
func (s *Sketch) TryReserveAt(t time.Time, key []byte, delta, limit float64) (Receipt, bool) {
	s.checkTry(delta, limit)
	var rc Receipt
	ok := s.tryUpdateReceipt(s.hasher.Sum64(key), delta, limit, s.tb.Millis(t), &rc)
	return rc, ok
}

// TryReserveStringAt is TryReserveAt for a string key.
func (s *Sketch) TryReserveStringAt(t time.Time, key string, delta, limit float64) (Receipt, bool) {
	s.checkTry(delta, limit)
	var rc Receipt
	ok := s.tryUpdateReceipt(s.hasher.Sum64String(key), delta, limit, s.tb.Millis(t), &rc)
	return rc, ok
}

// Refund takes back what rc recorded: from each cell it subtracts what is
// left of this call's increment at the cell's own time (the increment
// decayed from the commit to the cell's stamp, by Rules.Remain), never
// more, so a refund can leave a little of its increment behind but never
// takes another key's mass. Refunding the zero Receipt does nothing;
// refunding one Receipt twice takes it back twice (the caller's error).
func (s *Sketch) Refund(rc *Receipt) {
	if rc.levels == 0 {
		return
	}
	var off [MaxLevels]int
	s.offsets(rc.h, &off)
	ms := s.nowMillis()
	s.maintain(ms)
	now, t0 := s.stamp(ms), s.stamp(rc.ms)
	for l := range rc.levels {
		s.refundCell(&s.cells[off[l]], rc.inc[l], t0, now)
	}
}

// refundCell subtracts from c what is left at the cell's time of inc,
// added at stamp t0: the cell's time is the newer of its stamp and now.
func (s *Sketch) refundCell(c *atomiccell.Cell, inc float64, t0, now uint32) {
	if inc == 0 {
		return
	}
	bo := atomiccell.ContentionBackoff()
	for {
		w := c.Load()
		at := atomiccell.Newer(w.Stamp(), now)
		left := s.rules.Remain(inc, atomiccell.Elapsed(t0, at))
		nw := s.rules.Next(w, at, -left)
		if c.CompareAndSwap(w, nw) {
			return
		}
		bo.Spin()
	}
}

// snapshot is a TryUpdate's view of the key's cells: the words it loaded
// and their values decayed to now.
type snapshot struct {
	off [MaxLevels]int
	w   [MaxLevels]atomiccell.Word
	v   [MaxLevels]float64
}

// loadAll fills the snapshot: it loads the L words, then decays them in
// one batch (Rules.ValueN: one dispatch on the decay law, as Query does).
func (s *Sketch) loadAll(sn *snapshot, now uint32) {
	for l := range s.levels {
		sn.w[l] = s.cells[sn.off[l]].Load()
	}
	s.rules.ValueN(&sn.w, s.levels, now, &sn.v)
}

func (s *Sketch) tryUpdate(h uint64, delta, limit float64, ms int64) bool {
	return s.tryUpdateReceipt(h, delta, limit, ms, nil)
}

// tryUpdateReceipt is TryUpdate at ms; when rc is not nil and the call is
// admitted, it records the increments in rc.
func (s *Sketch) tryUpdateReceipt(h uint64, delta, limit float64, ms int64, rc *Receipt) bool {
	s.maintain(ms)
	var sn snapshot
	s.offsets(h, &sn.off)
	st := &s.stripes[stripeOf(h)]
	now := s.stamp(ms)
	bo := atomiccell.ContentionBackoff()
	for {
		// Seqlock read side: seq, then the cells. If seq is unchanged when
		// we acquire the stripe below, no TryUpdate of this stripe wrote
		// in between, so the snapshot still holds every commit of the
		// stripe in full.
		seq := st.seq.Load()
		s.loadAll(&sn, now)
		if !(s.aggregate(sn.v[:s.levels])+delta <= limit) {
			// Deny without writing anything. The cells hold every
			// completed commit, plus possibly part of one in flight,
			// which can only make the aggregate larger if the delta is
			// positive; so a denial here is a denial at some point
			// during the call.
			return false
		}
		if seq&1 == 0 && st.seq.CompareAndSwap(seq, seq+1) {
			ok := s.commitAndRelease(st, &sn, now, delta, limit, rc)
			if ok && rc != nil {
				rc.h, rc.ms, rc.levels = h, ms, s.levels
			}
			return ok
		}
		// Another admitted TryUpdate holds the stripe (or took it
		// first). Wait for its release watching seq alone: reloading the
		// cells meanwhile would pull their lines out of the committer's
		// cache in the middle of its CASes. After 10 rounds each round
		// yields the processor, so a preempted holder gets to run. Keep
		// now: a snapshot decayed to a slightly stale time is higher,
		// never lower, and stamps never move backwards.
		bo.Spin()
		for st.seq.Load()&1 != 0 {
			bo.Spin()
		}
	}
}

// commitAndRelease commits the admitted TryUpdate and releases the stripe
// (even again) even if a custom decay law panics, so one bad call cannot
// wedge every later TryUpdate on the stripe.
// Precondition: the caller holds the stripe (its seq is odd).
func (s *Sketch) commitAndRelease(st *stripe, sn *snapshot, now uint32, delta, limit float64, rc *Receipt) bool {
	defer st.seq.Add(1)
	return s.commit(sn, now, delta, limit, rc)
}

// commit applies delta to each cell, CASing it from the snapshot word,
// level by level. If every CAS succeeds, the decision is sound: every
// load preceded the first CAS and no cell changed between its load and
// its CAS, so all L cells held the snapshot values together at the
// instant after the last load. A CAS fails only when a writer outside the
// stripe (an Update, or a TryUpdate of a colliding key on another stripe)
// changed the cell; then the cells already committed are undone, and the
// call decides again from a fresh snapshot, still holding the stripe. Each
// retry means another writer succeeded, so the loop is lock-free.
//
// On success, when rc is not nil, rc.inc holds per level the increment
// stored (the new score minus the value it replaced).
// Precondition: the caller holds the stripe.
func (s *Sketch) commit(sn *snapshot, now uint32, delta, limit float64, rc *Receipt) bool {
	var nw [MaxLevels]atomiccell.Word
	L := s.levels
	for {
		i := uint32(0)
		for ; i < L; i++ {
			if s.hooks != nil {
				s.hooks.call(s.hooks.beforeCAS, i)
			}
			// sn.v[i] is sn.w[i] decayed to now, so this is
			// Next(sn.w[i], now, delta) without a second decay.
			nw[i] = s.rules.Apply(sn.w[i], sn.v[i], now, delta)
			if !s.cells[sn.off[i]].CompareAndSwap(sn.w[i], nw[i]) {
				break
			}
		}
		if i == L {
			if rc != nil {
				for l := range L {
					rc.inc[l] = float64(nw[l].Score()) - sn.v[l]
				}
			}
			return true
		}
		// Conflict on cell i: undo cells [0, i), then decide again on a
		// fresh snapshot. Combining cells read at different times (the
		// committed ones with our share taken out, and fresh ones) could
		// mix a stale cell with a fresh one and over-admit.
		if s.hooks != nil {
			s.hooks.call(s.hooks.conflict, i)
		}
		s.undo(sn, &nw, i, now)
		if s.hooks != nil {
			s.hooks.call(s.hooks.reread, i)
		}
		s.loadAll(sn, now)
		if !(s.aggregate(sn.v[:L])+delta <= limit) {
			return false
		}
	}
}

// undo removes this call's increment from cells [0, upto). A cell that
// still holds exactly the word we stored gets its snapshot word back (an
// exact undo). A cell someone wrote since gets what is left of our
// increment at the cell's time subtracted (refundCell), never more.
func (s *Sketch) undo(sn *snapshot, nw *[MaxLevels]atomiccell.Word, upto, now uint32) {
	for j := uint32(0); j < upto; j++ {
		if s.hooks != nil {
			s.hooks.call(s.hooks.rollback, j)
		}
		c := &s.cells[sn.off[j]]
		if c.CompareAndSwap(nw[j], sn.w[j]) {
			continue
		}
		s.refundCell(c, float64(nw[j].Score())-sn.v[j], now, now)
	}
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// AddAt is UpdateAt that returns a Receipt of what it added to each cell,
// so that Refund can take it back (the rotator adds an admitted increment
// to its younger generations, and refunds them if the generation set
// changed under the decision).
func (s *Sketch) AddAt(t time.Time, key []byte, delta float64) Receipt {
	checkFinite("Update", "delta", delta)
	return s.add(s.hasher.Sum64(key), delta, s.tb.Millis(t))
}

// AddStringAt is AddAt for a string key.
func (s *Sketch) AddStringAt(t time.Time, key string, delta float64) Receipt {
	checkFinite("Update", "delta", delta)
	return s.add(s.hasher.Sum64String(key), delta, s.tb.Millis(t))
}

func (s *Sketch) add(h uint64, delta float64, ms int64) Receipt {
	s.maintain(ms)
	var off [MaxLevels]int
	var w [MaxLevels]atomiccell.Word
	var v [MaxLevels]float64
	s.offsets(h, &off)
	now := s.stamp(ms)
	rc := Receipt{h: h, ms: ms, levels: s.levels}
	// As update: every load, then one batch of decay, before the first CAS.
	for l := range s.levels {
		w[l] = s.cells[off[l]].Load()
	}
	s.rules.ValueN(&w, s.levels, now, &v)
	for l := range s.levels {
		c := &s.cells[off[l]]
		bo := atomiccell.ContentionBackoff()
		for {
			nw := s.rules.Apply(w[l], v[l], now, delta)
			if c.CompareAndSwap(w[l], nw) {
				// The increment at now; if the cell's stamp is newer than
				// now (a later writer), it is the share at that stamp,
				// which Refund decays from ms anyway: taking back less
				// than was added is the safe side.
				rc.inc[l] = float64(nw.Score()) - v[l]
				break
			}
			bo.Spin()
			w[l] = c.Load()
			v[l] = s.rules.Value(w[l], now)
		}
	}
	return rc
}
