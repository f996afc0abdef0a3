package rotator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditZeroAllocsAnyGenerations: "The hot methods do not allocate,
// except in the one operation per Period that builds the new generation"
// (package doc), with or without Prefetch ("Results are the same either
// way"), for any valid Generations.
func TestAuditZeroAllocsAnyGenerations(t *testing.T) {
	for _, gens := range []uint32{2, 4, 5, 8} {
		for _, prefetch := range []bool{false, true} {
			t.Run(fmt.Sprintf("gens=%d/prefetch=%v", gens, prefetch), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				r := newRotator(t, rotator.Config{
					Sketch:      sketch.Config{CellsPerLevel: 256, Hi: 1e9, Decay: decay.Exponential(0.01), Clock: clk},
					Generations: gens, Period: time.Hour, Prefetch: prefetch,
				})
				k := []byte("k")
				var sink float64
				for _, op := range []struct {
					name string
					f    func()
				}{
					{"Update", func() { r.Update(k, 1) }},
					{"UpdateString", func() { r.UpdateString("k", 1) }},
					{"Query", func() { sink += r.Query(k) }},
					{"UpdateAndQuery", func() { sink += r.UpdateAndQuery(k, 1) }},
					{"UpdateAndQueryString", func() { sink += r.UpdateAndQueryString("k", 1) }},
					{"TryUpdate/admitted", func() { r.TryUpdate(k, 1, 1e9) }},
					{"TryUpdate/denied", func() { r.TryUpdate(k, 1, -1) }},
					{"TryUpdateString/admitted", func() { r.TryUpdateString("k", 1, 1e9) }},
				} {
					if n := testing.AllocsPerRun(100, func() { clk.Advance(time.Millisecond); op.f() }); n != 0 {
						t.Errorf("%s: %v allocations per call, want 0", op.name, n)
					}
				}
				_ = sink
			})
		}
	}
}
