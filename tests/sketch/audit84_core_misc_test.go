package sketch_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit84CoreSuggestLevelsNative: sketch.SuggestLevels: "no hot keys
// need one level and a NaN target MaxLevels", cellsPerLevel 0 means
// DefaultCellsPerLevel, and otherwise the smallest L whose
// (1 - (1 - 1/M)^H)^L is at most targetP, MaxLevels when none is.
func TestAudit84CoreSuggestLevelsNative(t *testing.T) {
	if got := sketch.SuggestLevels(0, 100, 1e-9); got != 1 {
		t.Errorf("SuggestLevels(0, 100, 1e-9) = %d; want 1", got)
	}
	if got := sketch.SuggestLevels(10, 100, math.NaN()); got != sketch.MaxLevels {
		t.Errorf("SuggestLevels(10, 100, NaN) = %d; want %d", got, sketch.MaxLevels)
	}
	if a, b := sketch.SuggestLevels(5000, 0, 1e-6), sketch.SuggestLevels(5000, sketch.DefaultCellsPerLevel, 1e-6); a != b {
		t.Errorf("cellsPerLevel 0 gives %d, the default gives %d", a, b)
	}
	for _, c := range []struct {
		h, m uint32
		p    float64
	}{{1000, 100_000, 0.01}, {100, 1000, 1e-6}, {1, 1, 0.99}, {3, 7, 0.5}, {2000, 4096, 1e-3}} {
		want := uint32(sketch.MaxLevels)
		for L := uint32(1); L <= sketch.MaxLevels; L++ {
			if math.Pow(1-math.Pow(1-1/float64(c.m), float64(c.h)), float64(L)) <= c.p {
				want = L
				break
			}
		}
		if got := sketch.SuggestLevels(c.h, c.m, c.p); got != want {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d; want %d", c.h, c.m, c.p, got, want)
		}
	}
}

// TestAudit84CoreAggregateFuncRotator: a custom AggregateFunc decides Query,
// UpdateAndQuery and TryUpdate on the sketch and on the rotator's primary,
// the At forms included.
func TestAudit84CoreAggregateFuncRotator(t *testing.T) {
	second := func(v []float64) float64 {
		c := slices.Clone(v)
		slices.Sort(c)
		return c[1]
	}
	for _, rot := range []bool{false, true} {
		clk := sketchtest.NewFakeClock()
		cfg := sketch.Config{Levels: 4, CellsPerLevel: 3, Hi: 500, Decay: decay.Linear(2), AggregateFunc: second, Clock: clk}
		var s audit84coreAt
		if rot {
			r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: 3, Period: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			s = r
		} else {
			s, _ = sketch.New(cfg)
		}
		for i := range 400 {
			k := fmt.Sprint("k", i%9)
			clk.Advance(37 * time.Millisecond)
			got := s.UpdateAndQueryAt(clk.Now(), k, float64(i%4))
			d := s.QueryDetailed([]byte(k))
			lv := make([]float64, len(d.Levels))
			for j, l := range d.Levels {
				lv[j] = l.Score
			}
			if want := second(lv); got != want || d.Score != want || s.QueryString(k) != want {
				t.Fatalf("rot=%v step %d: UpdateAndQuery %v, Detail %v, Query %v; want second(%v) = %v", rot, i, got, d.Score, s.QueryString(k), lv, want)
			}
			if s.TryUpdateAt(clk.Now(), k, 1, d.Score+0.5) {
				t.Fatalf("rot=%v step %d: TryUpdate over the custom aggregate admitted", rot, i)
			}
			if !s.TryUpdateString(k, 1, d.Score+1) {
				t.Fatalf("rot=%v step %d: TryUpdate(k, 1, agg+1) denied", rot, i)
			}
		}
	}
}
