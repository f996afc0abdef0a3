package asm

import (
	"testing"
	"time"
)

// twins pairs each build's Ticks with the always-compiled pure-Go twin.
var twins = []struct {
	name  string
	ticks func() uint64
	pause func()
}{
	{"impl=asm", Ticks, Pause},
	{"impl=generic", TicksGeneric, PauseGeneric},
}

func TestCounterInfo(t *testing.T) {
	ok, hz := counterInfo()
	t.Logf("FastTicks=%v counterHz=%d", FastTicks(), hz)
	if ok != FastTicks() {
		t.Fatalf("counterInfo ok=%v, FastTicks=%v", ok, FastTicks())
	}
}

func TestTicksMonotonic(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	for _, tw := range twins {
		t.Run(tw.name, func(t *testing.T) {
			first := tw.ticks()
			prev := first
			for i := range n {
				now := tw.ticks()
				if now < prev {
					t.Fatalf("read %d went backwards: %d after %d", i, now, prev)
				}
				prev = now
			}
			if prev == first {
				t.Fatalf("counter did not advance over %d reads: stuck at %d", n, first)
			}
		})
	}
}

// TestTicksRate checks that the assembly counter, scaled by the Clock's
// calibration (or CNTFRQ_EL0 on arm64), and the generic twin both advance
// at Nanotime's rate over a 10ms sleep.
func TestTicksRate(t *testing.T) {
	c := NewClock()
	tol := 0.10
	if testing.Short() {
		tol = 0.5 // qemu and loaded CI: timings are poor
	}
	// Warm up so that no read below pays for a first call (or, under qemu,
	// for translating the code).
	for range 100 {
		_, _, _ = c.NowNanos(), TicksGeneric(), Nanotime()
	}
	n0 := Nanotime()
	c0, g0 := c.NowNanos(), TicksGeneric()
	n0b := Nanotime()
	time.Sleep(10 * time.Millisecond)
	n1 := Nanotime()
	c1, g1 := c.NowNanos(), TicksGeneric()
	n1b := Nanotime()
	ref := float64((n1+n1b)/2 - (n0+n0b)/2)
	check := func(name string, got float64) {
		t.Helper()
		if r := got / ref; r < 1-tol || r > 1+tol {
			t.Errorf("%s advanced %.0fns while Nanotime advanced %.0fns: ratio %.3f, want within %.0f%%", name, got, ref, r, tol*100)
		} else {
			t.Logf("%s/Nanotime = %.5f", name, r)
		}
	}
	check("TicksGeneric", float64(g1-g0))
	if !c.fast {
		t.Logf("Clock uses Nanotime (FastTicks=%v): asm rate not checked", FastTicks())
		return
	}
	check("Ticks*mult", float64(c1-c0))
}

func TestPause(t *testing.T) {
	for _, tw := range twins {
		t.Run(tw.name, func(t *testing.T) {
			for range 1000 {
				tw.pause()
			}
		})
	}
}

func TestTicksAllocs(t *testing.T) {
	if a := testing.AllocsPerRun(1000, func() { _ = Ticks(); Pause() }); a != 0 {
		t.Fatalf("Ticks+Pause allocate %v times per call; want 0", a)
	}
}
