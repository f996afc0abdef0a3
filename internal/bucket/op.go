package bucket

import (
	"math/bits"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/hw"
)

// opKind is what do does after reading a key's lines.
type opKind uint8

const (
	opQuery opKind = iota // read only
	opTry                 // add n if load + n <= limit
	opAdd                 // add n unconditionally (clamped)
)

// maxConflicts bounds the undo-and-retry rounds of one operation (see
// docs/design.md, "The bucket engine": conflicts). After it, TryUpdate
// denies and Update merges; a TryUpdate whose conflict was only a moved
// line time (another write landed, so the system progressed) retries
// without a bound, as a lost CAS does.
const maxConflicts = 4

// result is what do returns.
type result struct {
	ok    bool   // admitted (opTry), or written (opAdd)
	stamp uint64 // the key's stamp after the operation (before it for a denial or a query)
	t     uint64 // the operation's tick (rounded down)
	rc    Receipt
}

// Receipt identifies one admitted write, for Refund. The zero Receipt
// refunds nothing. A Receipt is a value; Refund through one pointer is
// not safe for concurrent use.
type Receipt struct {
	line      uint32
	slot      uint8
	ok        bool
	written   uint32 // the entry the write stored
	stamp     uint64 // written's stamp
	prevStamp uint64 // the stamp of the key's entry it replaced (0: none, or expired)
	ms        uint64 // the write's millisecond on the engine's scale, for Reserved
	resets    uint64 // the engine's snapshot loads when issued: a Receipt from before one is void
}

// view is one read of a key's two lines: each line consistent (see load).
type view struct {
	w [2][wordsPerLine]uint64
}

// load reads both lines into v.
func (e *Engine) load(v *view, l0, l1 *line) {
	e.loadLine(l0, &v.w[0])
	e.loadLine(l1, &v.w[1])
}

// loadLine reads line ln into w: its header, its entries, then its header
// again, until the two header reads name the same lw and moving state,
// so that every entry was read while the line's time was the one w
// holds. Every committed entry reads correctly in the window of the lw
// current when it is read (docs/design.md, "Moving a line's time"), so
// each entry of w reads correctly in w's window; the header kept is the
// second read (a floor read later only over-counts). A retry follows a
// move of lw, another writer's progress.
func (e *Engine) loadLine(ln *line, w *[wordsPerLine]uint64) {
	h := ln.w[0].Load()
	for {
		for j := 1; j < wordsPerLine; j++ {
			w[j] = ln.w[j].Load()
		}
		if e.hooks != nil && e.hooks.afterLoad != nil {
			e.hooks.afterLoad()
		}
		h2 := ln.w[0].Load()
		if sameTime(h, h2) {
			w[0] = h2
			return
		}
		h = h2
	}
}

// interp returns the stamp whose low 16 bits are res in the window
// (top-2^16, top]. A stamp below the window reads higher by a multiple of
// 2^16 (the safe side); none can be above it.
func interp(res uint16, top uint64) uint64 {
	return top - uint64(uint16(uint16(top)-res))
}

// floorOf returns the eviction floor of header h, whose lw is lt ticks,
// as a stamp (0: none).
func floorOf(h, lt uint64) uint64 {
	if fo := hdrFO(h); fo != 0 {
		return lt + fo
	}
	return 0
}

// matchFP returns the slots of w (a line read into a view) holding
// fingerprint fp: bit s for slot s. Two entries per word, compared at
// once: an entry matches when its fingerprint half of w^pat is zero.
func matchFP(w *[wordsPerLine]uint64, fp uint16) (mask uint16) {
	pat := uint64(fp)<<16 | uint64(fp)<<48
	for j := 1; j < wordsPerLine; j++ {
		y := w[j] ^ pat
		if y&0xFFFF0000 == 0 {
			mask |= 1 << (2 * (j - 1))
		}
		if y>>48 == 0 {
			mask |= 2 << (2 * (j - 1))
		}
	}
	return mask
}

// candEst returns the largest stamp among the slots of mask in w, with
// window top top (0 if mask is empty).
func candEst(w *[wordsPerLine]uint64, mask uint16, top uint64) (est uint64) {
	for m := mask; m != 0; m &= m - 1 {
		j, sh := slotWord(bits.TrailingZeros16(m))
		est = max(est, interp(entRes(uint32(w[j]>>sh)), top))
	}
	return est
}

// occupancy returns the number of live entries of w (stamp after t, with
// window top top) and its first free slot (empty or expired; -1 if none).
func occupancy(w *[wordsPerLine]uint64, top, t uint64) (live, free int) {
	free = -1
	for s := 0; s < SlotsPerLine; s++ {
		j, sh := slotWord(s)
		ent := uint32(w[j] >> sh)
		if !isEmpty(ent) && interp(entRes(ent), top) > t {
			live++
		} else if free < 0 {
			free = s
		}
	}
	return live, free
}

// do is every operation: read the key's two lines, estimate its stamp
// (the largest of its candidates and of the two floors), decide, write
// one entry with one CAS (after raising the line's header when needed),
// then validate that no other candidate of the key changed meanwhile.
// docs/design.md, "The bucket engine", has the argument.
//
// The operation's time is t, or the clock's reading when now is set: read
// after the prefetch, so that the clock read overlaps the lines' misses.
// ch holds the load and the limit (which only opTry reads), with their
// ticks where Engine.Charge converted them on this law.
func (e *Engine) do(h uint64, t time.Time, now bool, kind opKind, ch *Charge) (r result) {
	i0, i1, fp := e.locate(h)
	l0, l1 := &e.lines[i0], &e.lines[i1]
	ps := [2]unsafe.Pointer{unsafe.Pointer(l0), unsafe.Pointer(l1)}
	hw.Prefetch(ps[:])
	var ms uint64
	if now {
		ms = e.now()
	} else {
		ms = e.at(t)
	}
	q := &e.q
	n, limit := ch.n, ch.limit
	var c, lim uint64
	switch {
	case q.kind == KindExponential || kind == opQuery: // a query decides nothing
	case ch.u == q.u: // converted once by Charge on this law (u > 0 here)
		c, lim = ch.c, ch.lim
	case kind == opTry:
		c, lim = q.units(n), q.limitUnits(limit)
	default: // an add has no limit to convert
		c = q.units(n)
	}
	conflicts := 0
	merge := false    // sum the candidates instead of taking their max
	extra := true     // merge: this operation's own n is not in the table yet
	base := uint64(0) // merge: the least line tick of the first view (see below)
	var v view
	for {
		e.load(&v, l0, l1)
		h0, h1 := v.w[0][0], v.w[1][0]
		lw0, lw1 := hdrLW(h0), hdrLW(h1)
		tms := max(ms, hdrTime(h0), hdrTime(h1)) // never before a write already made to either line
		tlo, thi := q.ticks(tms)
		lt0, lt1 := q.lo(lw0), q.lo(lw1)
		f0, f1 := floorOf(h0, lt0), floorOf(h1, lt1)
		top0, top1 := lt0+q.span+1, lt1+q.span+1
		if base == 0 {
			base = min(lt0, lt1)
		}
		m0, m1 := matchFP(&v.w[0], fp), matchFP(&v.w[1], fp)
		est := max(f0, f1)
		if m0|m1 != 0 {
			est = max(est, candEst(&v.w[0], m0, top0), candEst(&v.w[1], m1, top1))
		}
		r.t = tlo
		if kind == opQuery {
			r.stamp = est
			return r
		}

		// Decide and compute the new stamp ns.
		var ns uint64
		if q.kind != KindExponential {
			if merge {
				// The candidates' stamps and both floors' summed above
				// base: at least the key's stamp however its writes
				// were split. Every write this operation did not see landed
				// after its first view, so at a time of at least that
				// view's lw (a write lands only under the header it checked,
				// and lw only grows): each split chain started at base or
				// later, and the key's one bucket drains from there once,
				// where their loads summed at tlo would drain once per
				// chain (an audit's TestAudit34FixedMergeAfterMoveUnderCounts).
				sum, _ := candSum(q, &v, lt0, lt1, base, tlo, fp)
				for _, fl := range [2]uint64{f0, f1} {
					if fl > base {
						sum += fl - base // both: each may hold a chain
					}
				}
				if extra {
					sum += c
				}
				est = min(base+sum, thi+q.span)
			}
			debt := uint64(0)
			if est > tlo {
				debt = min(est-tlo, q.span) // a load is at most Max
			}
			if kind == opTry && !q.fits(debt, c, lim, n, limit) {
				r.stamp = est
				return r
			}
			if c == 0 && !merge {
				r.ok, r.stamp = true, est
				r.rc = Receipt{stamp: est, ms: tms} // nothing to refund
				return r
			}
			ns = min(max(est, thi)+c, thi+q.span)
			if merge {
				ns = max(est, thi)
			}
		} else {
			cur := q.value(est, tlo)
			add := n
			if merge {
				_, sum := candSum(q, &v, lt0, lt1, base, tlo, fp)
				cur = sum + q.value(f0, tlo) + q.value(f1, tlo)
				if !extra {
					add = 0
				}
			}
			if kind == opTry && cur+n > limit {
				r.stamp = est
				return r
			}
			if n == 0 && !merge {
				r.ok, r.stamp = true, est
				r.rc = Receipt{stamp: est, ms: tms} // nothing to refund
				return r
			}
			ns = max(q.expStamp(min(cur+add, q.max), thi), est)
		}

		// Choose the target slot: the key's first candidate; else a free
		// slot in the line with fewer live entries (two choices); else
		// evict the entry that raises a floor least.
		tl, slot := 0, 0
		evict := false
		var vstamp uint64
		switch {
		case m0 != 0:
			slot = bits.TrailingZeros16(m0)
		case m1 != 0:
			tl, slot = 1, bits.TrailingZeros16(m1)
		default:
			live0, free0 := occupancy(&v.w[0], top0, tlo)
			live1, free1 := occupancy(&v.w[1], top1, tlo)
			slot = free0
			if live1 < live0 {
				tl, slot = 1, free1
			}
			if slot < 0 {
				tl, slot, vstamp = victim(&v, [2]uint64{lt0, lt1}, [2]uint64{f0, f1}, q.span)
				evict = true
			}
		}
		ln := l0
		if tl == 1 {
			ln = l1
		}

		// The header: lw up to the operation's time (every stamp in the
		// line stays <= lw's tick + span + 1). A move that advance
		// completes from this view without changing an entry word keeps
		// the decision; one that sealed or cleared words (their entries
		// expired at the operation's time) makes it decide again on the
		// words as they are now, and so does a move that did not
		// complete.
		hw := v.w[tl][0]
		if tms > hdrLW(hw) || hdrMoving(hw) {
			nh, done, changed := e.advance(ln, &v.w[tl], tms)
			if !done {
				e.moveLine(ln, tms)
				continue
			}
			if changed {
				continue
			}
			hw = nh
		}
		j, sh := slotWord(slot)
		ow := v.w[tl][j]
		oe := uint32(ow >> sh)
		seen := [2]uint64{f0, f1} // the floors the decision took in
		if evict {
			// The floor up to the victim, then the victim out: the key
			// is written into an empty slot, like any insert, so that a
			// seal that lands before its CAS makes the CAS fail
			// (docs/design.md, "Moving a line's time": inserts).
			hlw := hdrLW(hw)
			hlt := q.lo(hlw)
			old := floorOf(hw, hlt)
			if fl := max(old, vstamp); fl != old {
				nh := mkHdr(hlw, fl-hlt)
				if !ln.w[0].CompareAndSwap(hw, nh) {
					continue
				}
				e.floors.move(old, fl)
				hw = nh
			}
			seen[tl] = max(seen[tl], vstamp)
			empty := freshEmpty()
			nw := withEntry(ow, sh, empty)
			if !ln.w[j].CompareAndSwap(ow, nw) {
				continue
			}
			ow, oe = nw, empty
		}

		// The entry.
		ne := mkEnt(fp, ns)
		if e.hooks != nil && e.hooks.beforeCAS != nil {
			e.hooks.beforeCAS()
		}
		// A move of lw since the read would make the stamp's residue
		// name another stamp: write only under the header decided on.
		// A move that starts after this check seals or bounds itself so
		// that the CAS either fails or stores a stamp that reads
		// correctly in every window to come.
		if !sameTime(ln.w[0].Load(), hw) {
			continue
		}
		if e.hooks != nil && e.hooks.afterCheck != nil {
			e.hooks.afterCheck()
		}
		if !ln.w[j].CompareAndSwap(ow, withEntry(ow, sh, ne)) {
			continue
		}
		if e.hooks != nil && e.hooks.afterCAS != nil {
			e.hooks.afterCAS()
		}
		idx := i0
		if tl == 1 {
			idx = i1
		}
		r.ok, r.stamp = true, ns
		// A write that filled the key to Max cannot be refunded: a later
		// write at the same tick would leave the entry as it is (clamped),
		// and an exact undo would then take that write back too. Nor can
		// an exponential one, whose small loads can round into a stamp
		// unchanged.
		refundable := q.kind != KindExponential && ns < thi+q.span
		r.rc = Receipt{line: uint32(idx), slot: uint8(slot), ok: refundable, written: ne, stamp: ns, ms: tms, resets: e.resets.Load()}
		if !isEmpty(oe) {
			// A candidate of the key (or of a fingerprint twin), or an
			// expired entry of a free slot.
			if ps := interp(entRes(oe), q.lo(hdrLW(hw))+q.span+1); ps > tlo {
				r.rc.prevStamp = ps
			}
		}
		if !conflict(q, &v, l0, l1, fp, tl, slot, max(seen[0], est), max(seen[1], est)) {
			// A line's time may have moved meanwhile: the write stands at
			// the operation's own time (docs/design.md, section 8,
			// "Stale time"); it reads correctly in every window to come.
			return r
		}

		// Another candidate of the key changed between our loads and our
		// CAS: our decision may have missed a concurrent write. Undo ours
		// exactly and decide again; if ours cannot be undone (someone
		// wrote on top of it) or conflicts persist, a TryUpdate denies
		// (keeping what it wrote: an over-count) and an Update merges:
		// it writes the sum of the candidates' loads, which covers the
		// key's load however the racing writes were split.
		conflicts++
		if merge {
			// A merge is never undone: it only raises. Merge again on top
			// of it (it now holds this operation's n).
			extra = false
			continue
		}
		full, given := e.lower(ln, j, sh, fp, ns, r.rc.prevStamp)
		r.ok, r.rc = false, Receipt{}
		if full && conflicts < maxConflicts {
			continue
		}
		if kind == opTry {
			r.stamp = est
			return r
		}
		// Merge; the operation's n is added again in full unless none of
		// it was withdrawn (a part given back is counted twice: an
		// over-count).
		merge, extra = true, full || given > 0
	}
}

// candSum returns, over the key's candidates in view v, the sum of their
// stamps above tick b, in ticks (linear, none), and the sum of their
// loads at tick t as values (exponential, whose loads add at any time).
func candSum(q *quant, v *view, lt0, lt1, b, t uint64, fp uint16) (ticks uint64, vals float64) {
	for l, lt := range [2]uint64{lt0, lt1} {
		top := lt + q.span + 1
		for s := 0; s < SlotsPerLine; s++ {
			j, sh := slotWord(s)
			ent := uint32(v.w[l][j] >> sh)
			if entFP(ent) != fp {
				continue
			}
			st := interp(entRes(ent), top)
			if st > b {
				ticks += st - b
			}
			if st > t {
				vals += q.value(st, t)
			}
		}
	}
	return ticks, vals
}

// victim returns the entry to evict when both lines are full of live
// entries: the one whose eviction leaves its line's floor lowest (the
// larger of the floor and the entry's stamp); among equals, one in the
// line whose floor is already highest (a line that already denies fresh
// keys at that load absorbs the eviction without a second line starting
// to), then the smaller stamp.
func victim(v *view, lt, fl [2]uint64, span uint64) (tl, slot int, stamp uint64) {
	best, bestFloor, bestStamp := ^uint64(0), uint64(0), ^uint64(0)
	for l := 0; l < 2; l++ {
		top := lt[l] + span + 1
		for s := 0; s < SlotsPerLine; s++ {
			j, sh := slotWord(s)
			ent := uint32(v.w[l][j] >> sh)
			st := interp(entRes(ent), top)
			cost := max(fl[l], st)
			if cost < best || cost == best && (fl[l] > bestFloor || fl[l] == bestFloor && st < bestStamp) {
				best, bestFloor, bestStamp, tl, slot = cost, fl[l], st, l, s
			}
		}
	}
	return tl, slot, bestStamp
}

// conflict reloads both lines after a write and reports whether any slot
// other than the target holds or held the key's fingerprint with a
// different entry than view v read, or a line's floor rose above what
// the decision took in (b0, b1: the larger of that line's floor in the
// view and the estimate): a concurrent write of a candidate the decision
// may have missed, the second when that candidate was written and then
// evicted between the view and this check (an audit's
// TestAudit35FixedEvictedRacingInsertOverAdmits). A move of either
// line's time is none: the write reads correctly in every window to
// come (see advance), its decision held at the operation's time, and a
// candidate of the key that a move cleared shows as a changed slot.
func conflict(q *quant, v *view, l0, l1 *line, fp uint16, tl, slot int, b0, b1 uint64) bool {
	for l := 0; l < 2; l++ {
		ln := l0
		b := b0
		if l == 1 {
			ln, b = l1, b1
		}
		if h := ln.w[0].Load(); floorOf(h, q.lo(hdrLW(h))) > b {
			return true
		}
		for j := 1; j < wordsPerLine; j++ {
			nw, ow := ln.w[j].Load(), v.w[l][j]
			if nw == ow {
				continue
			}
			for h := 0; h < 2; h++ {
				if l == tl && 2*(j-1)+h == slot {
					continue
				}
				oe, ne := uint32(ow>>(32*h)), uint32(nw>>(32*h))
				if oe != ne && (entFP(oe) == fp || entFP(ne) == fp) {
					return true
				}
			}
		}
	}
	return false
}

// lower gives back a write: it replaces the entry (fp, stamp from) at
// word j, shift sh of ln with (fp, stamp to), or with an empty slot when
// to is 0 or has expired at the line's time. It lowers the stamp by at
// most slack - 2 seal ticks per CAS, each from a consistent read of the line
// (not moving), so that a move that read the line before one of its
// CASes keeps the lowered entry in its window (docs/design.md, "Moving a
// line's time": give-backs). It stops when the entry no longer holds what
// it last stored (a write of the key built on it, an eviction, a move
// that cleared it) and reports whether it reached to (full) and how many
// ticks it gave back otherwise; a part not given back stays, an
// over-count.
func (e *Engine) lower(ln *line, j int, sh uint, fp uint16, from, to uint64) (full bool, given uint64) {
	q := &e.q
	cur := from
	for {
		h := ln.w[0].Load()
		if hdrMoving(h) {
			e.moveLine(ln, hdrTime(h))
			continue
		}
		w := ln.w[j].Load()
		if !sameTime(ln.w[0].Load(), h) {
			continue
		}
		lt := q.lo(hdrLW(h))
		ent := uint32(w >> sh)
		if ent != mkEnt(fp, cur) || interp(entRes(ent), lt+q.span+1) != cur {
			return false, from - cur
		}
		next, nt := freshEmpty(), to
		if to > lt {
			nt = max(to, cur-min(cur, q.slack-2*q.seal))
			next = mkEnt(fp, nt)
		}
		if e.hooks != nil && e.hooks.beforeLower != nil {
			e.hooks.beforeLower()
		}
		if !ln.w[j].CompareAndSwap(w, withEntry(w, sh, next)) {
			continue // the word changed: read it again
		}
		if nt == to || to <= lt {
			return true, from - min(from, to)
		}
		cur = nt
	}
}

// moveLine moves line ln's lw to at least target (ms), in the steps of
// advance, and leaves it not moving. Lock-free: a round that does not
// step follows another writer's step or write.
func (e *Engine) moveLine(ln *line, target uint64) {
	var w [wordsPerLine]uint64
	for {
		e.loadLine(ln, &w)
		if hdrLW(w[0]) >= target && !hdrMoving(w[0]) {
			return
		}
		e.advance(ln, &w, target)
	}
}

// advance moves line ln's lw towards target (ms), from w, a consistent
// read of ln (loadLine); a move in progress goes to at least lw + 1 ms
// (hdrTime), however small target. It returns the header it installed
// and true when it took lw to target and left it not moving (and whether
// it changed an entry word on the way); otherwise the caller reads the
// line again (a CAS that failed, an entry that changed since the read).
// docs/design.md, "Moving a line's time", has the argument; in short,
// the line's ticks are cut into epochs of q.seal ticks, and:
//
//   - a move within lw's epoch is one step: the entries that would not
//     read correctly at the new lw (none, while the invariant holds) are
//     cleared, then the header CAS;
//   - a move into a later epoch first sets the header's moving bit,
//     under which every reader's time is at least lw + 1 ms (base), and
//     reads the line again; each step then ends at target, or earlier
//     where every entry live at base still reads correctly with a
//     margin (at most the least such stamp + seal - 1); a step that
//     enters a later epoch seals: it clears every entry expired at base
//     and adds one to the version of every empty slot, so that every
//     word holding a free slot changes, and any CAS prepared on such a
//     word before the seal fails (until 2^16 seals of a slot wrap its
//     version). It keeps the bit until the last step.
func (e *Engine) advance(ln *line, w *[wordsPerLine]uint64, target uint64) (nh uint64, done, changed bool) {
	q := &e.q
	var fresh [wordsPerLine]uint64 // w is the caller's view: never written
	for {
		hw := w[0]
		lw, moving := hdrLW(hw), hdrMoving(hw)
		target = max(target, hdrTime(hw))
		if target <= lw {
			return 0, false, changed
		}
		lt := q.lo(lw)
		if !moving && q.epoch(q.lo(target)) != q.epoch(lt) {
			if e.hooks != nil && e.hooks.beforeMove != nil {
				e.hooks.beforeMove(hw)
			}
			if !ln.w[0].CompareAndSwap(hw, hw|movingBit) {
				return 0, false, changed
			}
			// Read the line again under the bit, and step from that read.
			e.loadLine(ln, &fresh)
			w = &fresh
			continue
		}
		top := lt + q.span + 1
		base := q.lo(hdrTime(hw)) // every reader's time is at least this tick
		nlw := target
		if moving {
			minLive := uint64(0)
			for j := 1; j < wordsPerLine; j++ {
				for sh := uint(0); sh < 64; sh += 32 {
					if ent := uint32(w[j] >> sh); !isEmpty(ent) {
						if s := interp(entRes(ent), top); s > base && (minLive == 0 || s < minLive) {
							minLive = s
						}
					}
				}
			}
			if minLive != 0 {
				nlw = min(nlw, q.msAtMost(minLive+q.seal-1))
			}
		}
		nlt := q.lo(nlw)
		seal := q.epoch(nlt) != q.epoch(lt)
		for j := 1; j < wordsPerLine; j++ {
			nw := w[j]
			for sh := uint(0); sh < 64; sh += 32 {
				ent := uint32(w[j] >> sh)
				if isEmpty(ent) {
					if seal {
						// A version one up: it repeats only after 2^16
						// seals of this slot.
						nw = withEntry(nw, sh, mkEmpty(entRes(ent)+1))
					}
				} else if s := interp(entRes(ent), top); s+q.slack <= nlt || seal && s <= base {
					nw = withEntry(nw, sh, freshEmpty())
				}
			}
			if nw != w[j] {
				if !ln.w[j].CompareAndSwap(w[j], nw) {
					return 0, false, changed // changed since w: read again
				}
				changed = true
			}
		}
		fo := uint64(0)
		if fl := floorOf(hw, lt); fl > nlt {
			fo = fl - nlt
		}
		nh := mkHdr(nlw, fo)
		if nlw < target {
			nh |= movingBit // more steps follow (only a move under the bit stops short)
		}
		if e.hooks != nil && e.hooks.beforeMove != nil {
			e.hooks.beforeMove(hw)
		}
		if !ln.w[0].CompareAndSwap(hw, nh) {
			return 0, false, changed
		}
		if nlw == target {
			return nh, true, changed
		}
		e.loadLine(ln, &fresh)
		w = &fresh
	}
}

// Reserved returns the key's load right after the admitted write r
// records, its own load included, and the millisecond it holds at (on
// the engine's Timebase): what a Query at that instant would have read
// had nothing written the key since. Writes of the key before this one
// are in it (the entry's CAS serializes them); writes after it are not.
// It only reads r, so it may be called after Refund; the zero Receipt's
// answer means nothing.
func (e *Engine) Reserved(r *Receipt) (ms int64, load float64) {
	at, _ := e.q.ticks(r.ms) // the write's tick, rounded down
	return e.msOf(r.ms), e.q.value(r.stamp, at)
}

// Refund gives back the write a Receipt records, if the entry still holds
// exactly what that write stored: an exact undo. Otherwise (the key was
// written since, or its entry evicted) it does nothing, so the debt stays
// (never an under-count). It reports whether it gave the write back, and
// clears the Receipt, so a second call does nothing. A Receipt issued
// before a snapshot load (ReadFrom, ReadFromAdopt) gives back nothing:
// the load rewrote every entry, so one that holds the same word again
// does not hold that write.
//
// An entry the write replaced that has expired since (or was empty) comes
// back as an empty slot: the same load, 0, without a stamp that could
// drift out of its window. A write larger than the window's slack less
// two epochs (docs/design.md, "Moving a line's time": give-backs) is
// given back in steps; the first commits the refund, and a write of the
// key that lands between two steps keeps the part not yet given back (an
// over-count, as any a concurrent write can leave); Refund then still
// reports true.
func (e *Engine) Refund(r *Receipt) bool {
	if !r.ok {
		return false
	}
	r.ok = false
	if r.resets != e.resets.Load() {
		return false
	}
	ln := &e.lines[r.line]
	j, sh := slotWord(int(r.slot))
	full, given := e.lower(ln, j, sh, entFP(r.written), r.stamp, r.prevStamp)
	return full || given > 0
}
