package rotator_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const period = time.Second

// small is a sketch config that keeps generations cheap (L=4, M=1024), for
// tests that rotate many times under -race.
func small(clk sketch.Clock) sketch.Config {
	return sketch.Config{CellsPerLevel: 1024, Hi: 1e9, Clock: clk}
}

func newRotator(t testing.TB, cfg rotator.Config) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(cfg)
	if err != nil {
		t.Fatalf("rotator.New(%+v): %v", cfg, err)
	}
	t.Cleanup(r.Close)
	return r
}

// withProcs runs f under each GOMAXPROCS value and restores the original.
func withProcs(t *testing.T, f func(t *testing.T)) {
	for _, p := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			f(t)
		})
	}
}

func TestNewValidates(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	for _, tc := range []struct {
		cfg  rotator.Config
		want string
	}{
		{rotator.Config{Sketch: small(clk), Generations: 1, Period: period}, "rotator: Generations must be >= 2; got 1"},
		{rotator.Config{Sketch: small(clk), Generations: 1025, Period: period}, "rotator: Generations must be <= 1024; got 1025"},
		{rotator.Config{Sketch: small(clk), Generations: 1 << 31, Period: period}, "rotator: Generations must be <= 1024; got 2147483648"},
		{rotator.Config{Sketch: small(clk)}, "rotator: Period must be > 0; got 0s"},
		{rotator.Config{Sketch: small(clk), Period: -time.Second}, "rotator: Period must be > 0; got -1s"},
		{rotator.Config{Sketch: small(clk), Period: 500 * time.Microsecond}, "rotator: Period must be at least 1ms"},
		{rotator.Config{Sketch: sketch.Config{Lo: 1, Hi: 2}, Period: period}, "sketch: Lo must be <= 0; got 1"},
		{rotator.Config{Sketch: sketch.Config{Hi: 1, Levels: 9}, Period: period}, "sketch: Levels must be <= 8; got 9"},
	} {
		r, err := rotator.New(tc.cfg)
		var ce *sketch.ConfigError
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) {
			t.Errorf("rotator.New(%+v) = %v, %v; want a *sketch.ConfigError %q matching ErrInvalidConfig", tc.cfg, r, err, tc.want)
		}
	}
	r := newRotator(t, rotator.Config{Sketch: small(clk), Period: period})
	cfg := r.Config()
	if cfg.Generations != core.DefaultGenerations || cfg.Sketch.Levels != sketch.DefaultLevels || cfg.Sketch.Decay == nil || cfg.Sketch.Clock != clk {
		t.Errorf("Config() = %+v; want defaults filled in and the clock kept", cfg)
	}
}

// TestSeedsDistinct: every generation ever built hashes under its own seed,
// the splitmix64 stream of the base seed.
func TestSeedsDistinct(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := small(clk)
	cfg.Seed = 42
	r := newRotator(t, rotator.Config{Sketch: cfg, Generations: 3, Period: period})
	seen := map[uint64]bool{}
	for round := range 11 {
		if round > 0 {
			clk.Advance(period)
			r.Query(nil)
		}
		for i, s := range core.RotatorOf(r).Current().Gens {
			seen[s.Config().Seed] = true
			if s.Config().Seed == cfg.Seed {
				t.Fatalf("generation %d uses the base seed", i)
			}
		}
	}
	// 3 initial generations + one per rotation.
	if len(seen) != 3+10 {
		t.Fatalf("saw %d distinct seeds; want 13", len(seen))
	}
	if core.GenerationSeed(42, 0) != 0xbdd732262feb6e95 { // first splitmix64 output for seed 42
		t.Fatalf("core.GenerationSeed(42, 0) = %#x", core.GenerationSeed(42, 0))
	}
}

// TestReadsPrimaryWritesAll: Query reads gens[0]; writes reach every
// generation; a fresh generation starts at 0.
func TestReadsPrimaryWritesAll(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r := newRotator(t, rotator.Config{Sketch: small(clk), Generations: 3, Period: period})
	k := []byte("k")
	r.Update(k, 5)
	gs := core.RotatorOf(r).Current()
	for i, s := range gs.Gens {
		if got := s.QueryAt(clk.Now(), k); got != 5 {
			t.Fatalf("generation %d holds %v; want 5", i, got)
		}
	}
	clk.Advance(period)
	if got := r.Query(k); got != 5 {
		t.Fatalf("after one rotation Query = %v; want 5 (the second generation)", got)
	}
	gs = core.RotatorOf(r).Current()
	if got := gs.Gens[2].QueryAt(clk.Now(), k); got != 0 {
		t.Fatalf("fresh generation holds %v; want 0", got)
	}
	if got := r.UpdateAndQuery(k, 1); got != 6 {
		t.Fatalf("UpdateAndQuery = %v; want 6", got)
	}
	if got := gs.Gens[2].QueryAt(clk.Now(), k); got != 1 {
		t.Fatalf("fresh generation holds %v after a write; want 1", got)
	}
	if d := r.QueryDetailed(k); d.Score != 6 || len(d.Levels) != 4 {
		t.Fatalf("QueryDetailed = %+v; want score 6 over 4 levels", d)
	}
}

// TestWarmStart: a key written every tick keeps its score across
// rotations, because the new primary has been receiving writes for a whole
// period.
func TestWarmStart(t *testing.T) {
	const tick = 10 * time.Millisecond
	t.Run("decay=exponential", func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		cfg := small(clk)
		cfg.Decay = decay.Exponential(10) // time constant 100 ms << Period
		r := newRotator(t, rotator.Config{Sketch: cfg, Period: period})
		// Steady state of +1 every tick, decaying by f per tick.
		f := math.Exp(-10 * tick.Seconds())
		steady := 1 / (1 - f)
		for i := range 5 * int(period/tick) {
			clk.Advance(tick)
			got := r.UpdateAndQueryString("k", 1)
			if i >= int(period/tick) && math.Abs(got-steady) > 0.01*steady {
				t.Fatalf("tick %d (t=%v, %d promotions): score %v; want %v ±1%%", i, time.Duration(clk.NowMillis())*time.Millisecond, r.Stats().Promotions, got, steady)
			}
		}
		if p := r.Stats().Promotions; p != 5 {
			t.Fatalf("Promotions = %d; want 5", p)
		}
	})
	t.Run("decay=none", func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		r := newRotator(t, rotator.Config{Sketch: small(clk), Period: period})
		perPeriod := float64(period / tick)
		for i := range 5 * int(period/tick) {
			clk.Advance(tick)
			r.UpdateString("k", 1)
			// The primary always holds at least one whole period of writes.
			if got := r.QueryString("k"); i >= int(period/tick) && got < perPeriod {
				t.Fatalf("tick %d: score %v; want >= %v", i, got, perPeriod)
			}
		}
	})
}

// TestForgetting: a key written once is gone after Generations x Period
// (and so after Generations + 1 periods), and not before.
func TestForgetting(t *testing.T) {
	for _, n := range []uint32{2, 3, 5} {
		t.Run(fmt.Sprintf("gens=%d", n), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			r := newRotator(t, rotator.Config{Sketch: small(clk), Generations: n, Period: period})
			r.UpdateString("once", 7)
			clk.Set(int64(n)*period.Milliseconds() - 1)
			if got := r.QueryString("once"); got != 7 {
				t.Fatalf("just before %d periods: %v; want 7", n, got)
			}
			clk.Set(int64(n) * period.Milliseconds())
			if got := r.QueryString("once"); got != 0 {
				t.Fatalf("after %d periods: %v; want 0", n, got)
			}
			clk.Set(int64(n+1) * period.Milliseconds())
			if got := r.QueryString("once"); got != 0 {
				t.Fatalf("after %d periods: %v; want 0", n+1, got)
			}
			for i, s := range core.RotatorOf(r).Current().Gens {
				if got := s.QueryStringAt(clk.Now(), "once"); got != 0 {
					t.Fatalf("generation %d still holds %v", i, got)
				}
			}
		})
	}
}

// TestOnePromotionPerPeriod: in every round 8 goroutines hammer the
// rotator while the clock crosses the next deadline under them; each
// crossing is promoted exactly once.
func TestOnePromotionPerPeriod(t *testing.T) {
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	withProcs(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		r := newRotator(t, rotator.Config{Sketch: small(clk), Period: period})
		for round := 1; round <= rounds; round++ {
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					key := []byte{byte(g), 0}
					for i := range 100 {
						key[1] = byte(i)
						switch i % 4 {
						case 0:
							r.Update(key, 1)
						case 1:
							r.Query(key)
						case 2:
							r.TryUpdate(key, 1, 1e6)
						default:
							r.UpdateAndQueryString("hot", 1)
						}
					}
				})
			}
			clk.Advance(period) // while they run
			wg.Wait()
			r.QueryString("hot") // in case every op ran before the advance
			if p := r.Stats().Promotions; p != uint64(round) {
				t.Fatalf("round %d: %d promotions", round, p)
			}
		}
		st := r.Stats()
		if st.Promotions != uint64(rounds) || st.Periods != uint64(rounds) || st.Allocated != uint64(2+rounds) {
			t.Fatalf("Stats = %+v; want %d promotions and periods, %d sketches", st, rounds, 2+rounds)
		}
	})
}

// TestMemoryBounded: 1,000 rotations of full-size generations (L=4,
// M=100k: 3.2 MB each) keep the heap bounded: every generation is
// allocated fresh (N + rotations sketches in all) and the retired ones are
// collected.
func TestMemoryBounded(t *testing.T) {
	rotations := 1000
	if testing.Short() {
		rotations = 100
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	clk := sketchtest.NewFakeClock()
	const n = 2
	r := newRotator(t, rotator.Config{Sketch: sketch.Config{Hi: 1e9, Clock: clk}, Generations: n, Period: period})
	gen := r.Sizes().Cells / n
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	for i := range rotations {
		clk.Advance(period)
		r.UpdateString("k", 1)
		if i%10 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		if i%100 == 99 {
			// Bounded, not merely collectable in the end: at every
			// checkpoint a collection brings the heap back to the live
			// generations. (The peak between collections depends on the
			// pacer and on how far a loop that only rotates outruns the
			// concurrent mark, 10 to 50 generations' worth under -race;
			// it is logged, not asserted.)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if limit := base + uint64(gen); ms.HeapAlloc > limit {
				t.Fatalf("after %d rotations and a GC, HeapAlloc %d MB; want <= %d MB", i+1, ms.HeapAlloc>>20, limit>>20)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	// After a collection only the N live generations (and at most one
	// retired one held by an operation in flight) remain.
	if limit := base + uint64(gen); ms.HeapAlloc > limit {
		t.Errorf("HeapAlloc after GC %d MB; want <= %d MB", ms.HeapAlloc>>20, limit>>20)
	}
	st := r.Stats()
	if st.Allocated != uint64(n+rotations) || st.Promotions != uint64(rotations) {
		t.Errorf("Stats = %+v; want %d sketches allocated, %d promotions", st, n+rotations, rotations)
	}
	if got := r.Sizes().Cells; got != n*gen {
		t.Errorf("Sizes().Cells = %d; want %d", got, n*gen)
	}
	t.Logf("baseline %.1f MB, peak %.1f MB, after GC %.1f MB, generation %.2f MB",
		float64(base)/(1<<20), float64(peak)/(1<<20), float64(ms.HeapAlloc)/(1<<20), float64(gen)/(1<<20))
}

// TestNoGoroutines: New, operations with rotations and Close start no
// goroutine.
func TestNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	before := runtime.NumGoroutine()
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: small(clk), Period: period})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		r.UpdateString("k", 1)
		clk.Advance(period)
	}
	// More goroutines after than before would be ours (fewer: an
	// earlier test's goroutine finished exiting meanwhile).
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("NumGoroutine %d -> %d", before, after)
	}
	r.Close()
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("NumGoroutine %d -> %d after Close", before, after)
	}
}

// TestForwardJump: a jump of 1e6 periods is one promotion, costs no loop
// over the periods, and leaves every generation empty.
func TestForwardJump(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	const n = 3
	r := newRotator(t, rotator.Config{Sketch: small(clk), Generations: n, Period: period})
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		r.UpdateString(k, 1)
	}
	clk.Advance(1_000_000*period + period/2)
	start := time.Now()
	got := r.QueryString("a")
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("jump of 1e6 periods took %v", d)
	}
	if got != 0 {
		t.Errorf("Query after the jump = %v; want 0", got)
	}
	for i, s := range core.RotatorOf(r).Current().Gens {
		for _, k := range keys {
			if v := s.QueryStringAt(clk.Now(), k); v != 0 {
				t.Errorf("generation %d holds %v for %q", i, v, k)
			}
		}
	}
	st := r.Stats()
	if st.Promotions != 1 || st.Periods != 1_000_000 || st.Allocated != 2*n {
		t.Errorf("Stats = %+v; want 1 promotion, 1e6 periods, %d sketches", st, 2*n)
	}
	// The deadline stays on the grid: the next rotation is due at the
	// next whole period.
	if d := core.RotatorOf(r).Current().Deadline; d != 1_000_001*period.Milliseconds() {
		t.Errorf("deadline %d; want %d", d, 1_000_001*period.Milliseconds())
	}
}

// TestPartialJump: a jump of k < N periods retires exactly the k oldest
// generations and keeps the others in order.
func TestPartialJump(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r := newRotator(t, rotator.Config{Sketch: small(clk), Generations: 4, Period: period})
	old := core.RotatorOf(r).Current().Gens
	clk.Advance(2*period + 10*time.Millisecond)
	r.QueryString("x")
	gs := core.RotatorOf(r).Current()
	if gs.Gens[0] != old[2] || gs.Gens[1] != old[3] || gs.Gens[2] == old[0] || gs.Gens[3] == old[1] {
		t.Fatalf("after a 2-period jump the set is not old[2], old[3], fresh, fresh")
	}
	if st := r.Stats(); st.Promotions != 1 || st.Periods != 2 || st.Allocated != 6 {
		t.Fatalf("Stats = %+v; want 1 promotion, 2 periods, 6 sketches", st)
	}
	if gs.Deadline != 3*period.Milliseconds() {
		t.Fatalf("deadline %d; want %d", gs.Deadline, 3*period.Milliseconds())
	}
}

// TestBackwardStep: a clock that steps back rotates nothing and grows
// nothing; rotation resumes when the clock reaches the deadline again.
func TestBackwardStep(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	cfg := small(clk)
	cfg.Decay = decay.Linear(1)
	r := newRotator(t, rotator.Config{Sketch: cfg, Period: period})
	clk.Set(500)
	r.UpdateString("k", 10)
	clk.Set(-100 * period.Milliseconds())
	for range 10 {
		if got := r.QueryString("k"); got != 10 {
			t.Fatalf("Query after a backwards step = %v; want 10", got)
		}
		r.UpdateString("j", 1)
	}
	if p := r.Stats().Promotions; p != 0 {
		t.Fatalf("%d promotions after a backwards step; want 0", p)
	}
	clk.Set(period.Milliseconds())
	r.QueryString("k")
	if p := r.Stats().Promotions; p != 1 {
		t.Fatalf("%d promotions at the deadline; want 1", p)
	}
}

// TestDeadlineSaturates: a clock near the end of int64 neither overflows
// the deadline nor rotates on every operation.
func TestDeadlineSaturates(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r := newRotator(t, rotator.Config{Sketch: small(clk), Period: period})
	clk.Set(math.MaxInt64 - 10)
	r.QueryString("k")
	r.QueryString("k")
	if st := r.Stats(); st.Promotions != 1 || core.RotatorOf(r).Current().Deadline != math.MaxInt64 {
		t.Fatalf("Stats = %+v, deadline %d; want 1 promotion, deadline MaxInt64", st, core.RotatorOf(r).Current().Deadline)
	}
}

func TestCloseIdempotent(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r := newRotator(t, rotator.Config{Sketch: small(clk), Period: period})
	r.Close()
	r.Close()
	r.UpdateString("k", 2)
	clk.Advance(period)
	if got := r.QueryString("k"); got != 2 {
		t.Fatalf("Query after Close = %v; want 2", got)
	}
}

// countingClock counts reads.
type countingClock struct {
	sketchtest.FakeClock
	n atomic.Int64
}

func (c *countingClock) NowMillis() int64 { c.n.Add(1); return c.FakeClock.NowMillis() }

// TestClockReadOnce: every operation reads the clock once, whatever N is.
func TestClockReadOnce(t *testing.T) {
	clk := &countingClock{}
	r := newRotator(t, rotator.Config{Sketch: small(clk), Generations: 4, Period: period})
	k := []byte("k")
	ops := []func(){
		func() { r.Update(k, 1) }, func() { r.UpdateString("k", 1) },
		func() { r.Query(k) }, func() { r.QueryString("k") },
		func() { r.UpdateAndQuery(k, 1) }, func() { r.UpdateAndQueryString("k", 1) },
		func() { r.TryUpdate(k, 1, 1e6) }, func() { r.TryUpdateString("k", 1, 1e6) },
		func() { r.QueryDetailed(k) },
	}
	for i, op := range ops {
		before := clk.n.Load()
		op()
		if got := clk.n.Load() - before; got != 1 {
			t.Errorf("op %d read the clock %d times; want 1", i, got)
		}
	}
}

// TestDefaultClock: with a nil Clock the rotator reads the sketch default
// (monotonic) clock through the primary.
func TestDefaultClock(t *testing.T) {
	r := newRotator(t, rotator.Config{Sketch: sketch.Config{CellsPerLevel: 1024, Hi: 1e9}, Period: time.Hour})
	r.UpdateString("k", 3)
	if got := r.QueryString("k"); got != 3 {
		t.Fatalf("Query = %v; want 3", got)
	}
	if r.Config().Sketch.Clock != nil {
		t.Fatalf("Config().Sketch.Clock = %v; want nil", r.Config().Sketch.Clock)
	}
	gs := core.RotatorOf(r).Current()
	if now := gs.Gens[0].NowMillis(); gs.Deadline-now > time.Hour.Milliseconds() || gs.Deadline <= now {
		t.Fatalf("deadline %d not within one period of now %d", gs.Deadline, now)
	}
}

func TestSizes(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r := newRotator(t, rotator.Config{Sketch: small(clk), Generations: 3, Period: period})
	one := core.RotatorOf(r).Current().Gens[0].Sizes()
	sz := r.Sizes()
	if sz.Cells != 3*one.Cells || sz.Total < 3*one.Total || sz.Total > 3*one.Total+1024 {
		t.Fatalf("Sizes = %+v; want 3 x %+v plus a small overhead", sz, one)
	}
}
