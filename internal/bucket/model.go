package bucket

import (
	"sync"
)

// Model is the mutex reference of the engine's rules, a test seam (the
// differential and fuzz tests live in the tests module, which cannot see
// this package's unexported names): the same lines, fingerprints,
// estimate, decision, slot choice, eviction, floors and sweep, with full
// 64-bit stamps instead of 16-bit residues, under one mutex. Run
// sequentially it must agree with the engine operation for operation and
// word for word (TestDifferential); the one-sided and exactness
// properties are then checked on both. Nothing in the module uses it
// outside tests.
type Model struct {
	mu    sync.Mutex
	e     *Engine // for locate, hash, quant and epoch only; its lines are not used
	lines []LineState
}

// Op is the kind of an operation of Model.Do.
type Op = opKind

// The operations of Model.Do: read only, add if it fits, add.
const (
	OpQuery = opQuery
	OpTry   = opTry
	OpAdd   = opAdd
)

// ModelReceipt is the Model's Receipt.
type ModelReceipt struct {
	ok        bool
	line      uint64
	slot      int
	fp        uint16
	stamp     uint64
	prevFP    uint16
	prevStamp uint64
}

// NewModel returns an empty model of e's geometry, law, hash and epoch.
func NewModel(e *Engine) *Model {
	return &Model{e: e, lines: make([]LineState, e.n)}
}

// Line returns the model's line i.
func (m *Model) Line(i int) LineState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lines[i]
}

// Do mirrors Engine.do at ms (the engine's milliseconds: see NowMs).
func (m *Model) Do(key string, ms uint64, kind Op, n, limit float64) (ok bool, val float64, rc ModelReceipt) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := &m.e.q
	i0, i1, fp := m.e.locate(m.e.hash(key))
	idx := [2]uint64{i0, i1}
	L := [2]*LineState{&m.lines[i0], &m.lines[i1]}
	var c, lim uint64
	if q.kind != KindExponential {
		c, lim = q.units(n), q.limitUnits(limit)
	}
	for {
		tms := max(ms, L[0].LW, L[1].LW)
		tlo, thi := q.ticks(tms)
		est := max(L[0].Floor, L[1].Floor)
		candL, candS := -1, -1
		for l := 0; l < 2; l++ {
			for s := 0; s < SlotsPerLine; s++ {
				if L[l].FP[s] == fp {
					est = max(est, L[l].Stamp[s])
					if candL < 0 {
						candL, candS = l, s
					}
				}
			}
		}
		if kind == opQuery {
			return false, q.value(est, tlo), rc
		}
		var ns uint64
		if q.kind != KindExponential {
			debt := uint64(0)
			if est > tlo {
				debt = min(est-tlo, q.span) // a load is at most Max
			}
			if kind == opTry && !q.fits(debt, c, lim, n, limit) {
				return false, q.value(est, tlo), rc
			}
			if c == 0 {
				return true, q.value(est, tlo), rc
			}
			ns = min(max(est, thi)+c, thi+q.span)
		} else {
			cur := q.value(est, tlo)
			if kind == opTry && cur+n > limit {
				return false, cur, rc
			}
			if n == 0 {
				return true, cur, rc
			}
			ns = max(q.expStamp(min(cur+n, q.max), thi), est)
		}
		tl, slot := candL, candS
		evict := false
		var vstamp uint64
		if tl < 0 {
			var live [2]int
			free := [2]int{-1, -1}
			for l := 0; l < 2; l++ {
				for s := 0; s < SlotsPerLine; s++ {
					if L[l].FP[s] != 0 && L[l].Stamp[s] > tlo {
						live[l]++
					} else if free[l] < 0 {
						free[l] = s
					}
				}
			}
			tl, slot = 0, free[0]
			if live[1] < live[0] {
				tl, slot = 1, free[1]
			}
			if slot < 0 {
				best, bestFloor, bestStamp := ^uint64(0), uint64(0), ^uint64(0)
				for l := 0; l < 2; l++ {
					for s := 0; s < SlotsPerLine; s++ {
						st, fl := L[l].Stamp[s], L[l].Floor
						cost := max(fl, st)
						if cost < best || cost == best && (fl > bestFloor || fl == bestFloor && st < bestStamp) {
							best, bestFloor, bestStamp, tl, slot = cost, fl, st, l, s
						}
					}
				}
				vstamp, evict = bestStamp, true
			}
		}
		ln := L[tl]
		if tms > ln.LW {
			// The engine's move (advance), run alone: lw to the
			// operation's time; a move into a later epoch in steps, each
			// ending where every entry live at the step's base still
			// reads correctly with a margin, a step that enters a later
			// epoch clearing the entries expired at its base (the seal);
			// every step clearing the entries that would not read
			// correctly in the new window, and dropping a floor at or
			// below it. When the move changed an entry word (a clear, or
			// a seal of a word with an empty slot), the engine decides
			// again on the words as they are now: so does the model.
			if m.move(ln, tms) {
				continue
			}
		}
		if evict {
			// The engine raises the floor, then empties the victim's
			// slot, then writes into it: the write replaces an empty.
			ln.Floor = max(ln.Floor, vstamp)
			ln.FP[slot], ln.Stamp[slot] = 0, 0
		}
		rc = ModelReceipt{ok: q.kind != KindExponential && ns < thi+q.span, line: idx[tl], slot: slot, fp: fp, stamp: ns, prevFP: ln.FP[slot], prevStamp: ln.Stamp[slot]}
		ln.FP[slot], ln.Stamp[slot] = fp, ns
		return true, q.value(ns, tlo), rc
	}
}

// move mirrors Engine.advance run alone on line ln to tms (> ln.LW) and
// reports whether it changed an entry word.
func (m *Model) move(ln *LineState, tms uint64) (changed bool) {
	q := &m.e.q
	lw := ln.LW
	moving := q.epoch(q.lo(tms)) != q.epoch(q.lo(lw))
	for {
		lt := q.lo(lw)
		base, nlw := lt, tms
		if moving {
			base = q.lo(lw + 1)
			minLive := uint64(0)
			for s := 0; s < SlotsPerLine; s++ {
				if st := ln.Stamp[s]; ln.FP[s] != 0 && st > base && (minLive == 0 || st < minLive) {
					minLive = st
				}
			}
			if minLive != 0 {
				nlw = min(nlw, q.msAtMost(minLive+q.seal-1))
			}
		}
		nlt := q.lo(nlw)
		seal := q.epoch(nlt) != q.epoch(lt)
		for s := 0; s < SlotsPerLine; s++ {
			switch {
			case ln.FP[s] == 0:
				changed = changed || seal // the seal changes the empty's version
			case ln.Stamp[s]+q.slack <= nlt || seal && ln.Stamp[s] <= base:
				ln.FP[s], ln.Stamp[s] = 0, 0
				changed = true
			}
		}
		if ln.Floor <= nlt {
			ln.Floor = 0
		}
		lw = nlw
		if nlw == tms {
			ln.LW = tms
			return changed
		}
	}
}

// Refund mirrors Engine.Refund.
func (m *Model) Refund(rc *ModelReceipt) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !rc.ok {
		return false
	}
	rc.ok = false
	ln := &m.lines[rc.line]
	if ln.FP[rc.slot] != rc.fp || ln.Stamp[rc.slot] != rc.stamp {
		return false
	}
	pf, ps := rc.prevFP, rc.prevStamp
	if pf != 0 && ps <= m.e.q.lo(ln.LW) {
		pf, ps = 0, 0
	}
	ln.FP[rc.slot], ln.Stamp[rc.slot] = pf, ps
	return true
}
