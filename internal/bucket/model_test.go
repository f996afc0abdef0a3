package bucket

import (
	"sync"
)

// model is the mutex reference of the engine's rules: the same lines,
// fingerprints, estimate, decision, slot choice, eviction, floors and
// sweep, with full 64-bit stamps instead of 16-bit residues, under one
// mutex. Run sequentially it must agree with the engine operation for
// operation and word for word (TestDifferential); the one-sided and
// exactness properties are then checked on both.
type model struct {
	mu    sync.Mutex
	e     *Engine // for locate, hash, quant and epoch only; its lines are not used
	lines []modelLine
}

type modelLine struct {
	lw    uint64
	floor uint64 // absolute stamp; 0: none
	fp    [SlotsPerLine]uint16
	stamp [SlotsPerLine]uint64
}

type modelReceipt struct {
	ok        bool
	line      uint64
	slot      int
	fp        uint16
	stamp     uint64
	prevFP    uint16
	prevStamp uint64
}

func newModel(e *Engine) *model {
	return &model{e: e, lines: make([]modelLine, e.n)}
}

// do mirrors Engine.do.
func (m *model) do(key string, ms uint64, kind opKind, n, limit float64) (ok bool, val float64, rc modelReceipt) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := &m.e.q
	i0, i1, fp := m.e.locate(m.e.hash(key))
	idx := [2]uint64{i0, i1}
	L := [2]*modelLine{&m.lines[i0], &m.lines[i1]}
	var c, lim uint64
	if q.kind != KindExponential {
		c, lim = q.units(n), q.limitUnits(limit)
	}
	for {
		tms := max(ms, L[0].lw, L[1].lw)
		tlo, thi := q.ticks(tms)
		est := max(L[0].floor, L[1].floor)
		candL, candS := -1, -1
		for l := 0; l < 2; l++ {
			for s := 0; s < SlotsPerLine; s++ {
				if L[l].fp[s] == fp {
					est = max(est, L[l].stamp[s])
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
				debt = est - tlo
			}
			if kind == opTry && debt+c > lim {
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
					if L[l].fp[s] != 0 && L[l].stamp[s] > tlo {
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
						st, fl := L[l].stamp[s], L[l].floor
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
		if tms > ln.lw || evict {
			nlw := max(ln.lw, tms)
			lt, nlt := q.lo(ln.lw), q.lo(nlw)
			fl := ln.floor
			if evict {
				fl = max(fl, vstamp)
			}
			if fl <= nlt {
				fl = 0
			}
			changed := nlw != ln.lw || fl != ln.floor
			ln.lw, ln.floor = nlw, fl
			if changed && nlt > lt {
				// The engine's sweep; if it touches the target's word or
				// any candidate, the engine's CAS or validation fails and
				// it decides again: so does the model.
				redo := false
				for s := 0; s < SlotsPerLine; s++ {
					if ln.fp[s] != 0 && ln.stamp[s]+sweepAge <= nlt {
						if s>>1 == slot>>1 || ln.fp[s] == fp {
							redo = true
						}
						ln.fp[s], ln.stamp[s] = 0, 0
					}
				}
				if redo {
					continue
				}
			}
		}
		rc = modelReceipt{ok: q.kind != KindExponential && ns < thi+q.span, line: idx[tl], slot: slot, fp: fp, stamp: ns, prevFP: ln.fp[slot], prevStamp: ln.stamp[slot]}
		ln.fp[slot], ln.stamp[slot] = fp, ns
		return true, q.value(ns, tlo), rc
	}
}

// refund mirrors Engine.Refund.
func (m *model) refund(rc *modelReceipt) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !rc.ok {
		return false
	}
	rc.ok = false
	ln := &m.lines[rc.line]
	if ln.fp[rc.slot] != rc.fp || uint16(ln.stamp[rc.slot]) != uint16(rc.stamp) {
		return false
	}
	pf, ps := rc.prevFP, rc.prevStamp
	if pf != 0 && ps <= m.e.q.lo(ln.lw) {
		pf, ps = 0, 0
	}
	ln.fp[rc.slot], ln.stamp[rc.slot] = pf, ps
	return true
}
