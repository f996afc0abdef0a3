package sketch_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit92CoreZeroDeltaWrites pins what "a zero delta" means in the
// no-write shortcut (sketch/sketch.go:18-21: "A write that would leave a
// cell as it is (a score pinned at Hi or Lo within the same millisecond,
// a zero delta) does not write it"; docs/design.md "No write when
// nothing changes": "An add can leave a cell's word exactly as it was:
// ... a zero delta"). Measured: a zero delta writes nothing only when
// the cell's stamp is no older than the call's time. At a later
// millisecond, Update(k, 0) re-stamps every level (the word changes: the
// decayed score at the new stamp; under decay.None the same score at the
// new stamp), whatever the law; TryUpdate(k, 0, limit) right after, in
// that millisecond, writes nothing. Either way the value read is
// unchanged (never below what was read before, and under None equal).
func TestAudit92CoreZeroDeltaWrites(t *testing.T) {
	laws := map[string]decay.Decay{"none": decay.None(), "exp": decay.Exponential(0.5), "linear": decay.Linear(1)}
	for name, d := range laws {
		t.Run(name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1000)
			s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: 0, Hi: 100, Clock: clk, Decay: d})
			if err != nil {
				t.Fatal(err)
			}
			k := []byte("zero")
			s.Update(k, 5)
			skips := 0
			core.SetHooks(core.SketchOf(s), core.Hooks{Skip: func(uint32) { skips++ }})
			snap := func() []byte {
				b, err := s.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			// Same millisecond: nothing written.
			b0 := snap()
			s.Update(k, 0)
			if !bytes.Equal(b0, snap()) || skips != 2 {
				t.Errorf("Update(k, 0) in the millisecond of the last write: skipped %d of 2 levels, bytes changed %v", skips, !bytes.Equal(b0, snap()))
			}
			// A later millisecond: re-stamped.
			clk.Advance(10 * time.Millisecond)
			before := s.Query(k)
			skips = 0
			b1 := snap()
			s.Update(k, 0)
			b2 := snap()
			if skips != 0 || bytes.Equal(b1, b2) {
				t.Errorf("Update(k, 0) 10 ms after the last write: skipped %d levels, bytes changed %v; pinned: it re-stamps every level", skips, !bytes.Equal(b1, b2))
			}
			if got := s.Query(k); got < before || (name == "none" && got != before) {
				t.Errorf("Query after Update(k, 0) = %v, was %v", got, before)
			}
			skips = 0
			if !s.TryUpdate(k, 0, 100) {
				t.Fatal("TryUpdate(k, 0, 100) denied")
			}
			if !bytes.Equal(b2, snap()) || skips != 2 || core.StripeSeq(core.SketchOf(s), k) != 0 {
				t.Errorf("TryUpdate(k, 0, 100) after the re-stamp: skipped %d of 2, bytes changed %v, stripe seq %d", skips, !bytes.Equal(b2, snap()), core.StripeSeq(core.SketchOf(s), k))
			}
			core.SetHooks(core.SketchOf(s), core.Hooks{})
		})
	}
}
