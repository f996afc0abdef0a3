package core

import (
	"fmt"
	"math"

	"github.com/lfgrudge/grudge/internal/atom"
)

// Conservative update (Config.Conservative; Estan and Varghese, "New
// directions in traffic measurement and accounting", 2002): a write of
// delta for a key raises each of its cells only to the key's new
// estimate, est + delta (est the Min of its cells), instead of adding
// delta to every cell. A cell shared with a heavier key already above
// that is left alone, so a light key no longer inflates a heavy key's
// cells, and a fresh key that collides with keys at their limit in some
// levels meets less of their debt in the others: fewer innocent denials
// on mixed-debt workloads (docs/capacity.md measures how many).
//
// One-sided: every cell of a key is at least its true score. A write
// leaves every cell of its key at max(cell, est + delta) >= the key's
// truth before it plus delta; writes of other keys only raise cells;
// decay lowers a cell no faster than it lowers the truth (a decayed
// max of values is at least each value decayed, for every law that
// keeps order). What a lock-free raise must not lose is a concurrent
// write of the same key: two writers reading est = 0 would both raise to
// delta, one delta short. So every conservative write of a key is
// serialized on the key's TryUpdate stripe (the seqlock of tryupdate.go,
// held as a lock by writers): it reads the key's cells under the stripe,
// so est includes every earlier write of the key, then raises each cell
// by a CAS loop. A denial reads without the stripe: the cells hold every
// completed write of the key and perhaps part of one in flight, which
// only raises them, so a denial is a denial at some point of the call.
//
// Roll-backs are off: a conservative write of another key that finds a
// cell already at its target writes nothing, so neither a CAS nor a
// subtraction can tell whether a call's increment still stands alone in
// the cell (the count-min's roll-back rules assume additive cells:
// docs/design.md, "Writers outside the stripe, and the roll-back").
// Refund gives nothing back and reports false (the increment stays: an
// over-estimate), and a conservative TryUpdate never rolls back, since
// under the stripe its commit cannot conflict with a write of its own key
// and a raise never needs undoing. Negative deltas have no conservative
// meaning (a cell cannot be lowered for one key without lowering the
// others'): they panic.
//
// The guarantees that need additive cells do not hold: with every key in
// one cell, the total admitted over all keys is no longer bounded by the
// limit (a cell holds the largest key's debt, not the sum).

// checkConservative panics on a negative delta.
func checkConservative(op string, delta float64) {
	if delta < 0 {
		panic(fmt.Sprintf("sketch: %s: a conservative sketch takes no negative delta; got %v", op, delta))
	}
}

// cuTry is tryHold for a conservative sketch: deny on a read
// without the stripe, else decide again under the stripe and raise.
func (s *Sketch) cuTry(h uint64, delta, limit float64, ms int64, rc *Receipt, hold bool) (tryStatus, *stripe) {
	checkConservative("TryUpdate", delta)
	s.maintain(ms)
	var sn snapshot
	s.cellsOf(h, &sn.c)
	_, agg := s.loadAll(&sn, &ms)
	if !(agg+delta <= limit) {
		if hold && s.stripes[stripeOf(h)].seq.Load() == closedSeq {
			return tryRetired, nil
		}
		return tryDenied, nil
	}
	ts, st, _ := s.cuWrite(h, &sn, delta, limit, &ms, hold)
	if ts == tryAdmitted && rc != nil {
		// A receipt that Refund will refuse: levels set, so that it is
		// not the zero Receipt (which refunds nothing and reports true),
		// with the words the raise left for Reserved.
		rc.h, rc.levels, rc.resets = h, s.levels, s.resets.Load()
		rc.ms, rc.stored, rc.restore = ms, sn.w, sn.w
	}
	return ts, st
}

// cuAdd is update, updateAndQuery and add for a conservative sketch: an
// unconditional raise. It returns the key's estimate after the write.
func (s *Sketch) cuAdd(op string, h uint64, delta float64, ms int64) float64 {
	checkConservative(op, delta)
	s.maintain(ms)
	var sn snapshot
	s.cellsOf(h, &sn.c)
	_, _, est := s.cuWrite(h, &sn, delta, math.Inf(1), &ms, false)
	return s.capped(est)
}

// cuWrite takes the key's stripe, reads its cells, decides (est + delta
// <= limit), raises every cell to est + delta, and releases the stripe
// (even if a custom decay law panics). It returns the decision, the
// stripe when it is still held, and the Min of the cells it left (an
// admission leaves the words it left in sn.w, for a receipt). With
// hold (tryHold's), an admission keeps the stripe held and returns it,
// and a closed stripe returns tryRetired. Without hold a closed stripe
// (a retired rotator generation, which no TryUpdate decides on again)
// is written without it.
func (s *Sketch) cuWrite(h uint64, sn *snapshot, delta, limit float64, ms *int64, hold bool) (ts tryStatus, held *stripe, est float64) {
	st := &s.stripes[stripeOf(h)]
	bo := atom.ContentionBackoff()
	for {
		seq := st.seq.Load()
		if seq&1 == 0 && st.seq.CompareAndSwap(seq, seq+1) {
			break
		}
		if seq == closedSeq {
			if hold {
				return tryRetired, nil, 0
			}
			st = nil // retired: write without the stripe
			break
		}
		bo.Spin()
		for q := st.seq.Load(); q&1 != 0 && q != closedSeq; q = st.seq.Load() {
			bo.Spin()
		}
	}
	if st != nil {
		defer func() {
			if !(hold && ts == tryAdmitted) {
				atom.Release(&st.seq)
			}
		}()
	}
	_, est = s.loadAll(sn, ms)
	if !(est+delta <= limit) {
		return tryDenied, nil, est
	}
	if hold {
		held = st
	}
	if delta == 0 {
		return tryAdmitted, held, est
	}
	// Rounded upward: the exact est + delta, not less (a delta the
	// float64 add absorbs still raises the cells).
	target := atom.SumUp(est, delta)
	after := math.Inf(1)
	for l := range s.levels {
		var v float64
		v, sn.w[l] = s.raise(sn.c[l], sn.w[l], sn.v[l], ms, target)
		after = min(after, v)
	}
	return tryAdmitted, held, after
}

// raise lifts cell c to at least target (clamped at Hi, rounded up) at
// *ms, starting from the word w it read and its value v, by a CAS loop on
// fresh words; a cell already at or above target is left as it is. It
// returns the cell's value after and the word it holds then (at a stamp
// that may be after *ms: a later writer's).
func (s *Sketch) raise(c *atom.Cell, w atom.Word, v float64, ms *int64, target float64) (float64, atom.Word) {
	lost := false
	bo := atom.ContentionBackoff()
	for {
		if lost {
			atom.Backoff(&bo)
			w = c.Load()
			s.fresh(ms)
			v = s.rules.Value(w, s.stamp(*ms))
		}
		lost = true
		if v >= target {
			return v, w
		}
		// target clamped at Hi and rounded up to float32, stamped at the
		// newer of w's stamp and now, as Rules.Apply stamps an add.
		nw := atom.Pack(s.rules.Round(target), atom.Newer(w.Stamp(), s.stamp(*ms)))
		if c.CompareAndSwap(w, nw) {
			return float64(nw.Score()), nw
		}
	}
}
