package sketch_test

import (
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit37RestoreThenTryUpdateExact: no decay; 300 of limit 500
// admitted, snapshot, restored on a clock 10 days later, 10 days
// earlier and at a wall time past 2^32 ms from the source epoch: the
// restored sketch admits exactly 200 more, and a second snapshot and
// restore of that keeps 500.
func TestAudit37RestoreThenTryUpdateExact(t *testing.T) {
	src := sketchtest.NewFakeClock()
	src.Set(1_700_000_000_000)
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 128, Hi: 1e9, Clock: src}
	s := mustNewSketch(t, cfg)
	for range 300 {
		if !s.TryUpdateString("k", 1, 500) {
			t.Fatal("denied below the limit")
		}
	}
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{10 * 86400_000, -10 * 86400_000, 1<<32 + 5} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000 + off)
		cfg.Clock = clk
		d := mustNewSketch(t, cfg)
		if err := d.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		n := 0
		for d.TryUpdateString("k", 1, 500) {
			n++
			if n > 1000 {
				break
			}
		}
		if n != 200 || d.QueryString("k") != 500 {
			t.Errorf("restore at offset %d ms: admitted %d more (want 200), Query %v (want 500)", off, n, d.QueryString("k"))
		}
		again, err := d.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(clk.NowMillis() + 1<<31)
		e := mustNewSketch(t, cfg)
		if err := e.UnmarshalBinary(again); err != nil {
			t.Fatal(err)
		}
		if e.QueryString("k") != 500 || e.TryUpdateString("k", 1, 500) {
			t.Errorf("offset %d: second restore reads %v, or admits past 500", off, e.QueryString("k"))
		}
	}
}
