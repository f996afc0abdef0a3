package hw

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestClockMonotonic(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	for _, tc := range []struct {
		name string
		c    *Clock
	}{
		{"clock=NewClock", NewClock()},
		{"clock=zero", new(Clock)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			firstNs := c.NowNanos()
			prevNs, prevMs := firstNs, c.NowMillis()
			for i := range n {
				ns, ms := c.NowNanos(), c.NowMillis()
				if ns < prevNs || ms < prevMs {
					t.Fatalf("read %d went backwards: ns %d after %d, ms %d after %d", i, ns, prevNs, ms, prevMs)
				}
				prevNs, prevMs = ns, ms
			}
			if prevNs == firstNs {
				t.Fatalf("NowNanos did not advance over %d reads", n)
			}
		})
	}
}

func TestClockFastPath(t *testing.T) {
	c := NewClock()
	if c.fast {
		t.Logf("FastTicks=%v mult=%d: %.6f ns/tick, %.3f MHz", FastTicks(), c.mult,
			float64(c.mult)/(1<<multShift), float64(1<<multShift)/float64(c.mult)*1e3)
	} else {
		t.Logf("FastTicks=%v: Clock reads Nanotime", FastTicks())
	}
	if c.fast != FastTicks() {
		t.Errorf("Clock fast path = %v, FastTicks = %v: calibration rejected the counter", c.fast, FastTicks())
	}
}

// TestNewClockShared checks that Clocks share origin and calibration.
func TestNewClockShared(t *testing.T) {
	c1 := NewClock()
	a := c1.NowNanos()
	c2 := NewClock()
	if b := c2.NowNanos(); b < a {
		t.Fatalf("second Clock read %d after first read %d: origins differ", b, a)
	}
	if *c1 != *c2 {
		t.Fatalf("NewClock returned different calibrations: %+v, %+v", *c1, *c2)
	}
}

func TestZeroClockIsNanotime(t *testing.T) {
	var c Clock
	a := Nanotime()
	got := c.NowNanos()
	b := Nanotime()
	if got < a || got > b {
		t.Fatalf("zero Clock NowNanos = %d; want within Nanotime bracket [%d, %d]", got, a, b)
	}
}

func TestNowMillisTracksTimeSince(t *testing.T) {
	c := NewClock()
	const sleep = 50 * time.Millisecond
	tolMs, tolNs := int64(3), int64(2*time.Millisecond)
	if testing.Short() {
		tolMs, tolNs = 25, int64(25*time.Millisecond)
	}
	// A descheduling between two adjacent reads can spoil one attempt on a
	// loaded machine; a wrong rate or origin spoils all three.
	var errs []string
	for range 3 {
		start := time.Now()
		ms0, ns0 := c.NowMillis(), c.NowNanos()
		time.Sleep(sleep)
		ms1, ns1 := c.NowMillis(), c.NowNanos()
		el := time.Since(start)
		errs = errs[:0]
		if d := (ms1 - ms0) - el.Milliseconds(); d < -tolMs || d > tolMs {
			errs = append(errs, fmt.Sprintf("NowMillis advanced %dms while time.Since says %v: off by %dms, want within %dms", ms1-ms0, el, d, tolMs))
		}
		if d := (ns1 - ns0) - el.Nanoseconds(); d < -tolNs || d > tolNs {
			errs = append(errs, fmt.Sprintf("NowNanos advanced %dns while time.Since says %v: off by %dns, want within %dns", ns1-ns0, el, d, tolNs))
		}
		if len(errs) == 0 {
			return
		}
		t.Logf("attempt failed: %v", errs)
	}
	t.Errorf("tracking check failed 3 times; last: %v", errs)
}

func TestClockAllocs(t *testing.T) {
	for _, c := range []*Clock{NewClock(), new(Clock)} {
		if a := testing.AllocsPerRun(1000, func() { _ = c.NowMillis() }); a != 0 {
			t.Errorf("NowMillis (fast=%v) allocates %v times per call; want 0", c.fast, a)
		}
		if a := testing.AllocsPerRun(1000, func() { _ = c.NowNanos() }); a != 0 {
			t.Errorf("NowNanos (fast=%v) allocates %v times per call; want 0", c.fast, a)
		}
	}
}

// ticksToNanosOracle is floor((t-tick0 mod 2^64) * mult / 2^32) mod 2^64,
// computed with math/big.
func ticksToNanosOracle(tick0, tk, mult uint64) int64 {
	d := new(big.Int).SetUint64(tk - tick0)
	p := d.Mul(d, new(big.Int).SetUint64(mult))
	p.Rsh(p, multShift)
	p.And(p, new(big.Int).SetUint64(^uint64(0)))
	return int64(p.Uint64())
}

func FuzzTicksToNanos(f *testing.F) {
	f.Add(uint64(0), uint64(12345), uint64(1<<32))
	f.Add(^uint64(0)-10, uint64(5), uint64(1431655765))   // counter wrapped past the origin, 3 GHz
	f.Add(uint64(1), uint64(1<<62), uint64(178956970666)) // 24 MHz, huge span
	f.Add(uint64(7), uint64(7), ^uint64(0)>>1)            // zero span
	f.Add(uint64(0), ^uint64(0), ^uint64(0)>>1)           // product overflows 64 bits
	f.Fuzz(func(t *testing.T, tick0, tk, mult uint64) {
		c := Clock{fast: true, tick0: tick0, mult: mult}
		if got, want := c.ticksToNanos(tk), ticksToNanosOracle(tick0, tk, mult); got != want {
			t.Fatalf("ticksToNanos(tick0=%d, t=%d, mult=%d) = %d; want %d", tick0, tk, mult, got, want)
		}
	})
}

// TestTicksToNanosWrapMonotonic sets the origin just below 2^64 so the
// counter wraps during the test, and checks that the conversion stays
// monotonic through the wrap.
func TestTicksToNanosWrapMonotonic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rounds := 100
	if testing.Short() {
		rounds = 10
	}
	for range rounds {
		mult := 1 + r.Uint64N(200<<multShift) // up to 200 ns/tick
		tick0 := ^uint64(0) - r.Uint64N(1<<20)
		c := Clock{fast: true, tick0: tick0, mult: mult}
		prev := int64(0)
		tk := tick0
		for range 4000 {
			tk += 1 + r.Uint64N(1000)
			ns := c.ticksToNanos(tk)
			if ns < prev {
				t.Fatalf("mult=%d: ticks %d (origin %d) gave %dns after %dns", mult, tk, tick0, ns, prev)
			}
			if want := ticksToNanosOracle(tick0, tk, mult); ns != want {
				t.Fatalf("mult=%d: ticks %d (origin %d) gave %dns; oracle says %d", mult, tk, tick0, ns, want)
			}
			prev = ns
		}
	}
}

// stamp is one published observation in TestCrossCPUMonotonic. Immutable
// once published.
type stamp struct {
	seq    uint64 // publication number; 0 is the initial stamp
	writer int    // worker that published it; -1 for the initial stamp
	ticks  uint64 // the writer's Ticks reading
	nanos  int64  // the writer's NowNanos reading
	millis int64  // the writer's NowMillis reading
}

// TestCrossCPUMonotonic pins workers to different CPUs. Each loads the
// latest published stamp, then reads the clocks, checks it did not read
// earlier than the stamp, and tries to publish its own reading with a CAS
// on the stamp it observed. Published times therefore only increase, and a
// reading that is smaller than an observed one from another CPU is TSC skew
// (or a missing fence in Ticks).
func TestCrossCPUMonotonic(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	c := NewClock()
	cpus := AllowedCPUs()
	procsList := []int{2}
	if n := runtime.NumCPU(); n > 2 {
		procsList = append(procsList, n)
	}
	type mode struct {
		name   string
		rdtscp bool // value of useRDTSCP during the subtest
	}
	modes := []mode{{"ticks=default", useRDTSCP}}
	if runtime.GOARCH == "amd64" && useRDTSCP {
		modes = append(modes, mode{"ticks=fences", false})
	}
	total := 100 * time.Millisecond
	for _, procs := range procsList {
		for _, m := range modes {
			t.Run(fmt.Sprintf("procs=%d/%s", procs, m.name), func(t *testing.T) {
				// Subtests run one at a time; the workers below are the only
				// other readers of useRDTSCP, and they start after this store.
				defer func(old bool) { useRDTSCP = old }(useRDTSCP)
				useRDTSCP = m.rdtscp
				crossCPURun(t, c, cpus, procs, total/time.Duration(len(procsList)*len(modes)))
			})
		}
	}
}

// crossCPURun is one configuration of TestCrossCPUMonotonic: procs workers
// under GOMAXPROCS=procs for dur, pinned round-robin to cpus.
func crossCPURun(t *testing.T, c *Clock, cpus []int, procs int, dur time.Duration) {
	runtime.GOMAXPROCS(procs)
	workers := procs
	var latest atomic.Pointer[stamp]
	latest.Store(&stamp{writer: -1})
	var stop atomic.Bool
	var reads, cross, violations atomic.Int64
	var crossSeen atomic.Bool // some worker observed another's stamp
	var first sync.Once
	var firstMsg string
	var pinned atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if len(cpus) > 0 {
				undo, ok, _ := PinThread(cpus[w%len(cpus)])
				defer undo()
				if ok {
					pinned.Add(1)
				}
			}
			var nReads, nCross int64
			for !stop.Load() {
				p := latest.Load()
				tk, ns, ms := Ticks(), c.NowNanos(), c.NowMillis()
				nReads++
				if p.writer != w && p.writer >= 0 {
					nCross++
					if nCross&255 == 1 {
						crossSeen.Store(true)
					}
				}
				if tk < p.ticks || ns < p.nanos || ms < p.millis {
					violations.Add(1)
					first.Do(func() {
						firstMsg = fmt.Sprintf("worker %d read (ticks %d, ns %d, ms %d) after observing seq %d from worker %d: (ticks %d, ns %d, ms %d)",
							w, tk, ns, ms, p.seq, p.writer, p.ticks, p.nanos, p.millis)
					})
				}
				latest.CompareAndSwap(p, &stamp{seq: p.seq + 1, writer: w, ticks: tk, nanos: ns, millis: ms})
			}
			reads.Add(nReads)
			cross.Add(nCross)
		})
	}
	// Run for dur, and on a loaded machine (where the workers may take
	// turns on one CPU) until at least one cross-CPU observation, up to
	// 20 s.
	time.Sleep(dur)
	for deadline := time.Now().Add(20 * time.Second); !crossSeen.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("workers=%d pinned=%d cpus=%v reads=%d cross-CPU observations=%d publications=%d",
		workers, pinned.Load(), cpus, reads.Load(), cross.Load(), latest.Load().seq)
	if v := violations.Load(); v > 0 {
		t.Fatalf("%d readings went backwards across goroutines; first: %s", v, firstMsg)
	}
	if cross.Load() == 0 {
		t.Fatalf("no worker ever observed another's stamp: the test checked nothing")
	}
}
