package sketch_test

import (
	"bytes"
	"math"
	"math/big"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a153Pos are clock readings (Unix ms, clocks with Now): both ends of
// int64 ms, the decoders' bound 2^61 on both sides, and 0.
var a153Pos = []int64{math.MaxInt64, math.MaxInt64 - 30_000, 1<<61 + 5_000, 1 << 61, 1<<61 - 5_000, 0,
	-1<<61 + 5_000, -1 << 61, -1<<61 - 5_000, math.MinInt64 + 30_000, math.MinInt64}

func a153Elapsed(w, r int64) float64 {
	d := new(big.Int).Sub(big.NewInt(r), big.NewInt(w))
	if d.Sign() <= 0 {
		return 0
	}
	f, _ := new(big.Float).SetInt(d).Float64()
	return f
}

// TestAudit153SketchRestoreMatrix: k = 50 (Linear 1/s) written at u,
// snapshot at w = u + 20 s (k = 30 then; u = w where w - 20 s would
// underflow), restored at r for every pair of a153Pos: k reads at most
// the snapshot's value (nothing drained comes back) and at least what a
// never-stopped sketch reads at r (30 - max(r-w,0)/1000, floored at 0);
// at or before w, exactly the snapshot's value.
func TestAudit153SketchRestoreMatrix(t *testing.T) {
	for _, w := range a153Pos {
		u := w - 20_000
		if u > w {
			u = w
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(u)
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: a152Lin{1}, Hi: 1e9, Seed: 153, Clock: clk}
		s := mustNewSketch(t, cfg)
		s.UpdateString("k", 50)
		clk.Set(w)
		at := s.QueryString("k")
		var buf bytes.Buffer
		if _, err := s.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		for _, r := range a153Pos {
			m := restoredAt(t, cfg, buf.Bytes(), r)
			got := m.QueryString("k")
			truth := math.Max(at-a153Elapsed(w, r)/1000, 0)
			if got > at+1e-6 {
				t.Errorf("written at %d (k %v), restored at %d: k = %v, above the snapshot's", w, at, r, got)
			}
			if got < truth-1e-6 {
				t.Errorf("written at %d (k %v), restored at %d: k = %v, below a never-stopped sketch's %v", w, at, r, got, truth)
			}
		}
	}
}

// TestAudit153SketchSaturatedWallRestoredAnywhereEarlier: a sketch on a
// clock without Now built at MinInt64 (today) and written at MaxInt64
// ms (today + 2^64 ms: the header's instant saturates at MaxInt64, its
// epoch's too where the epoch is that far), restored on clocks with Now
// at every a153Pos: no downtime, k reads 50.
func TestAudit153SketchSaturatedWallRestoredAnywhereEarlier(t *testing.T) {
	clk := &a152PlainClock{math.MinInt64}
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: a152Lin{1}, Hi: 1e9, Seed: 153, Clock: clk}
	s := mustNewSketch(t, cfg)
	clk.ms = math.MaxInt64
	s.UpdateString("k", 50)
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for _, r := range a153Pos {
		m := restoredAt(t, cfg, buf.Bytes(), r)
		if got := m.QueryString("k"); math.Abs(got-50) > 1e-6 {
			t.Errorf("saturated-wall snapshot restored at %d: k = %v, want 50", r, got)
		}
	}
}
