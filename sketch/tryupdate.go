package sketch

import (
	"github.com/lfgrudge/grudge/atomiccell"
)

// TryUpdate adds delta to the key's score at every level only if the
// aggregate (decayed to now) plus delta is at most limit, and reports
// whether it did. It panics if delta or limit is NaN or ±Inf.
//
// Admitted TryUpdates whose keys share a stripe (always true for the same
// key) commit one at a time, so N goroutines racing TryUpdate(k, 1, 1000)
// with no decay admit exactly 1000. A denial only reads. See doc.go and
// docs/design.md for the protocol and its argument.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	return s.tryUpdate(s.hasher.Sum64(key), delta, limit, s.nowMillis())
}

// TryUpdateString is TryUpdate for a string key, without allocating.
func (s *Sketch) TryUpdateString(key string, delta, limit float64) bool {
	checkFinite("TryUpdate", "delta", delta)
	checkFinite("TryUpdate", "limit", limit)
	return s.tryUpdate(s.hasher.Sum64String(key), delta, limit, s.nowMillis())
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

// load refreshes levels [from, L) of the snapshot (the conflict path of
// commit) and returns nothing; the caller aggregates.
func (s *Sketch) load(sn *snapshot, from uint32, now uint32) {
	for l := from; l < s.levels; l++ {
		sn.w[l] = s.cells[sn.off[l]].Load()
		sn.v[l] = s.rules.Value(sn.w[l], now)
	}
}

func (s *Sketch) tryUpdate(h uint64, delta, limit float64, ms int64) bool {
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
		if !(s.agg.Aggregate(sn.v[:s.levels])+delta <= limit) {
			// Deny without writing anything. The cells hold every
			// completed commit, plus possibly part of one in flight,
			// which can only make the aggregate larger if the delta is
			// positive; so a denial here is a denial at some point
			// during the call.
			return false
		}
		if seq&1 == 0 && st.seq.CompareAndSwap(seq, seq+1) {
			return s.commitAndRelease(st, &sn, now, delta, limit)
		}
		// Another admitted TryUpdate holds the stripe (or took it
		// first). Wait for its release watching seq alone: reloading the
		// cells meanwhile would pull their lines out of the committer's
		// cache in the middle of its CASes. The contention backoff lets
		// the winner run a few commits on lines that stay in its cache
		// (atomiccell.ContentionBackoff); after 10 rounds each round
		// yields the processor, so a preempted holder gets to run.
		// Keep now: a snapshot decayed to a slightly stale time is
		// higher, never lower, and stamps never move backwards.
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
func (s *Sketch) commitAndRelease(st *stripe, sn *snapshot, now uint32, delta, limit float64) bool {
	defer st.seq.Add(1)
	return s.commit(sn, now, delta, limit)
}

// testHookCommit, when set (only by tests, through export_test.go), is
// called by commit before the CAS of each level. The deterministic
// conflict and linearizability replays hold an admitted TryUpdate there,
// between the CASes of two levels, where no user code (decay law) runs.
var testHookCommit func(s *Sketch, level uint32)

// commit applies delta to each cell, CASing it from the snapshot word. A
// CAS fails only when a writer outside the stripe (an Update, or a
// TryUpdate of a colliding key on another stripe) changed the cell; then
// the decision is taken again on fresh values, with this call's own
// increments on the cells already committed taken out. If the key is
// still within limit the commit goes on from the fresh word; if not, the
// committed cells are rolled back and the call reports a denial.
// Precondition: the caller holds the stripe.
func (s *Sketch) commit(sn *snapshot, now uint32, delta, limit float64) bool {
	var nw [MaxLevels]atomiccell.Word
	var fresh [MaxLevels]float64
	L := s.levels
	for i := uint32(0); i < L; {
		if testHookCommit != nil {
			testHookCommit(s, i)
		}
		// sn.v[i] is sn.w[i] decayed to now (loadAll, or load after a
		// conflict), so this is Next(sn.w[i], now, delta) without a
		// second decay.
		nw[i] = s.rules.Apply(sn.w[i], sn.v[i], now, delta)
		if s.cells[sn.off[i]].CompareAndSwap(sn.w[i], nw[i]) {
			i++
			continue
		}
		// Conflict on cell i. Cells before i carry our increment; take it
		// out to see what the key would score without this call.
		for j := uint32(0); j < i; j++ {
			cur := s.cells[sn.off[j]].Load()
			fresh[j] = s.rules.Value(cur, now) - (float64(nw[j].Score()) - sn.v[j])
		}
		s.load(sn, i, now)
		copy(fresh[i:L], sn.v[i:L])
		if s.agg.Aggregate(fresh[:L])+delta <= limit {
			continue // still admitted: retry cell i from its fresh word
		}
		s.rollback(sn, &nw, i, now)
		return false
	}
	return true
}

// rollback removes this call's increment from cells [0, upto). A cell that
// still holds exactly the word we stored gets its snapshot word back (an
// exact undo: nobody saw anything in between that they could build on
// but a read). A cell someone wrote since gets the applied increment
// subtracted with the usual CAS loop; the subtraction rounds up, so it
// never removes more than we added.
func (s *Sketch) rollback(sn *snapshot, nw *[MaxLevels]atomiccell.Word, upto, now uint32) {
	for j := uint32(0); j < upto; j++ {
		c := &s.cells[sn.off[j]]
		if c.CompareAndSwap(nw[j], sn.w[j]) {
			continue
		}
		inc := float64(nw[j].Score()) - sn.v[j]
		c.Add(s.rules, now, -inc, c.Load())
	}
}
