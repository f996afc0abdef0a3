package meter_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit58InflightConservedConcurrent: goroutines Acquire,
// TryAcquire and Release (twice, from two goroutines at once, for some
// guards) on 2 x 16 cells, so every key collides; a capped key never has
// more than its max guards held at once; after every Release each Count
// is 0 (doc: "every +1 is matched by its -1"; Release "only the first
// call does anything"). At GOMAXPROCS 1, 2, 4, 8.
func TestAudit58InflightConservedConcurrent(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		in, err := meter.NewInflight(0, meter.WithSize(2, 16), meter.WithSeed(58))
		if err != nil {
			t.Fatal(err)
		}
		const workers, ops, keys, capMax = 6, 1500, 40, 3
		var held atomic.Int64 // guards of "cap" held
		var over atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(w)))
				var mine []*meter.Guard
				var capG []*meter.Guard
				for i := 0; i < ops; i++ {
					switch x := rng.Intn(10); {
					case x < 3:
						mine = append(mine, in.Acquire(fmt.Sprint("k", rng.Intn(keys))))
					case x < 6:
						if g := in.TryAcquire(fmt.Sprint("k", rng.Intn(keys)), 1+rng.Intn(50)); g != nil {
							mine = append(mine, g)
						}
					case x < 7:
						if g := in.TryAcquire("cap", capMax); g != nil {
							if n := held.Add(1); n > capMax {
								over.Store(n)
							}
							capG = append(capG, g)
						}
					case x < 8:
						if len(capG) > 0 {
							g := capG[len(capG)-1]
							capG = capG[:len(capG)-1]
							held.Add(-1)
							g.Release()
						}
					default:
						if len(mine) > 0 {
							j := rng.Intn(len(mine))
							g := mine[j]
							mine[j] = mine[len(mine)-1]
							mine = mine[:len(mine)-1]
							var rw sync.WaitGroup
							rw.Add(2)
							go func() { defer rw.Done(); g.Release() }()
							go func() { defer rw.Done(); g.Release() }()
							rw.Wait()
						}
					}
				}
				for _, g := range mine {
					g.Release()
					g.Release()
				}
				for _, g := range capG {
					held.Add(-1)
					g.Release()
				}
			}(w)
		}
		wg.Wait()
		if n := over.Load(); n != 0 {
			t.Errorf("TryAcquire(\"cap\", %d) had %d guards held at once", capMax, n)
		}
		for k := 0; k < keys; k++ {
			if c := in.Count(fmt.Sprint("k", k)); c != 0 {
				t.Errorf("Count(k%d) = %d after every Release, want 0", k, c)
			}
		}
		if c := in.Count("cap"); c != 0 {
			t.Errorf("Count(cap) = %d after every Release, want 0", c)
		}
	})
}

// TestAudit58NoveltyExactlyOneAtDeadlines: racers call Seen on a fresh
// key at the very millisecond of a rotation deadline (they race the
// promotion too); exactly one is told new, every round, and the key is
// then seen for the rest of T (PeriodWindows 1 and 16).
func TestAudit58NoveltyExactlyOneAtDeadlines(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, p := range []float64{1, 16} {
			c := sketchtest.NewFakeClock()
			const t0 = 1_700_000_000_000
			c.Set(t0)
			n, err := meter.NewNovelty(10*time.Millisecond, meter.WithSize(3, 256), meter.WithPeriodWindows(p), meter.WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			period := int64(10 * p)
			for round := int64(1); round <= 40; round++ {
				c.Set(t0 + round*period) // a deadline
				key := fmt.Sprint("r", round)
				var fresh atomic.Int32
				var wg sync.WaitGroup
				for g := 0; g < 6; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if !n.Seen(key) {
							fresh.Add(1)
						}
					}()
				}
				wg.Wait()
				if f := fresh.Load(); f != 1 {
					t.Errorf("PeriodWindows %v, round %d at a deadline: %d of 6 racers told new, want exactly 1", p, round, f)
				}
				for d := int64(1); d < 10; d++ {
					c.Set(t0 + round*period + d)
					if !n.Contains(key) {
						t.Errorf("PeriodWindows %v: %q unseen %d ms after the race (T = 10 ms)", p, key, d)
						break
					}
				}
			}
		}
	})
}

// TestAudit58AtFormsMatchShortForms: two meters with the same seed on
// two fake clocks at the same readings, one driven by the short forms,
// the other by the At forms at the clock's Now: every reading is equal,
// across steps of 0 ms to days, backwards steps included (a step back
// counts as no time, for both).
func TestAudit58AtFormsMatchShortForms(t *testing.T) {
	ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	const t0 = 1_700_000_000_000
	ca.Set(t0)
	cb.Set(t0)
	opts := func(c *sketchtest.FakeClock) []meter.Option {
		return []meter.Option{meter.WithSize(3, 512), meter.WithSeed(9), meter.WithClock(c), meter.WithPeriodWindows(2)}
	}
	ra, _ := meter.NewRate(50*time.Millisecond, opts(ca)...)
	rb, _ := meter.NewRate(50*time.Millisecond, opts(cb)...)
	na, _ := meter.NewNovelty(50*time.Millisecond, opts(ca)...)
	nb, _ := meter.NewNovelty(50*time.Millisecond, opts(cb)...)
	rng := rand.New(rand.NewSource(58))
	now := int64(t0)
	for i := 0; i < 4000; i++ {
		switch x := rng.Intn(100); {
		case x < 80:
			now += rng.Int63n(20)
		case x < 90:
			now -= rng.Int63n(200) // a step back
		case x < 98:
			now += rng.Int63n(300)
		default:
			now += rng.Int63n(5 * 24 * 3600 * 1000)
		}
		ca.Set(now)
		cb.Set(now)
		k := fmt.Sprint("k", rng.Intn(30))
		at := cb.Now()
		switch rng.Intn(4) {
		case 0:
			ra.Observe(k)
			rb.ObserveAt(at, k, 1)
		case 1:
			if a, b := ra.PerSecond(k), rb.PerSecondAt(at, k); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("step %d: PerSecond %v, PerSecondAt(Now) %v", i, a, b)
			}
		case 2:
			if a, b := na.Seen(k), nb.SeenAt(at, k); a != b {
				t.Fatalf("step %d: Seen %v, SeenAt(Now) %v", i, a, b)
			}
		case 3:
			if a, b := na.Contains(k), nb.ContainsAt(at, k); a != b {
				t.Fatalf("step %d: Contains %v, ContainsAt(Now) %v", i, a, b)
			}
		}
	}
}

// TestAudit58ConfigErrorsTyped: every constructor error is a
// *sketch.ConfigError matching ErrInvalidConfig, starting "meter: ",
// with the documented field.
func TestAudit58ConfigErrorsTyped(t *testing.T) {
	cases := []struct {
		name, field string
		f           func() error
	}{
		{"rate window 0", "Window", func() error { _, err := meter.NewRate(0); return err }},
		{"rate window 999us", "Window", func() error { _, err := meter.NewRate(999 * time.Microsecond); return err }},
		{"novelty window -1", "Window", func() error { _, err := meter.NewNovelty(-1); return err }},
		{"periods 0.5", "PeriodWindows", func() error { _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(0.5)); return err }},
		{"periods NaN", "PeriodWindows", func() error {
			_, err := meter.NewNovelty(time.Second, meter.WithPeriodWindows(math.NaN()))
			return err
		}},
		{"periods +Inf", "PeriodWindows", func() error { _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(math.Inf(1))); return err }},
		{"window too long", "Window", func() error { _, err := meter.NewRate(time.Duration(math.MaxInt64)); return err }},
		{"product too long", "PeriodWindows", func() error { _, err := meter.NewRate(time.Duration(1)<<58, meter.WithPeriodWindows(17)); return err }},
		{"nil option", "Option", func() error { _, err := meter.NewRate(time.Second, nil); return err }},
		{"nil option inflight", "Option", func() error { _, err := meter.NewInflight(1, meter.WithSeed(1), nil); return err }},
		{"maxLimit", "MaxLimit", func() error { _, err := meter.NewInflight(1<<24 + 1); return err }},
		{"maxLimit neg", "MaxLimit", func() error { _, err := meter.NewInflight(-1); return err }},
		{"maxbytes", "", func() error {
			_, err := meter.NewNovelty(time.Second, meter.WithSize(4, 1<<20), meter.WithMaxBytes(1<<20))
			return err
		}},
		{"maxbytes negative", "", func() error { _, err := meter.NewInflight(1, meter.WithMaxBytes(-1)); return err }},
	}
	for _, c := range cases {
		err := c.f()
		var ce *sketch.ConfigError
		if err == nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%s: err %v (%T), want a *sketch.ConfigError", c.name, err, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "meter: ") {
			t.Errorf("%s: %q does not start \"meter: \"", c.name, err)
		}
		if c.field != "" && ce.Field != c.field {
			t.Errorf("%s: Field %q, want %q (%v)", c.name, ce.Field, c.field, err)
		}
	}
}

// TestAudit58NoAllocs: Observe, ObserveAt, PerSecond, PerSecondAt, Seen,
// SeenAt, Contains, ContainsAt, TryAcquire refused, Count and Release do
// not allocate (Novelty: "it does not allocate, but for the call that
// builds a new generation"; Rate: "Observe and PerSecond do not
// allocate"); the clock does not move, so no promotion.
func TestAudit58NoAllocs(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(1_700_000_000_000)
	r, _ := meter.NewRate(time.Second, meter.WithSize(2, 64), meter.WithClock(c))
	n, _ := meter.NewNovelty(time.Second, meter.WithSize(2, 64), meter.WithClock(c))
	in, _ := meter.NewInflight(0, meter.WithSize(2, 64))
	g := in.Acquire("x")
	now := c.Now()
	// In order: Release last (a released guard lets TryAcquire admit).
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Observe", func() { r.Observe("k") }},
		{"ObserveAt", func() { r.ObserveAt(now, "k", 3) }},
		{"PerSecond", func() { _ = r.PerSecond("k") }},
		{"PerSecondAt", func() { _ = r.PerSecondAt(now, "k") }},
		{"Seen", func() { _ = n.Seen("k") }},
		{"SeenAt", func() { _ = n.SeenAt(now, "k") }},
		{"Contains", func() { _ = n.Contains("k") }},
		{"ContainsAt", func() { _ = n.ContainsAt(now, "k") }},
		{"TryAcquire refused", func() {
			if in.TryAcquire("x", 1) != nil {
				panic("admitted")
			}
		}},
		{"Count", func() { _ = in.Count("x") }},
		{"Release", func() { g.Release() }},
	} {
		name, f := c.name, c.f
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s allocates %v per call", name, a)
		}
	}
}

// TestAudit58RateOracleErrorBound: one key (no collision), ~2000 events
// per window at random gaps over 60 windows (4 rotations at the default
// Period), checked against an exact float64 decayed counter: never below
// it by more than the rotation term (exp(-16) of the count, rate.go), and
// above it by less than docs/precision.md's bound for a decayed counter,
// (score/delta) x 2^-23 relative, score the largest count reached.
func TestAudit58RateOracleErrorBound(t *testing.T) {
	c := sketchtest.NewFakeClock()
	const t0 = 1_700_000_000_000
	c.Set(t0)
	r, err := meter.NewRate(time.Second, meter.WithSize(2, 1024), meter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(58))
	var truth, cmax float64
	last := int64(t0)
	worstLo, worstHi := 0.0, 0.0
	now := int64(t0)
	for i := 0; i < 120_000; i++ {
		if rng.Intn(2) == 0 {
			now++
		}
		if rng.Intn(5000) == 0 {
			now += rng.Int63n(5000) // a pause of up to 5 windows
		}
		c.Set(now)
		truth = truth*math.Exp(-float64(now-last)/1000) + 1
		last = now
		cmax = max(cmax, truth)
		r.Observe("k")
		if i%97 == 0 {
			got := r.PerSecond("k") // window 1 s: the count itself
			rel := got/truth - 1
			worstLo, worstHi = min(worstLo, rel), max(worstHi, rel)
		}
	}
	if lo := -math.Exp(-16) - 1e-9; worstLo < lo {
		t.Errorf("Rate below the exact counter by %.3g relative (allowed: the rotation term exp(-16) = %.3g)", -worstLo, math.Exp(-16))
	}
	if hi := cmax * math.Pow(2, -23); worstHi > hi {
		t.Errorf("Rate above the exact counter by %.3g relative, above precision.md's bound (score/delta) x 2^-23 = %.3g", worstHi, hi)
	}
	t.Logf("relative error in [%.3g, %.3g]; max count %.0f, bound %.3g", worstLo, worstHi, cmax, cmax*math.Pow(2, -23))
}

// TestAudit58NoveltyClockStepsBack: a mark made before the clock steps
// back (1 s, 1 h, 3 days) stays seen until the clock is T past the mark's
// time again (a step back counts as no time), across the rotation
// deadlines in between; and a key never marked stays new.
func TestAudit58NoveltyClockStepsBack(t *testing.T) {
	for _, back := range []int64{1000, 3_600_000, 3 * 86_400_000} {
		for _, p := range []float64{1, 16} {
			c := sketchtest.NewFakeClock()
			const t0 = 1_700_000_000_000
			c.Set(t0)
			n, err := meter.NewNovelty(100*time.Millisecond, meter.WithSize(3, 1024), meter.WithPeriodWindows(p), meter.WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			c.Set(t0 + 5_000)
			n.Seen("k")
			c.Set(t0 + 5_000 - back)
			for at := t0 + 5_000 - back; at < t0+5_000+99; at += max(1, back/500) {
				c.Set(at)
				if !n.Contains("k") {
					t.Errorf("back %d ms, PeriodWindows %v: k unseen at %d ms relative to its mark, after the clock stepped back", back, p, at-(t0+5_000))
					break
				}
			}
			for at := int64(t0 + 5_000); at < t0+5_000+99; at++ {
				c.Set(at)
				if !n.Contains("k") {
					t.Errorf("back %d ms, PeriodWindows %v: k unseen %d ms after its mark", back, p, at-(t0+5_000))
					break
				}
			}
			if n.Seen("fresh") {
				t.Errorf("back %d: a key never marked was reported seen", back)
			}
		}
	}
}
