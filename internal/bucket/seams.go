package bucket

import "math"

// Test seams. The tests that need rapid, porcupine or goleak live in the
// nested tests module (tests/internal/bucket), which sees only exported
// names; these are what they read of an engine's insides, with the
// mutex Model (model.go). Nothing in the module uses them outside tests.

// LineState is a line decoded to full stamps (the engine's, by StateOf,
// or the Model's).
type LineState struct {
	LW    uint64 // ms after the epoch: the latest write
	Floor uint64 // the eviction floor's stamp; 0: none
	FP    [SlotsPerLine]uint16
	Stamp [SlotsPerLine]uint64 // 0 where FP is 0
}

// StateOf decodes line i of e.
func StateOf(e *Engine, i int) LineState {
	var w [wordsPerLine]uint64
	e.loadLine(&e.lines[i], &w)
	var s LineState
	s.LW = hdrLW(w[0])
	lt := e.q.lo(s.LW)
	s.Floor = floorOf(w[0], lt)
	top := lt + e.q.span + 1
	for k := 0; k < SlotsPerLine; k++ {
		j, sh := slotWord(k)
		ent := uint32(w[j] >> sh)
		if isEmpty(ent) {
			continue
		}
		s.FP[k] = entFP(ent)
		s.Stamp[k] = interp(entRes(ent), top)
	}
	return s
}

// Locate returns the two lines and the fingerprint of key, for tests
// that build colliding keys.
func (e *Engine) Locate(key string) (i0, i1 uint64, fp uint16) { return e.locate(e.hash(key)) }

// NowMs returns the clock's reading on e's scale (ms after its epoch),
// the time Model.Do takes.
func NowMs(e *Engine) uint64 { return e.now() }

// Tick returns e's current tick (rounded down).
func Tick(e *Engine) uint64 { lo, _ := e.q.ticks(e.now()); return lo }

// DropSlack returns how far an exponential engine's reading may fall
// below the truth: the remainders below Resolution it drops, at most one
// per tick, Resolution/(1-exp(-kappa)) in all; 0 for the other laws,
// which never read below.
func DropSlack(e *Engine) float64 {
	if e.q.kind != KindExponential {
		return 0
	}
	return e.q.eps / -math.Expm1(-e.q.kappa)
}
