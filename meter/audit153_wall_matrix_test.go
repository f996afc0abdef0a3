package meter_test

import (
	"bytes"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a153Pos are clock readings (Unix ms, clocks with Now): both ends of
// int64 ms, the decoders' bound 2^61 on both sides, and 0.
var a153Pos = []int64{math.MaxInt64, 1<<61 + 5_000, 1 << 61, 1<<61 - 5_000, 0,
	-1 << 61, -1<<61 - 5_000, math.MinInt64 + 5_000, math.MinInt64}

// a153Small sizes every Rate and Novelty here at 3 x 1,024 cells: the
// ends of the ms range do not depend on the size, and the default's
// restores took 160 s of make test's race step.
var a153Small = meter.WithSize(3, 1024)

// a153Elapsed is r - w in ms, clamped to [0, MaxInt64].
func a153Elapsed(w, r int64) int64 {
	d := new(big.Int).Sub(big.NewInt(r), big.NewInt(w))
	if d.Sign() <= 0 {
		return 0
	}
	if !d.IsInt64() {
		return math.MaxInt64
	}
	return d.Int64()
}

// TestAudit153RateRestoreMatrix: a Rate (window 10 s) with 100 events of
// k at w, snapshot at w, restored at r for every pair of a153Pos:
// PerSecond(k) is at most the snapshot's reading; at or before w it is
// that reading; 5 s after w it is at least a never-stopped Rate's
// (p0 x e^-0.5, less 1%).
func TestAudit153RateRestoreMatrix(t *testing.T) {
	const window = 10 * time.Second
	for _, w := range a153Pos {
		wc := sketchtest.NewFakeClock()
		wc.Set(w)
		r0, err := meter.NewRate(window, meter.WithClock(wc), a153Small)
		if err != nil {
			t.Fatal(err)
		}
		r0.ObserveAt(wc.Now(), "k", 100)
		p0 := r0.PerSecond("k")
		var buf bytes.Buffer
		if _, err := r0.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		for _, r := range a153Pos {
			rc := sketchtest.NewFakeClock()
			rc.Set(r)
			m, err := meter.NewRate(window, meter.WithClock(rc), a153Small)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
				t.Fatalf("w %d r %d: %v", w, r, err)
			}
			got := m.PerSecond("k")
			el := a153Elapsed(w, r)
			if got > p0*(1+1e-6) {
				t.Errorf("written at %d (%v/s), restored at %d: %v/s, above the snapshot's", w, p0, r, got)
			}
			if el == 0 && math.Abs(got-p0) > p0*1e-6 {
				t.Errorf("written at %d (%v/s), restored at %d (not later): %v/s, want %v (no downtime)", w, p0, r, got, p0)
			}
			if el == 5_000 && got < p0*math.Exp(-0.5)*0.99 {
				t.Errorf("written at %d (%v/s), restored 5 s later at %d: %v/s, below a never-stopped Rate's %v", w, p0, r, got, p0*math.Exp(-0.5))
			}
		}
	}
}

// TestAudit153NoveltyRestoreMatrix: a Novelty (within 1 min) that saw k
// at w, snapshot at w, restored at r: Contains(k) where r - w < 5 s (r at
// or before w included); a k seen 10 min before the snapshot (forgotten
// then) is not contained wherever the snapshot is restored.
func TestAudit153NoveltyRestoreMatrix(t *testing.T) {
	const within = time.Minute
	for _, w := range a153Pos {
		wc := sketchtest.NewFakeClock()
		old := w - 600_000
		if old > w {
			old = math.MinInt64
		}
		wc.Set(old)
		n0, err := meter.NewNovelty(within, meter.WithClock(wc), a153Small)
		if err != nil {
			t.Fatal(err)
		}
		oldSeen := w-600_000 <= w
		if oldSeen {
			n0.Seen("old")
		}
		wc.Set(w)
		n0.Seen("k")
		if oldSeen && n0.Contains("old") {
			t.Fatalf("at %d: old still contained 10 min on", w)
		}
		var buf bytes.Buffer
		if _, err := n0.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		for _, r := range a153Pos {
			rc := sketchtest.NewFakeClock()
			rc.Set(r)
			m, err := meter.NewNovelty(within, meter.WithClock(rc), a153Small)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
				t.Fatalf("w %d r %d: %v", w, r, err)
			}
			if a153Elapsed(w, r) <= 5_000 && !m.Contains("k") {
				t.Errorf("seen at %d, restored at %d: k not contained (a never-stopped Novelty holds it)", w, r)
			}
			if oldSeen && m.Contains("old") {
				t.Errorf("old forgotten before the snapshot at %d, restored at %d: contained again", w, r)
			}
		}
	}
}
