package grudge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAuditRotatorZeroAllocsAnyGenerations: "Safe for concurrent use; the
// hot-path methods do not allocate" (Rotator), "Update, Query,
// UpdateAndQuery and TryUpdate do not allocate with a built-in
// aggregator" (package doc), whatever Generations is.
func TestAuditRotatorZeroAllocsAnyGenerations(t *testing.T) {
	for _, gens := range []uint32{2, 4, 5, 8} {
		for _, ticker := range []bool{false, true} {
			t.Run(fmt.Sprintf("gens=%d/ticker=%v", gens, ticker), func(t *testing.T) {
				clk := grudgetest.NewFakeClock()
				rc := grudge.RotatorConfig{
					Sketch:      grudge.Config{Lo: 0, Hi: 1e9, CellsPerLevel: 256, Decay: grudge.Exponential(0.01), Clock: clk},
					Generations: gens, Period: time.Hour,
				}
				if ticker {
					rc.Ticker = grudgetest.NewFakeTicker()
				}
				r, err := grudge.NewRotator(rc)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				k := []byte("k")
				var sink float64
				for _, op := range []struct {
					name string
					f    func()
				}{
					{"Update", func() { r.Update(k, 1) }},
					{"Query", func() { sink += r.Query(k) }},
					{"UpdateAndQuery", func() { sink += r.UpdateAndQuery(k, 1) }},
					{"TryUpdate/admitted", func() { r.TryUpdate(k, 1, 1e9) }},
					{"TryUpdate/denied", func() { r.TryUpdate(k, 1, -1) }},
					{"Rotations", func() { sink += float64(r.Rotations()) }},
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
