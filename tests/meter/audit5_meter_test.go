package meter_test

// Audit 5: meter's documented guarantees with fake clocks: Novelty's
// "seen within T" boundary (Seen and Contains agree, the mark lasts T
// and no longer), its false-positive rate against the documented
// formula and its direction, refresh semantics; Inflight's "never admit
// past max" under contention through collisions; Rate's documented
// startup transient; bad input.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit5Novelty builds a Novelty on a fake clock set to start.
func audit5Novelty(t *testing.T, within time.Duration, start int64, opts ...meter.Option) (*meter.Novelty, *sketchtest.FakeClock) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(start)
	n, err := meter.NewNovelty(within, append([]meter.Option{meter.WithClock(clk), meter.WithSeed(5)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return n, clk
}

// TestAudit5MeterNoveltyBoundary: "the key counts as seen while the Min
// of its cells is above the threshold theta = exp(-1), which the key's
// own mark stays above for exactly T"; Seen "reports whether key was
// marked within the last T" and Contains "reports whether key was
// marked within the last T": the two answer the same question, so at
// every millisecond around the boundary Seen must agree with Contains
// read just before it at the same instant. With roomy cells (no
// collisions), a key marked at t0 is seen at every age up to T, and not
// seen once its mark has decayed a little below theta (2 ms past T for
// T <= 10 s: exp(-2ms/T) is far below 1 - float32 epsilon).
func TestAudit5MeterNoveltyBoundary(t *testing.T) {
	for _, within := range []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, 1700 * time.Millisecond, 10 * time.Second} {
		t.Run(within.String(), func(t *testing.T) {
			const t0 = 1_000_000
			n, clk := audit5Novelty(t, within, t0, meter.WithSize(4, 1<<12))
			T := within.Milliseconds()
			// Ages to probe: every ms up to T+5 for short T, a band
			// around T otherwise (plus a few early ones).
			var ages []int64
			for a := int64(0); a <= T+5; a++ {
				if T <= 50 || a < 5 || a >= T-5 {
					ages = append(ages, a)
				}
			}
			// Mark one key per probed age at t0, then probe in time order.
			for _, a := range ages {
				if n.SeenAt(clk.Now(), fmt.Sprintf("k%d", a)) {
					t.Fatalf("fresh key k%d told seen at t0 (no collisions expected)", a)
				}
			}
			for _, a := range ages {
				clk.Set(t0 + a)
				k := fmt.Sprintf("k%d", a)
				c := n.ContainsAt(clk.Now(), k)
				s := n.SeenAt(clk.Now(), k)
				if c != s {
					t.Fatalf("T=%v age %d ms: Contains %v but Seen %v at the same instant", within, a, c, s)
				}
				if a <= T && !s {
					t.Fatalf("T=%v: key marked %d ms ago (<= T) is not seen: a false negative within T", within, a)
				}
				if a >= T+2 && s {
					t.Fatalf("T=%v: key marked %d ms ago (> T) is still seen without collisions", within, a)
				}
			}
		})
	}
}

// TestAudit5MeterNoveltyRefresh: "Seen ... marks it now either way"
// (every sighting refreshes the mark) while Contains "only reads": a key
// seen at 0 and again at 0.9T is still seen at 1.8T; a key seen at 0
// and only Contains-checked at 0.9T is gone at 1.1T. Also Contains on a
// key never marked does not mark it.
func TestAudit5MeterNoveltyRefresh(t *testing.T) {
	const T = 10 * time.Second
	n, clk := audit5Novelty(t, T, 5_000, meter.WithSize(4, 1<<12))
	n.SeenAt(clk.Now(), "seen")
	n.SeenAt(clk.Now(), "read")
	if n.ContainsAt(clk.Now(), "never") {
		t.Fatal("a key never marked is contained (no collisions expected)")
	}
	clk.Advance(9 * time.Second)
	if !n.SeenAt(clk.Now(), "seen") || !n.ContainsAt(clk.Now(), "read") {
		t.Fatal("keys marked 0.9T ago not seen")
	}
	if n.SeenAt(clk.Now(), "never") {
		t.Fatal("Contains marked a key: a key only Contains-checked is told seen by Seen")
	}
	clk.Advance(2 * time.Second) // 1.1 T after the first marks
	if n.ContainsAt(clk.Now(), "read") {
		t.Fatal("Contains refreshed the mark: key still seen 1.1T after its only Seen")
	}
	clk.Advance(7 * time.Second) // 1.8 T after the first mark, 0.9 T after the refresh
	if !n.ContainsAt(clk.Now(), "seen") {
		t.Fatal("Seen at 0.9T did not refresh the mark: not seen 0.9T later")
	}
}

// TestAudit5MeterNoveltyFalsePositiveRate: the documented false-positive
// rate "(1 - (1 - 1/M)^n)^L for n keys seen per T in L levels of M
// cells", and its direction and lifetime: "a false positive needs all L
// cells refreshed within T by other keys". n keys are marked at one
// instant; of many never-marked probes, the fraction Contains reports is
// within 5 sigma of the formula (levels hashed independently; a shared
// index across levels would give the L = 1 rate), every marked key is
// seen (no false negatives), and once T has passed without any mark, no
// probe is seen at all.
func TestAudit5MeterNoveltyFalsePositiveRate(t *testing.T) {
	for _, c := range []struct{ L, M, n int }{{3, 256, 256}, {2, 1024, 512}, {4, 128, 200}} {
		t.Run(fmt.Sprintf("L%d_M%d_n%d", c.L, c.M, c.n), func(t *testing.T) {
			const T = time.Minute
			nv, clk := audit5Novelty(t, T, 42_000, meter.WithSize(uint32(c.L), uint32(c.M)))
			for i := range c.n {
				nv.SeenAt(clk.Now(), fmt.Sprintf("marked-%d", i))
			}
			clk.Advance(time.Second)
			for i := range c.n {
				if !nv.ContainsAt(clk.Now(), fmt.Sprintf("marked-%d", i)) {
					t.Fatalf("marked-%d not seen 1 s after its mark (T = 1 min)", i)
				}
			}
			const probes = 20000
			fp := 0
			for i := range probes {
				if nv.ContainsAt(clk.Now(), fmt.Sprintf("probe-%d", i)) {
					fp++
				}
			}
			fill := 1 - math.Pow(1-1/float64(c.M), float64(c.n))
			p := math.Pow(fill, float64(c.L))
			// The noise of the probes' binomial, and of each level's fill
			// (occupancy of M cells by n keys: variance about
			// M e^-a (1 - (1+a) e^-a), a = n/M), through p = fill^L.
			a := float64(c.n) / float64(c.M)
			sdFill := math.Sqrt(float64(c.M)*math.Exp(-a)*(1-(1+a)*math.Exp(-a))) / float64(c.M)
			sdP := float64(c.L) * math.Pow(fill, float64(c.L-1)) * sdFill / math.Sqrt(float64(c.L))
			sigma := math.Sqrt(p*(1-p)/probes + sdP*sdP)
			got := float64(fp) / probes
			if math.Abs(got-p) > 5*sigma {
				t.Fatalf("false-positive rate %.4f, the documented formula gives %.4f (sigma %.4f)", got, p, sigma)
			}
			clk.Advance(T + time.Second) // every mark older than T
			for i := range probes {
				if nv.ContainsAt(clk.Now(), fmt.Sprintf("probe-%d", i)) {
					t.Fatalf("probe-%d seen after every mark is older than T: a false positive with no cell refreshed within T", i)
				}
			}
		})
	}
}

// TestAudit5MeterInflightNeverPastMax: "a collision can refuse a key
// early but never admit it past max", exactly under contention. 8
// goroutines per key race TryAcquire(key, max) on cells every key shares
// (1 x 1 and 2 x 2 sketches) and on roomy ones, holding each guard a
// little and releasing it; a per-key counter incremented after an
// admission and decremented before its Release never exceeds max (it is
// at most the key's guards outstanding). With roomy cells, at least one
// admission per key happens; at the end every key's Count is 0.
func TestAudit5MeterInflightNeverPastMax(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 8} {
		for _, size := range [][2]uint32{{1, 1}, {2, 2}, {4, 1 << 10}} {
			t.Run(fmt.Sprintf("procs%d_L%d_M%d", procs, size[0], size[1]), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				in, err := meter.NewInflight(16, meter.WithSize(size[0], size[1]), meter.WithSeed(3))
				if err != nil {
					t.Fatal(err)
				}
				keys := []string{"a", "b", "c", "d"}
				maxOf := map[string]int{"a": 1, "b": 2, "c": 3, "d": 5}
				var held [4]atomic.Int64
				var admitted [4]atomic.Int64
				var over atomic.Value
				var wg sync.WaitGroup
				for ki, k := range keys {
					for g := range 8 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := range 300 {
								gd := in.TryAcquire(k, maxOf[k])
								if gd == nil {
									runtime.Gosched()
									continue
								}
								admitted[ki].Add(1)
								if h := held[ki].Add(1); h > int64(maxOf[k]) {
									over.Store(fmt.Sprintf("key %q holds %d > max %d", k, h, maxOf[k]))
								}
								if (i+g)%3 == 0 {
									runtime.Gosched()
								}
								held[ki].Add(-1)
								gd.Release()
								gd.Release() // idempotent
							}
						}()
					}
				}
				wg.Wait()
				if v := over.Load(); v != nil {
					t.Fatal(v)
				}
				for ki, k := range keys {
					if c := in.Count(k); c != 0 {
						t.Errorf("key %q: Count %d after every guard was released", k, c)
					}
					if size[1] > 2 && admitted[ki].Load() == 0 {
						t.Errorf("key %q: nothing admitted with roomy cells", k)
					}
				}
			})
		}
	}
}

// TestAudit5MeterInflightCountUpperBound: "Count is an upper bound on the
// key's true in-flight count" and "the counts are exact integers through
// collisions": with every key sharing one cell, each key's Count is the
// total in flight over all keys (never below its own), TryAcquire
// refuses early (the total, not the key's own count, is compared to
// max) and admits again as soon as the others release.
func TestAudit5MeterInflightCountUpperBound(t *testing.T) {
	in, err := meter.NewInflight(100, meter.WithSize(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	var gs []*meter.Guard
	for range 7 {
		gs = append(gs, in.Acquire("x"))
	}
	if c := in.Count("y"); c != 7 {
		t.Fatalf("colliding key's Count %d, want 7 (the shared cell)", c)
	}
	if g := in.TryAcquire("y", 7); g != nil {
		t.Fatal("TryAcquire(y, 7) admitted with 7 in the shared cell: the cell's count is past max")
	}
	g := in.TryAcquire("y", 8)
	if g == nil {
		t.Fatal("TryAcquire(y, 8) refused with 7 in the cell")
	}
	if c := in.Count("x"); c != 8 {
		t.Fatalf("Count(x) %d, want 8", c)
	}
	for _, h := range gs {
		h.Release()
	}
	if c := in.Count("x"); c != 1 {
		t.Fatalf("Count(x) %d after x's releases, want 1 (y's guard)", c)
	}
	g.Release()
	if c1, c2 := in.Count("x"), in.Count("y"); c1 != 0 || c2 != 0 {
		t.Fatalf("counts %d, %d after every release", c1, c2)
	}
	var zero meter.Guard
	zero.Release()
	var nilG *meter.Guard
	nilG.Release()
	if c := in.Count("x"); c != 0 {
		t.Fatalf("a zero or nil Guard's Release changed the count: %d", c)
	}
}

// TestAudit5MeterRateTransient: "For a constant rate rho since time s
// ago it reads rho x (1 - exp(-s/window)): a startup transient that is
// 63% after one window, 95% after three". Events at a steady 1000/s (one
// per ms, via ObserveAt), window 2 s: at s = window, 3 windows and 20
// windows (past a rotation at 16) the reading is within 0.5% of the
// formula and, the sketch erring only upward (but for the exp(-16)
// rotation term), not below the exact discrete sum.
func TestAudit5MeterRateTransient(t *testing.T) {
	const window = 2 * time.Second
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	const rho = 1000.0
	w := window.Seconds()
	exact := 0.0 // the discrete decayed count, updated per ms
	decay1 := math.Exp(-0.001 / w)
	checks := map[int]bool{2000: true, 6000: true, 40000: true}
	for ms := 1; ms <= 40000; ms++ {
		r.ObserveAt(clk.Now(), "k", 1)
		exact += 1
		clk.Advance(time.Millisecond)
		exact *= decay1
		if checks[ms] {
			s := float64(ms) / 1000
			got := r.PerSecondAt(clk.Now(), "k")
			formula := rho * (1 - math.Exp(-s/w))
			if math.Abs(got-formula) > 0.005*formula {
				t.Fatalf("after %v s: %v events/s, formula rho(1-exp(-s/window)) = %v", s, got, formula)
			}
			if low := exact / w * (1 - math.Exp(-16)) * (1 - 1e-6); got < low {
				t.Fatalf("after %v s: %v below the exact decayed count's %v", s, got, exact/w)
			}
		}
	}
}

// TestAudit5MeterBadConfig: bad windows, maxLimits and options are
// *sketch.ConfigError values matching sketch.ErrInvalidConfig, with a
// message that starts "meter: "; nothing panics.
func TestAudit5MeterBadConfig(t *testing.T) {
	cases := map[string]func() error{
		"NewRate(999us)":            func() error { _, err := meter.NewRate(999 * time.Microsecond); return err },
		"NewRate(-1s)":              func() error { _, err := meter.NewRate(-time.Second); return err },
		"NewNovelty(0)":             func() error { _, err := meter.NewNovelty(0); return err },
		"NewNovelty(999us)":         func() error { _, err := meter.NewNovelty(999 * time.Microsecond); return err },
		"NewInflight(2^24+1)":       func() error { _, err := meter.NewInflight(1<<24 + 1); return err },
		"NewInflight(MinInt)":       func() error { _, err := meter.NewInflight(math.MinInt); return err },
		"Rate nil Option":           func() error { _, err := meter.NewRate(time.Second, nil); return err },
		"Novelty nil Option":        func() error { _, err := meter.NewNovelty(time.Second, nil); return err },
		"Inflight nil Option":       func() error { _, err := meter.NewInflight(1, nil); return err },
		"Rate PeriodWindows 0.5":    func() error { _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(0.5)); return err },
		"Rate PeriodWindows 0":      func() error { _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(0)); return err },
		"Rate PeriodWindows -1":     func() error { _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(-1)); return err },
		"Novelty PeriodWindows NaN": func() error { _, err := meter.NewNovelty(time.Second, meter.WithPeriodWindows(math.NaN())); return err },
		"Novelty PeriodWindows 0.99": func() error {
			_, err := meter.NewNovelty(time.Second, meter.WithPeriodWindows(0.99))
			return err
		},
		"Rate MaxBytes below size": func() error {
			_, err := meter.NewRate(time.Second, meter.WithSize(4, 1<<16), meter.WithMaxBytes(1<<10))
			return err
		},
		"Inflight MaxBytes -1": func() error { _, err := meter.NewInflight(1, meter.WithMaxBytes(-1)); return err },
	}
	for name, f := range cases {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			err = f()
		}()
		var ce *sketch.ConfigError
		if err == nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("%s: want a *sketch.ConfigError prefixed \"meter: \"; got %v", name, err)
		}
	}
}

// TestAudit5MeterZeroValues: the zero Rate, Inflight and Novelty panic
// with "meter: zero X; use NewX" rather than dereference nil.
func TestAudit5MeterZeroValues(t *testing.T) {
	var r meter.Rate
	var in meter.Inflight
	var nv meter.Novelty
	cases := map[string]struct {
		f    func()
		want string
	}{
		"Rate.Observe":        {func() { r.Observe("k") }, "meter: zero Rate; use NewRate"},
		"Rate.PerSecondAt":    {func() { r.PerSecondAt(time.Now(), "k") }, "meter: zero Rate; use NewRate"},
		"Inflight.Acquire":    {func() { in.Acquire("k") }, "meter: zero Inflight; use NewInflight"},
		"Inflight.TryAcquire": {func() { in.TryAcquire("k", 1) }, "meter: zero Inflight; use NewInflight"},
		"Inflight.Count":      {func() { in.Count("k") }, "meter: zero Inflight; use NewInflight"},
		"Novelty.Seen":        {func() { nv.Seen("k") }, "meter: zero Novelty; use NewNovelty"},
		"Novelty.ContainsAt":  {func() { nv.ContainsAt(time.Now(), "k") }, "meter: zero Novelty; use NewNovelty"},
		"Novelty.SeenAt":      {func() { nv.SeenAt(time.Now(), "k") }, "meter: zero Novelty; use NewNovelty"},
		"Novelty.Contains":    {func() { nv.Contains("k") }, "meter: zero Novelty; use NewNovelty"},
		"Rate.PerSecond":      {func() { r.PerSecond("k") }, "meter: zero Rate; use NewRate"},
		"Rate.ObserveAt(1)":   {func() { r.ObserveAt(time.Now(), "k", 1) }, "meter: zero Rate; use NewRate"},
	}
	for name, c := range cases {
		func() {
			defer func() {
				p := recover()
				s := fmt.Sprint(p)
				if p == nil || !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", name, p, c.want)
				}
			}()
			c.f()
		}()
	}
}

// TestAudit5MeterNoveltyRaceManyKeys: "of N goroutines racing Seen on a
// key not seen within T, exactly one is told it is new" (no rotation
// here: T = 1 h on a frozen clock). 8 goroutines call Seen on the same
// 300 keys in the same order: with roomy cells each key is told new
// exactly once; with colliding cells (1 x 64) a key may be told seen by
// everyone (a false positive, the documented direction) but never new
// twice. At GOMAXPROCS 2 and 8.
func TestAudit5MeterNoveltyRaceManyKeys(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 8} {
		for _, size := range [][2]uint32{{4, 1 << 12}, {1, 64}} {
			t.Run(fmt.Sprintf("procs%d_L%d_M%d", procs, size[0], size[1]), func(t *testing.T) {
				runtime.GOMAXPROCS(procs)
				nv, _ := audit5Novelty(t, time.Hour, 1_000, meter.WithSize(size[0], size[1]))
				const keys = 300
				var fresh [keys]atomic.Int32
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for k := range keys {
							if !nv.Seen(fmt.Sprintf("key-%d", k)) {
								fresh[k].Add(1)
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				for k := range keys {
					n := fresh[k].Load()
					if n > 1 || (size[1] > 64 && n != 1) {
						t.Fatalf("key-%d told new %d times by 8 racing Seen calls", k, n)
					}
				}
			})
		}
	}
}

// TestAudit5MeterInflightSharedCellExact: "every decision is
// TryUpdate's limit, aggregate + 1 <= max", exact under contention. With
// one cell shared by every key (1 x 1), 8 goroutines racing
// TryAcquire(key_g, 50) on 8 distinct keys without releasing get exactly
// 50 guards in all (the cell's aggregate), and Count reads 50 for every
// key, even one never acquired.
func TestAudit5MeterInflightSharedCellExact(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 8} {
		runtime.GOMAXPROCS(procs)
		in, err := meter.NewInflight(50, meter.WithSize(1, 1))
		if err != nil {
			t.Fatal(err)
		}
		var got atomic.Int64
		var wg sync.WaitGroup
		var guards [8][]*meter.Guard
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 40 {
					if gd := in.TryAcquire(fmt.Sprintf("k%d", g), 50); gd != nil {
						got.Add(1)
						guards[g] = append(guards[g], gd)
					}
				}
			}()
		}
		wg.Wait()
		if got.Load() != 50 || in.Count("k0") != 50 || in.Count("never") != 50 {
			t.Fatalf("procs %d: %d guards in all, Count %d / %d; want 50", procs, got.Load(), in.Count("k0"), in.Count("never"))
		}
		for _, gs := range guards {
			for _, gd := range gs {
				gd.Release()
			}
		}
		if c := in.Count("never"); c != 0 {
			t.Fatalf("procs %d: Count %d after every release", procs, c)
		}
	}
}

// TestAudit5MeterRateRotationTerm: Rate "only errs upward ... except the
// rotation term: a generation becomes the primary after it has counted
// for (Generations-1) x Period", and WithPeriodWindows(k) sets that
// Period to k windows. So at any moment the estimate is at least the
// decayed count of the events younger than one Period (Generations is
// 2 here: the default), whatever the traffic's shape, and with roomy
// cells at most the whole decayed count (plus float32 rounding). Random
// bursts and idle gaps (some longer than a Period) on a fake clock, for
// k = 1, 1.5 and 3.
func TestAudit5MeterRateRotationTerm(t *testing.T) {
	for _, k := range []float64{1, 1.5, 3} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			const window = 100 * time.Millisecond
			clk := sketchtest.NewFakeClock()
			clk.Set(77_777)
			r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithPeriodWindows(k), meter.WithSeed(9), meter.WithSize(4, 1<<10))
			if err != nil {
				t.Fatal(err)
			}
			period := int64(math.Ceil(k * float64(window.Milliseconds())))
			type ev struct {
				at int64
				n  float64
			}
			var evs []ev
			rng := uint64(99)
			next := func(n int) int { rng = rng*6364136223846793005 + 1442695040888963407; return int(rng>>33) % n }
			for i := range 3000 {
				switch next(10) {
				case 0:
					clk.Advance(time.Duration(next(int(3*period))) * time.Millisecond)
				default:
					clk.Advance(time.Duration(next(7)) * time.Millisecond)
				}
				now := clk.NowMillis()
				for len(evs) > 0 && now-evs[0].at > 60*window.Milliseconds() {
					evs = evs[1:] // below exp(-60) of itself: negligible
				}
				if next(3) > 0 {
					n := float64(1 + next(5))
					r.ObserveAt(clk.Now(), "k", n)
					evs = append(evs, ev{now, n})
				}
				got := r.PerSecondAt(clk.Now(), "k") * window.Seconds()
				var young, all float64
				for _, e := range evs {
					age := now - e.at
					c := e.n * math.Exp(-float64(age)/float64(window.Milliseconds()))
					all += c
					if age < period {
						young += c
					}
				}
				if got < young*(1-1e-5) {
					t.Fatalf("op %d (k=%v): count %v below the events of the last Period %v (all: %v)", i, k, got, young, all)
				}
				if got > all*(1+1e-4)+1e-6 {
					t.Fatalf("op %d (k=%v): count %v above every event's decayed count %v (no collisions)", i, k, got, all)
				}
			}
		})
	}
}
