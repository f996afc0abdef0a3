package meter_test

// Audit 84: Rate and Novelty snapshots. A Novelty mark restored at any
// gap is seen until T after the mark (the downtime counted), never
// forgotten earlier; a Rate never reads below its exact decayed count;
// both decide as the never-stopped meter at the same wall time; damaged
// snapshots are typed errors that leave the meter unchanged.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit84snapT0 = int64(1_700_000_000_000)

func audit84snapNovelty(t testing.TB, clk sketch.Clock, seed uint64) *meter.Novelty {
	t.Helper()
	n, err := meter.NewNovelty(10*time.Second, meter.WithClock(clk), meter.WithSize(3, 512), meter.WithSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func audit84snapRate(t testing.TB, clk sketch.Clock, seed uint64) *meter.Rate {
	t.Helper()
	r, err := meter.NewRate(2*time.Second, meter.WithClock(clk), meter.WithSize(3, 512), meter.WithSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit84SnapNoveltyNeverForgetsEarly marks 40 keys over 12 s, saves,
// restores at gaps (0 to a day, and clocks behind), and checks every key
// marked less than T before the restoring wall time (downtime counted;
// none for a clock behind) is still contained, and that Contains agrees
// with the never-stopped twin for 12 s more (meter doc: "A key marked
// within T of the snapshot's instant is seen until T after its mark, the
// downtime counted").
func TestAudit84SnapNoveltyNeverForgetsEarly(t *testing.T) {
	const T = 10_000
	for _, gap := range []time.Duration{0, time.Millisecond, 3 * time.Second, 9999 * time.Millisecond, 10 * time.Second, time.Minute, 24 * time.Hour, -time.Second, -time.Hour} {
		t.Run(gap.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84snapT0)
			src := audit84snapNovelty(t, clk, 1)
			marks := map[string]int64{}
			for i := range 40 {
				k := fmt.Sprint("nov-", i)
				src.Seen(k)
				marks[k] = clk.NowMillis()
				clk.Advance(300 * time.Millisecond)
			}
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			snapT := clk.NowMillis()
			rclk := sketchtest.NewFakeClock()
			rclk.Set(snapT + gap.Milliseconds())
			dst := audit84snapNovelty(t, rclk, 2) // another seed: adopted
			if _, err := dst.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			shift := max(gap.Milliseconds(), 0)
			clk.Set(snapT + shift)
			for step := range 60 {
				wall := snapT + shift + int64(step)*200
				for k, m := range marks {
					got := dst.Contains(k)
					if wall-m < T-1 && !got {
						t.Fatalf("+%d ms after the restore (gap %v): %s marked %d ms before is forgotten (T = %d ms)", step*200, gap, k, wall-m, T)
					}
					if twin := src.Contains(k); got != twin {
						t.Fatalf("+%d ms after the restore (gap %v): %s restored %v, never-stopped %v", step*200, gap, k, got, twin)
					}
				}
				rclk.Advance(200 * time.Millisecond)
				clk.Advance(200 * time.Millisecond)
			}
		})
	}
}

// TestAudit84SnapRateNeverBelowTruth: 30 keys observed at known times;
// after the restore at each gap PerSecond is at or above the exact
// decayed count / window, and equals the never-stopped twin's.
func TestAudit84SnapRateNeverBelowTruth(t *testing.T) {
	const window = 2000.0 // ms
	for _, gap := range []time.Duration{0, 1500 * time.Millisecond, time.Hour, -time.Hour} {
		t.Run(gap.String(), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84snapT0)
			src := audit84snapRate(t, clk, 5)
			events := map[string][]int64{}
			for i := range 600 {
				k := fmt.Sprint("rate-", i%30)
				src.Observe(k)
				events[k] = append(events[k], clk.NowMillis())
				clk.Advance(time.Duration(i%11) * time.Millisecond)
			}
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			snapT := clk.NowMillis()
			rclk := sketchtest.NewFakeClock()
			rclk.Set(snapT + gap.Milliseconds())
			dst := audit84snapRate(t, rclk, 6)
			if _, err := dst.ReadFrom(&buf); err != nil {
				t.Fatal(err)
			}
			shift := max(gap.Milliseconds(), 0)
			clk.Set(snapT + shift)
			for step := range 20 {
				wall := snapT + shift + int64(step)*250
				for k, ev := range events {
					truth := 0.0
					for _, e := range ev {
						truth += math.Exp(-float64(wall-e) / window)
					}
					truth /= window / 1000
					got := dst.PerSecond(k)
					if got < truth*(1-1e-9) {
						t.Fatalf("+%d ms (gap %v): %s reads %v/s, below its truth %v/s", step*250, gap, k, got, truth)
					}
					if twin := src.PerSecond(k); got != twin {
						t.Fatalf("+%d ms (gap %v): %s restored %v, never-stopped %v", step*250, gap, k, got, twin)
					}
				}
				rclk.Advance(250 * time.Millisecond)
				clk.Advance(250 * time.Millisecond)
			}
		})
	}
}

// TestAudit84SnapMeterDamaged flips a bit of every byte and truncates at
// every length: a typed error, no panic, and the meter unchanged (meter
// doc: "either way r is left unchanged"); Rate into Novelty and another
// window are mismatches.
func TestAudit84SnapMeterDamaged(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit84snapT0)
	mk := func() *meter.Rate {
		r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 8), meter.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	src := mk()
	for i := range 30 {
		src.Observe(fmt.Sprint("x", i%7))
		clk.Advance(13 * time.Millisecond)
	}
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	dst := mk()
	dst.Observe("resident") // a used meter: unchanged means unchanged
	state := func() []byte {
		var b bytes.Buffer
		if _, err := dst.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	pre := state()
	check := func(what string, data []byte, mustFail bool) {
		t.Helper()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s: ReadFrom panicked: %v", what, p)
				}
			}()
			_, err = dst.ReadFrom(bytes.NewReader(data))
		}()
		if err == nil {
			if mustFail {
				t.Fatalf("%s: accepted", what)
			}
			// A flip no checksum sees (none should exist): restore the
			// resident state for the next case.
			t.Fatalf("%s: a damaged snapshot was accepted", what)
		}
		if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("%s: untyped error %v", what, err)
		}
		if post := state(); !bytes.Equal(pre, post) {
			t.Fatalf("%s: refused (%v), and the meter changed", what, err)
		}
	}
	for pos := range snap {
		data := bytes.Clone(snap)
		data[pos] ^= 1 << (pos % 8)
		check(fmt.Sprintf("byte %d flipped", pos), data, true)
	}
	for n := range len(snap) {
		check(fmt.Sprintf("truncated to %d", n), snap[:n], true)
	}
	nov, err := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nov.ReadFrom(bytes.NewReader(snap)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("a Rate's snapshot into a Novelty: %v", err)
	}
	other, _ := meter.NewRate(time.Second+time.Nanosecond, meter.WithClock(clk), meter.WithSize(2, 8))
	if _, err := other.ReadFrom(bytes.NewReader(snap)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("another window: %v", err)
	}
}
