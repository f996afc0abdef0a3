package meter_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit97MeterZeroObserveIsARead: since stop 59 an ObserveAt of
// n = 0 "writes nothing (it reads)" (meter/rate.go:50-51) and "A read
// takes t (the time base, rotation) alike" (rate.go:119-120). Two
// Rates on one fixed-seed schedule (a 40 ms window rotated every
// window, 5 keys in a 2 x 8 sketch so that they collide, times
// back-dated, current and ahead of the clock, idle stretches past two
// Periods): where A calls ObserveAt(t, k, 0), B calls PerSecondAt(t,
// k). Every reading and the final snapshot's bytes agree.
func TestAudit97MeterZeroObserveIsARead(t *testing.T) {
	w := 40 * time.Millisecond
	mk := func() (*meter.Rate, *sketchtest.FakeClock) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSeed(97), meter.WithSize(2, 8),
			meter.WithHasher(sketch.XXH3()), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		return r, clk
	}
	a, ca := mk()
	b, cb := mk()
	keys := []string{"k0", "k1", "k2", "k3", "k4"}
	rng := rand.New(rand.NewPCG(97, 3))
	zeros := 0
	for step := range 3000 {
		var adv time.Duration
		switch x := rng.IntN(100); {
		case x < 3:
			adv = time.Duration(80+rng.IntN(200)) * time.Millisecond // past two Periods
		case x < 60:
			adv = time.Duration(rng.IntN(4)) * time.Millisecond
		default:
			adv = time.Duration(rng.IntN(1500)) * time.Microsecond
		}
		ca.Advance(adv)
		cb.Advance(adv)
		at := ca.Now().Add(time.Duration(rng.IntN(61)-40) * time.Millisecond) // back-dated to ahead
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(2) == 0 {
			a.ObserveAt(at, k, 0)
			b.PerSecondAt(at, k)
			zeros++
		} else {
			n := float64(1 + rng.IntN(3))
			if rng.IntN(4) == 0 {
				n = 0.37
			}
			a.ObserveAt(at, k, n)
			b.ObserveAt(at, k, n)
		}
		for _, q := range keys {
			if ga, gb := a.PerSecond(q), b.PerSecond(q); ga != gb {
				t.Fatalf("step %d: key %s reads %v after ObserveAt(0)s, %v after PerSecondAt reads instead", step, q, ga, gb)
			}
		}
	}
	var sa, sb bytes.Buffer
	if _, err := a.WriteTo(&sa); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(&sb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.Bytes(), sb.Bytes()) {
		t.Fatalf("after %d ObserveAt(0)s: the snapshot differs from the one where they were reads", zeros)
	}
}

// TestAudit97MeterZeroObserveTakesItsTime: an ObserveAt of 0 at t2
// counts as a time used, so a later write back-dated to t1 < t2 counts
// at t2 (sketch's time base: "a t before a time already used counts as
// that time"), as after a write; and one past the rotation deadline
// rotates as a write would: after ObserveAt(0) of another key two
// Periods on, a key observed before reads 0 even at a back-dated time.
func TestAudit97MeterZeroObserveTakesItsTime(t *testing.T) {
	w := 100 * time.Millisecond
	mk := func() (*meter.Rate, *sketchtest.FakeClock) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		r, err := meter.NewRate(w, meter.WithClock(clk), meter.WithSeed(97), meter.WithSize(2, 64), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		return r, clk
	}
	r, clk := mk()
	t1 := clk.Now()
	clk.Advance(30 * time.Millisecond)
	t2 := clk.Now()
	r.ObserveAt(t2, "z", 0)
	r.ObserveAt(t1, "k", 5)
	if got := r.PerSecondAt(t2, "k"); got != 50 {
		t.Errorf("5 events back-dated to %v before a zero ObserveAt: read %v/s at the later time, want 50 (counted then, no decay)", t2.Sub(t1), got)
	}
	// The same without the zero ObserveAt: counted at t1, decayed 30 ms.
	r2, clk2 := mk()
	clk2.Advance(30 * time.Millisecond)
	r2.ObserveAt(t1, "k", 5)
	if got, want := r2.PerSecondAt(t2, "k"), 50*math.Exp(-0.3); got < want || got > want*(1+1e-6) {
		t.Errorf("without the zero ObserveAt: read %v/s, want about %v", got, want)
	}
	// Rotation: two Periods past, a zero ObserveAt of another key retires
	// both generations that counted k.
	clk.Advance(250 * time.Millisecond)
	r.ObserveAt(clk.Now(), "z", 0)
	if got := r.PerSecondAt(t2, "k"); got != 0 {
		t.Errorf("after a zero ObserveAt 250 ms (2.5 Periods) on: k reads %v/s, want 0 (both generations retired)", got)
	}
}

// TestAudit97MeterZeroObserveEdges: ObserveAt's contract around 0
// (meter/rate.go:108-111): -0 is in [0, MaxFloat32] and reads; NaN, a
// negative and a value above MaxFloat32 still panic with "meter:"; the
// zero Rate panics on a 0 too ("meter: zero Rate; use NewRate"); an
// ObserveAt of 0 does not allocate, on a new key or a written one.
func TestAudit97MeterZeroObserveEdges(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSeed(97), meter.WithSize(2, 64))
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveAt(clk.Now(), "k", math.Copysign(0, -1))
	if got := r.PerSecond("k"); got != 0 {
		t.Errorf("after ObserveAt(-0): %v/s, want 0", got)
	}
	panics := func(name string, f func()) (msg string) {
		defer func() {
			if e := recover(); e != nil {
				msg = fmt.Sprint(e)
			}
		}()
		f()
		t.Errorf("%s: no panic", name)
		return ""
	}
	for _, n := range []float64{math.NaN(), -1e-300, math.Inf(1), math.Nextafter(math.MaxFloat32, math.Inf(1))} {
		if msg := panics(fmt.Sprint("ObserveAt ", n), func() { r.ObserveAt(clk.Now(), "k", n) }); msg != "" && !strings.HasPrefix(msg, "meter:") {
			t.Errorf("ObserveAt(%v) panicked %q, want a message starting meter:", n, msg)
		}
	}
	var zero meter.Rate
	if msg := panics("zero Rate ObserveAt 0", func() { zero.ObserveAt(clk.Now(), "k", 0) }); msg != "" && msg != "meter: zero Rate; use NewRate" {
		t.Errorf("zero Rate ObserveAt(0) panicked %q", msg)
	}
	r.ObserveAt(clk.Now(), "w", 3)
	now := clk.Now()
	if n := testing.AllocsPerRun(100, func() { r.ObserveAt(now, "w", 0); r.ObserveAt(now, "new", 0) }); n != 0 {
		t.Errorf("ObserveAt(0): %v allocations a run, want 0", n)
	}
}
