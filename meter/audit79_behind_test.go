package meter_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit79RestoreBehindDecaysFromRestore: restored on a clock far
// behind the snapshot's instant, a meter reads as at the snapshot (no
// downtime) and then decays from the restoring time on: a Novelty mark of
// age 20 ms (T = 100 ms) is forgotten 80 ms (+1 ms) after the restore,
// not when the clock reaches the snapshot's instant; a Rate count decays
// by exp(-t/window) from the restore. meter/doc.go: "(none if the
// restoring clock's time is earlier), so a restored meter reads what the
// never-stopped one would".
func TestAudit79RestoreBehindDecaysFromRestore(t *testing.T) {
	const T0 = 10_000_000
	for _, behind := range []int64{1, 50, 5_000, 1_000_000} {
		clk := sketchtest.NewFakeClock()
		clk.Set(T0 - 20)
		n, _ := meter.NewNovelty(100*time.Millisecond, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(4, 256))
		r, _ := meter.NewRate(100*time.Millisecond, meter.WithClock(clk), meter.WithSeed(1), meter.WithSize(4, 256))
		n.Seen("a")
		r.ObserveAt(clk.Now(), "a", 100)
		clk.Set(T0)
		var nb, rb bytes.Buffer
		if _, err := n.WriteTo(&nb); err != nil {
			t.Fatal(err)
		}
		if _, err := r.WriteTo(&rb); err != nil {
			t.Fatal(err)
		}
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(T0 - behind)
		n2, _ := meter.NewNovelty(100*time.Millisecond, meter.WithClock(clk2), meter.WithSize(4, 256))
		r2, _ := meter.NewRate(100*time.Millisecond, meter.WithClock(clk2), meter.WithSize(4, 256))
		if _, err := n2.ReadFrom(&nb); err != nil {
			t.Fatal(err)
		}
		if _, err := r2.ReadFrom(&rb); err != nil {
			t.Fatal(err)
		}
		want := 100 * math.Exp(-20.0/100)
		if g := r2.PerSecond("a") * 0.1; g < want*(1-1e-6) || g > want*(1+1e-4) {
			t.Errorf("behind %d: Rate restored %v want %v", behind, g, want)
		}
		if !n2.Contains("a") {
			t.Errorf("behind %d: mark of age 20 not contained at restore", behind)
		}
		clk2.Advance(79 * time.Millisecond)
		if !n2.Contains("a") {
			t.Errorf("behind %d: mark of age 20 forgotten 79 ms after the restore", behind)
		}
		clk2.Advance(2 * time.Millisecond) // age 101 ms on the restoring clock
		if n2.Contains("a") {
			t.Errorf("behind %d: mark of age 20 still contained 81 ms after the restore (T = 100 ms): it lasts until the clock reaches the snapshot's instant?", behind)
		}
		want *= math.Exp(-81.0 / 100)
		if g := r2.PerSecond("a") * 0.1; g < want*(1-1e-6) || g > want*(1+1e-4) {
			t.Errorf("behind %d: Rate 81 ms after the restore %v want %v", behind, g, want)
		}
	}
}
