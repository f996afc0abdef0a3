package limittest_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit/limittest"
)

// a127Timer is a timer under the model: it must fire exactly when the
// clock's NowMillis reaches at (created + d rounded up to the ms).
type a127Timer struct {
	tm      interface{ C() <-chan time.Time }
	at      int64
	fired   bool
	stopped bool
}

// TestAudit127TimersFireOnTheirTime: random schedules of sub-ms Advances
// (forward and back), Set and SetTime with fractions, and timers of
// random d (NewTimer's doc: fires once Now reads at least d after its
// reading at creation, Now being the whole ms NowMillis reads: the
// first NowMillis >= NowMillis-at-creation + d rounded up). After every
// move, each timer has fired iff NowMillis has reached its time; its
// tick reads at least that time; Stop reports whether it was pending;
// Now is time.UnixMilli(NowMillis); the sub-ms parts add up as a
// nanosecond model says.
func TestAudit127TimersFireOnTheirTime(t *testing.T) {
	iters := 300
	if testing.Short() {
		iters = 60
	}
	for seed := range uint64(iters) {
		r := rand.New(rand.NewPCG(seed, 127))
		c := limittest.NewFakeClock()
		var ns int64 // the model: the clock's reading in ns
		start := r.Int64N(1e6) - 5e5
		c.Set(start)
		ns = start * 1e6
		var timers []*a127Timer
		for range 60 {
			switch k := r.IntN(10); {
			case k < 3:
				d := time.Duration(r.Int64N(5e6)) - 1e5 // -0.1 ms .. 4.9 ms
				tm := c.NewTimer(d)
				at := a127FloorDiv(ns, 1e6) - a127FloorDiv(-int64(d), 1e6) // NowMillis + ceil(d), in ms
				if d <= 0 {
					select {
					case <-tm.C():
					default:
						t.Fatalf("seed %d: NewTimer(%v) did not fire at once", seed, d)
					}
					continue
				}
				timers = append(timers, &a127Timer{tm: tm, at: at})
			case k < 4 && len(timers) > 0:
				x := timers[r.IntN(len(timers))]
				was := x.tm.(interface{ Stop() bool }).Stop()
				if was != (!x.fired && !x.stopped) {
					t.Fatalf("seed %d: Stop() = %v; fired %v stopped %v", seed, was, x.fired, x.stopped)
				}
				x.stopped = true
			case k < 8:
				d := time.Duration(r.Int64N(1_500_000)) - 250_000 // -0.25 .. 1.25 ms
				c.Advance(d)
				ns += int64(d)
			case k < 9:
				ms := c.NowMillis() + r.Int64N(7) - 3
				c.Set(ms)
				ns = ms * 1e6
			default:
				tt := time.Unix(0, ns+r.Int64N(4e6)-2e6)
				c.SetTime(tt)
				ns = tt.UnixNano()
			}
			now := c.NowMillis()
			nt := c.Now()
			if now != a127FloorDiv(ns, 1e6) || nt.UnixNano() != now*1e6 {
				t.Fatalf("seed %d: Now %d ns, NowMillis %d; model %d ns", seed, nt.UnixNano(), now, ns)
			}
			for _, x := range timers {
				due := now >= x.at
				select {
				case tick := <-x.tm.C():
					if x.fired || x.stopped || tick.UnixMilli() < x.at {
						t.Fatalf("seed %d: a timer due at %d fired (tick %d ms; fired %v stopped %v)", seed, x.at, tick.UnixMilli(), x.fired, x.stopped)
					}
					if !due { // ticks are drained after every move
						t.Fatalf("seed %d: a timer due at %d fired at NowMillis %d", seed, x.at, now)
					}
					x.fired = true
				default:
					if due && !x.fired && !x.stopped {
						t.Fatalf("seed %d: a timer due at %d had not fired at NowMillis %d", seed, x.at, now)
					}
				}
			}
			pending := 0
			for _, x := range timers {
				if !x.fired && !x.stopped {
					pending++
				}
			}
			if got := c.Timers(); got != pending {
				t.Fatalf("seed %d: Timers() = %d; want %d", seed, got, pending)
			}
		}
	}
}

func a127FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// TestAudit127SubMsAdvances: the documented accumulation (ten
// Advance(100µs) move NowMillis by one), backwards sub-ms steps across a
// millisecond (and below 0), Now the whole ms NowMillis reads, and a
// timer made mid-millisecond firing at the first whole ms at least d
// after Now (10.9 ms reads 10; + 1.5 ms rounded up: 12 ms).
func TestAudit127SubMsAdvances(t *testing.T) {
	c := limittest.NewFakeClock()
	for i := range 10 {
		if got := c.NowMillis(); got != 0 {
			t.Fatalf("after %d x 100µs NowMillis = %d", i, got)
		}
		c.Advance(100 * time.Microsecond)
	}
	if c.NowMillis() != 1 || c.Now().UnixNano() != 1e6 {
		t.Fatalf("ten Advance(100µs): %d ms, %d ns", c.NowMillis(), c.Now().UnixNano())
	}
	c.Advance(-300 * time.Microsecond)
	if c.NowMillis() != 0 || c.Now().UnixNano() != 0 {
		t.Fatalf("back 300µs: %d ms, %d ns", c.NowMillis(), c.Now().UnixNano())
	}
	c.Advance(-time.Millisecond)
	if c.NowMillis() != -1 || c.Now().UnixNano() != -1e6 || c.Now().UnixMilli() != -1 {
		t.Fatalf("back below 0: %d ms, %d ns", c.NowMillis(), c.Now().UnixNano())
	}
	c.SetTime(time.Unix(0, 10_900_000))       // 10.9 ms: Now reads 10
	tm := c.NewTimer(1500 * time.Microsecond) // 11.5 rounded up: at 12
	c.Advance(1099 * time.Microsecond)        // 11.999
	select {
	case <-tm.C():
		t.Fatal("fired at 11.999 ms; due at 12")
	default:
	}
	c.Advance(time.Microsecond) // 12.000
	select {
	case tick := <-tm.C():
		if tick.UnixNano() != 12e6 {
			t.Fatalf("tick %d ns", tick.UnixNano())
		}
	default:
		t.Fatal("not fired at 12 ms")
	}
}

// TestAudit127SaturationWithTimers: near MaxInt64 a timer whose time is
// representable fires when Advance saturates past it; at both ends
// NowMillis == Now().UnixMilli(), fraction or not.
func TestAudit127SaturationWithTimers(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(math.MaxInt64 - 3)
	tm := c.NewTimer(2 * time.Millisecond) // at MaxInt64-1
	c.Advance(time.Hour)
	if c.NowMillis() != math.MaxInt64 || c.Now().UnixMilli() != math.MaxInt64 {
		t.Fatalf("saturated: %d, Now %d", c.NowMillis(), c.Now().UnixMilli())
	}
	select {
	case tick := <-tm.C():
		if tick.UnixMilli() != math.MaxInt64 {
			t.Fatalf("tick %d", tick.UnixMilli())
		}
	default:
		t.Fatal("a timer due at MaxInt64-1 did not fire at MaxInt64")
	}
	for _, d := range []time.Duration{300 * time.Microsecond, 400 * time.Microsecond, -900 * time.Microsecond, 2 * time.Millisecond} {
		c.Advance(d)
		if c.NowMillis() != c.Now().UnixMilli() {
			t.Fatalf("after %v at the top: NowMillis %d, Now %d", d, c.NowMillis(), c.Now().UnixMilli())
		}
	}
	c.Set(math.MinInt64 + 1)
	for _, d := range []time.Duration{-300 * time.Microsecond, -time.Hour, 200 * time.Microsecond, -900 * time.Microsecond} {
		c.Advance(d)
		if c.NowMillis() != c.Now().UnixMilli() {
			t.Fatalf("after %v at the bottom: NowMillis %d, Now %d", d, c.NowMillis(), c.Now().UnixMilli())
		}
	}
}

// TestAudit127FixedNowRunsBackAtSaturation (audit 127; fixed at stop 63, the text below says what was wrong): the fraction keeps
// accumulating once Advance has saturated NowMillis at MaxInt64, so a
// forward Advance that carries a millisecond past the end leaves
// NowMillis at MaxInt64 and wraps Now's fraction back: Set(MaxInt64),
// Advance(600µs) reads MaxInt64 ms + 600µs, one more Advance(600µs)
// reads MaxInt64 ms + 200µs, 400µs earlier. Expected (sketchtest's
// clock doc, "It saturates at the ends of int64 milliseconds", and
// docs/migrating.md's "Now never goes back while only forward moves
// run"): a clock at the end of time stays there; Now never decreases on
// forward moves. (Symmetric at MinInt64: Set(MinInt64), Advance(-600µs)
// reads MinInt64 ms + 400µs, later than where it was.) Fix:
// sketch/sketchtest/clock.go:70, when addSat clamps, pin sub too (at the
// top to a fraction of 999,999 ns, or stop adding rem; at the bottom to
// 0).
func TestAudit127FixedNowRunsBackAtSaturation(t *testing.T) {
	c := limittest.NewFakeClock()
	c.Set(math.MaxInt64)
	c.Advance(600 * time.Microsecond)
	a := c.Now()
	c.Advance(600 * time.Microsecond)
	if b := c.Now(); b.Before(a) {
		t.Errorf("at MaxInt64 ms, Advance(600µs) moved Now back by %v (from +%v to +%v past the ms)", a.Sub(b), time.Duration(a.Nanosecond()%1e6), time.Duration(b.Nanosecond()%1e6))
	}
	c.Set(math.MinInt64)
	a = c.Now()
	c.Advance(-600 * time.Microsecond)
	if b := c.Now(); b.After(a) {
		t.Errorf("at MinInt64 ms, Advance(-600µs) moved Now forward by %v", b.Sub(a))
	}
}

// TestAudit127FixedSetTimePastInt64MsWraps (audit 127; fixed at stop 63, the text below says what was wrong): SetTime takes t.UnixMilli()
// as is, which wraps for a t past the int64 ms range (time.Time holds
// about 292 billion years; int64 ms 292 million): SetTime(year
// ~300,000,000) puts the clock in the far past (a negative reading), and
// a pending timer stays pending. Expected: SetTime's doc ("puts the clock
// at t") cannot be met exactly, but audit 125's rule for Advance ("a
// clock set near the end of time and advanced stays there, never wraps to
// the other end") makes the nearest reading, MaxInt64, the one to take,
// firing the timers. Fix: sketch/sketchtest/clock.go:91-94, saturate as
// core.wallMillisBetween does (t.Unix() beyond MaxInt64/1000 gives
// MaxInt64, below MinInt64/1000 gives MinInt64).
func TestAudit127FixedSetTimePastInt64MsWraps(t *testing.T) {
	c := limittest.NewFakeClock()
	tm := c.NewTimer(time.Hour)
	far := time.Unix(math.MaxInt64/1000+1000, 0) // past int64 ms
	c.SetTime(far)
	if got := c.NowMillis(); got < 0 {
		t.Errorf("SetTime(%d s after the epoch) reads %d ms (wrapped); want MaxInt64", far.Unix(), got)
	}
	select {
	case <-tm.C():
	default:
		t.Errorf("a 1h timer did not fire on SetTime past the end of int64 ms")
	}
}

// TestAudit127ConcurrentMovesAndTimers runs forward Advances (sub-ms),
// Sets and SetTimes to later readings (forward only), NewTimer/Stop and
// BlockUntilTimers at once (at several GOMAXPROCS, under -race in CI):
// readers see NowMillis() <= Now().UnixMilli() <= NowMillis() around each
// Now, and Now never decreasing; no timer fires before NowMillis reaches
// its time (its tick reads at least that time); Stop false means the
// tick is in the channel; every timer not stopped fires once the clock
// is moved past all of them.
func TestAudit127ConcurrentMovesAndTimers(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 100
	}
	for _, procs := range []int{1, 2, 4} {
		old := runtime.GOMAXPROCS(procs)
		c := limittest.NewFakeClock()
		c.Set(1000)
		var stop atomic.Bool
		var movers sync.Mutex // the movers' read-then-Set stays forward
		var wg sync.WaitGroup
		fail := make(chan string, 16)
		report := func(s string) {
			select {
			case fail <- s:
			default:
			}
		}
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), uint64(procs)))
				for i := 0; i < n; i++ {
					movers.Lock()
					switch r.IntN(6) {
					case 0:
						c.Set(c.NowMillis() + 1)
					case 1:
						c.SetTime(c.Now().Add(time.Duration(r.Int64N(2e6))))
					default:
						c.Advance(time.Duration(r.Int64N(800_000)))
					}
					movers.Unlock()
					runtime.Gosched()
				}
			}()
		}
		// Timer users: a tick never reads before the timer's time.
		var twg sync.WaitGroup
		for g := range 3 {
			twg.Add(1)
			go func() {
				defer twg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 99))
				for i := 0; i < n; i++ {
					before := c.NowMillis()
					d := time.Duration(r.Int64N(3e6)) + 1
					tm := c.NewTimer(d)
					at := before + int64((d+time.Millisecond-1)/time.Millisecond)
					if r.IntN(3) == 0 {
						if !tm.Stop() {
							select {
							case tick := <-tm.C():
								if tick.UnixMilli() < at {
									report("stopped-late timer's tick before its time")
								}
							default:
								report("Stop() false but no tick in the channel")
							}
						}
						continue
					}
					for {
						select {
						case tick := <-tm.C():
							// at is a lower bound on the timer's own time
							// (made at a reading >= before).
							if tick.UnixMilli() < at {
								report("tick before its time")
							}
						default:
							runtime.Gosched()
							if !stop.Load() {
								continue
							}
							// the movers are done: move past every timer
							c.Advance(5 * time.Millisecond)
							continue
						}
						break
					}
				}
			}()
		}
		twg.Add(1)
		go func() {
			defer twg.Done()
			for i := 0; i < n/4; i++ {
				tm := c.NewTimer(1000 * time.Hour) // the movers never reach it
				c.BlockUntilTimers(1)
				if !tm.Stop() {
					report("a 1000h timer was not pending")
				}
			}
		}()
		wg.Wait()
		stop.Store(true)
		twg.Wait()
		runtime.GOMAXPROCS(old)
		close(fail)
		for s := range fail {
			t.Errorf("GOMAXPROCS %d: %s", procs, s)
		}
		if c.Timers() != 0 {
			t.Errorf("GOMAXPROCS %d: %d timers left", procs, c.Timers())
		}
	}
}

// TestAudit127ConcurrentReadersSeeOneReading: with only forward Advances
// (sub-ms) running, a reader's NowMillis, Now, NowMillis are ordered and
// Now never decreases: NowMillis() == Now().UnixMilli() at every instant
// a reader can see.
func TestAudit127ConcurrentReadersSeeOneReading(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	for _, procs := range []int{1, 2, 4} {
		old := runtime.GOMAXPROCS(procs)
		c := limittest.NewFakeClock()
		c.SetTime(time.Unix(0, 999_999))
		var done atomic.Bool
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 5))
				for range n {
					c.Advance(time.Duration(r.Int64N(1_200_000)))
					if r.IntN(4) == 0 {
						runtime.Gosched()
					}
				}
			}()
		}
		errs := make(chan string, 4)
		var rwg sync.WaitGroup
		for range 2 {
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				var last time.Time
				for !done.Load() {
					a := c.NowMillis()
					nt := c.Now()
					b := c.NowMillis()
					if m := nt.UnixMilli(); m < a || m > b || nt.Before(last) {
						select {
						case errs <- "reading out of order":
						default:
						}
						return
					}
					last = nt
					runtime.Gosched()
				}
			}()
		}
		wg.Wait()
		done.Store(true)
		rwg.Wait()
		runtime.GOMAXPROCS(old)
		close(errs)
		for s := range errs {
			t.Errorf("GOMAXPROCS %d: %s", procs, s)
		}
		if c.NowMillis() != c.Now().UnixMilli() {
			t.Errorf("GOMAXPROCS %d: quiescent NowMillis %d != Now %d", procs, c.NowMillis(), c.Now().UnixMilli())
		}
	}
}
