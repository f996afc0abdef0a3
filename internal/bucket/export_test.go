package bucket

// Test hooks: the decoded state of a line, for the differential tests.

// lineState is a line decoded to full stamps.
type lineState struct {
	lw    uint64 // ms
	floor uint64 // stamp; 0: none
	fp    [SlotsPerLine]uint16
	stamp [SlotsPerLine]uint64 // 0 where fp is 0
}

// state decodes line i.
func (e *Engine) state(i int) lineState {
	ln := &e.lines[i]
	var w [wordsPerLine]uint64
	for j := range w {
		w[j] = ln.w[j].Load()
	}
	var s lineState
	s.lw = hdrLW(w[0])
	lt := e.q.lo(s.lw)
	s.floor = floorOf(w[0], lt)
	top := lt + e.q.span + 1
	for k := 0; k < SlotsPerLine; k++ {
		j, sh := slotWord(k)
		ent := uint32(w[j] >> sh)
		if ent == 0 {
			continue
		}
		s.fp[k] = entFP(ent)
		s.stamp[k] = interp(entRes(ent), top)
	}
	return s
}

// Locate exposes locate for tests that build colliding keys.
func (e *Engine) Locate(key string) (i0, i1 uint64, fp uint16) { return e.locate(e.hash(key)) }

// Q exposes the quantization.
func (e *Engine) Q() *quant { return &e.q }

// setHooks installs test hooks (nil removes them). Not safe to call
// while operations run.
func (e *Engine) setHooks(h *testHooks) { e.hooks = h }

// poke writes an entry directly: fingerprint fp with stamp st at slot s
// of line i (fp 0 empties the slot).
func (e *Engine) poke(i, s int, fp uint16, st uint64) {
	j, sh := slotWord(s)
	ln := &e.lines[i]
	w := ln.w[j].Load()
	ent := uint32(0)
	if fp != 0 {
		ent = mkEnt(fp, st)
	}
	ln.w[j].Store(withEntry(w, sh, ent))
}

// tick returns the engine's current tick (rounded down).
func (e *Engine) tick() uint64 { lo, _ := e.q.ticks(e.now()); return lo }
