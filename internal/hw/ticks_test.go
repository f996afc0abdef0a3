package hw

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

func TestCounterInfo(t *testing.T) {
	flags, hz := counterInfo()
	t.Logf("FastTicks=%v RDTSCP=%v counterHz=%d", FastTicks(), useRDTSCP, hz)
	if ok := flags&infoFast != 0; ok != FastTicks() {
		t.Fatalf("counterInfo flags=%#x, FastTicks=%v", flags, FastTicks())
	}
	if flags&^(infoFast|infoRDTSCP) != 0 {
		t.Fatalf("counterInfo flags=%#x has unknown bits", flags)
	}
}

func TestTicksMonotonic(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	type variant struct {
		name   string
		ticks  func() uint64
		rdtscp bool // value of useRDTSCP during the subtest
	}
	vs := []variant{{"impl=asm", Ticks, useRDTSCP}, {"impl=generic", ticksGeneric, useRDTSCP}, {"impl=asm/unordered", TicksUnordered, useRDTSCP}}
	if runtime.GOARCH == "amd64" && useRDTSCP {
		// Also cover the MFENCE; LFENCE; RDTSC path of CPUs without RDTSCP.
		vs = append(vs, variant{"impl=asm/fences", Ticks, false})
	}
	for _, tw := range vs {
		t.Run(tw.name, func(t *testing.T) {
			// Subtests run one at a time; nothing else reads useRDTSCP now.
			defer func(old bool) { useRDTSCP = old }(useRDTSCP)
			useRDTSCP = tw.rdtscp
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
		_, _, _ = c.NowNanos(), ticksGeneric(), Nanotime()
	}
	// A descheduling between two adjacent reads can spoil one attempt on a
	// loaded machine; a wrong rate spoils all three.
	var errs []string
	for range 3 {
		n0 := Nanotime()
		c0, g0 := c.NowNanos(), ticksGeneric()
		n0b := Nanotime()
		time.Sleep(10 * time.Millisecond)
		n1 := Nanotime()
		c1, g1 := c.NowNanos(), ticksGeneric()
		n1b := Nanotime()
		ref := float64((n1+n1b)/2 - (n0+n0b)/2)
		errs = errs[:0]
		check := func(name string, got float64) {
			r := got / ref
			if r < 1-tol || r > 1+tol {
				errs = append(errs, fmt.Sprintf("%s advanced %.0fns while Nanotime advanced %.0fns: ratio %.3f, want within %.0f%%", name, got, ref, r, tol*100))
			} else {
				t.Logf("%s/Nanotime = %.5f", name, r)
			}
		}
		check("ticksGeneric", float64(g1-g0))
		if c.fast {
			check("Ticks*mult", float64(c1-c0))
		}
		if len(errs) == 0 {
			break
		}
		t.Logf("attempt failed: %v", errs)
	}
	if len(errs) > 0 {
		t.Errorf("rate check failed 3 times; last: %v", errs)
	}
	if !c.fast {
		t.Logf("Clock uses Nanotime (FastTicks=%v): asm rate not checked", FastTicks())
	}
}

// TestPrefetch: Prefetch is a cache hint, so what it must do is return
// for any slice (empty, nil pointers, lines anywhere in a large block),
// change no memory the caller can see, and allocate nothing.
func TestPrefetch(t *testing.T) {
	for _, tw := range []struct {
		name string
		f    func([]unsafe.Pointer)
	}{{"impl=asm", Prefetch}, {"impl=generic", prefetchGeneric}} {
		t.Run(tw.name, func(t *testing.T) {
			block := make([]uint64, 1<<20) // 8 MB: most lines not cached
			for i := range block {
				block[i] = uint64(i) * 0x9e3779b97f4a7c15
			}
			ps := make([]unsafe.Pointer, 64)
			for i := range ps {
				ps[i] = unsafe.Pointer(&block[(i*104729)%len(block)])
			}
			tw.f(nil)
			tw.f(ps[:0])
			tw.f([]unsafe.Pointer{nil}) // a hint never faults
			for n := 1; n <= len(ps); n *= 2 {
				tw.f(ps[:n])
			}
			for i := range block {
				if block[i] != uint64(i)*0x9e3779b97f4a7c15 {
					t.Fatalf("Prefetch changed word %d", i)
				}
			}
			if a := testing.AllocsPerRun(100, func() { tw.f(ps[:4]) }); a != 0 {
				t.Fatalf("Prefetch allocates %v times per call; want 0", a)
			}
		})
	}
}

func TestTicksAllocs(t *testing.T) {
	if a := testing.AllocsPerRun(1000, func() { _ = Ticks() }); a != 0 {
		t.Fatalf("Ticks allocates %v times per call; want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { _ = TicksUnordered() }); a != 0 {
		t.Fatalf("TicksUnordered allocates %v times per call; want 0", a)
	}
}
