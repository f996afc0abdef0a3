package sketch_test

// Audit 145: a review of audit 140's saturating horizon spans
// (internal/core/horizon.go, snapshot.go: subSat/addSat) at the low end of
// the int64 ms range, where a restore back-dates cells.

import (
	"bytes"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a145Restored returns a sketch on a fake clock at base holding a
// snapshot whose key "k" scored 1e6 one second before it was taken
// (Linear(1): it drains one per second, to 0 after 1e6 s, 11.6 days).
func a145Restored(t *testing.T, base int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	cfg := sketch.Config{Hi: 1e9, Levels: 2, CellsPerLevel: 16, Decay: decay.Linear(1), Seed: 1}
	ca := sketchtest.NewFakeClock()
	cfg.Clock = ca
	a, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.UpdateString("k", 1e6)
	ca.Advance(1e9) // 1 s
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	cb := sketchtest.NewFakeClock()
	cb.Set(base)
	cfg.Clock = cb
	b, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	if q := b.QueryString("k"); q != 999999 {
		t.Fatalf("base %d: restored k = %v; want 999999", base, q)
	}
	return b, cb
}

// a145Drain steps b's clock from base by 2^27 ms (1.55 days) 40 times,
// an Update at each step (the horizon's sweeps run), and returns the
// largest score of k once it should have drained (after 2e9 ms).
func a145Drain(b *sketch.Sketch, c *sketchtest.FakeClock, base int64) (worst float64, at int64) {
	for step := int64(0); step < 40; step++ {
		c.Set(base + step<<27)
		b.UpdateString("other", 0)
		if q := b.QueryString("k"); step<<27 > 2e9 && q > worst {
			worst, at = q, step<<27
		}
	}
	return worst, at
}

// TestAudit145FixedRestoreNearMinInt64Resurrects (audit 145; fixed at stop 65, the text below
// says what was wrong): API.md: "Any idle
// time, 1 ms to years, decays as the reference (int64 ms) does"; audit 140 made the horizon's spans saturate so that a clock
// anywhere in the int64 ms range keeps that. Observed: a snapshot whose
// cell is 1 s old, restored on a clock at MinInt64+10 ms, drains to 0 on
// time (1e6 s, 11.6 days), but from 2^31 ms (24.8 days) after the restore the
// key reads 1e6 again (its score before the 1 s of age, for 24.8 days),
// then drains again: a score resurrected. readFrom stamps the cell at
// ms - total (internal/core/snapshot.go:669, `s.stamp(ms-total)`), which
// lies below MinInt64 and wraps, while the floor it sets,
// `subSat(ms, sweepKeep)` (snapshot.go:695), saturates at MinInt64, after
// that stamp: the horizon invariant ("every stamp is at or after ms -
// sweepKeep") is broken, the sweeps read the cell as 2^32 ms in the
// future and never re-base it, and once the clock is 2^31 ms on, its
// 32-bit stamp age wraps. (Before audit 140 the same restore hung: the
// unsaturated floor made every operation sweep for ever.) A base of
// MinInt64 + 2^28 ms, where ms - total fits, drains and stays 0 (below).
// Fix: in readFrom, treat a cell whose ms - total would pass MinInt64
// (total > subSat(ms, math.MinInt64)) as the too-old branch does: decay
// it by total once and stamp it now.
func TestAudit145FixedRestoreNearMinInt64Resurrects(t *testing.T) {
	base := int64(math.MinInt64 + 10)
	b, c := a145Restored(t, base)
	if worst, at := a145Drain(b, c, base); worst != 0 {
		t.Errorf("restored at MinInt64+10 ms: k drained (Linear(1), 999999 left), yet %v ms (%.1f days) later it reads %v; want 0", at, float64(at)/864e5, worst)
	}
}

// TestAudit145RestoreAtLowClocksDrains: the same restore on clocks where
// ms - age fits in int64 (0; MinInt64 + 2^28, inside sweepKeep of the
// end, where the floor saturates) drains and stays drained.
func TestAudit145RestoreAtLowClocksDrains(t *testing.T) {
	for _, base := range []int64{0, -1 << 62, math.MinInt64 + 1<<28, math.MinInt64 + 1<<30} {
		b, c := a145Restored(t, base)
		if worst, at := a145Drain(b, c, base); worst != 0 {
			t.Errorf("restored at %d ms: k reads %v %v ms later; want 0", base, worst, at)
		}
	}
}
