package core

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
)

// a140Clock reads a fixed millisecond (no fake clock package: they
// import this one).
type a140Clock struct{ ms int64 }

func (c *a140Clock) NowMillis() int64 { return c.ms }

// TestAudit140FixedSweepDueSaturatesNearClockEnd (audit 140; fixed at
// stop 65, the text below says what was wrong): "an operation that finds
// the periodic sweep due (about every 2^29 ms ...) first re-stamps up to
// 16,384 cells" and "The cost on the hot path is one load of due". With
// the clock within 2^30 ms of the end of int64 ms (a FakeClock saturated
// there), due = floor + 2^30 (initHorizon) and due = at - 2^29 + 2^30
// (sweepStep) wrapped negative, so every operation found a sweep due and
// scanned a 16,384-cell chunk (measured about 185x the cost of an Update
// at clock 0, for every Update). Now both sums saturate: due stays
// MaxInt64 there, and an operation near the end starts no sweep.
func TestAudit140FixedSweepDueSaturatesNearClockEnd(t *testing.T) {
	for _, start := range []int64{math.MaxInt64 - 1000, math.MaxInt64 - sweepDue, math.MaxInt64} {
		clk := &a140Clock{start}
		s, err := New(Config{Hi: 1e9, Levels: 2, CellsPerLevel: 64, Clock: clk, Decay: decay.Exponential(1)})
		if err != nil {
			t.Fatal(err)
		}
		if d := s.due.Load(); d < start {
			t.Fatalf("start %d: due %d is before the clock (wrapped)", start, d)
		}
		s.UpdateString("k", 1)
		s.UpdateString("k", 1)
		if s.sweep.active || s.sweep.next != 0 {
			t.Errorf("start %d: an Update started a sweep (due %d)", start, s.due.Load())
		}
		// A sweep that completes at a time near the end stores a due that
		// does not wrap either.
		s.sweep.mu.Lock()
		s.sweepStep(math.MaxInt64-10, -1)
		s.sweep.mu.Unlock()
		if d := s.due.Load(); d != math.MaxInt64 {
			t.Errorf("start %d: due after a sweep at MaxInt64-10 = %d; want MaxInt64 (saturated)", start, d)
		}
	}
}
