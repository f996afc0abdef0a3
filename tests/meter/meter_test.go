package meter_test

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// Rate against the closed form C(t) = sum exp(-(t-t_i)/window): within
// float32 rounding with roomy cells, and never below it with every key
// colliding.
func TestRateModel(t *testing.T) {
	for _, cells := range []uint32{1, 1 << 12} {
		t.Run(fmt.Sprintf("cells=%d", cells), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				window := time.Duration(rapid.IntRange(10, 60_000).Draw(rt, "windowMs")) * time.Millisecond
				clk := sketchtest.NewFakeClock()
				r, err := meter.NewRate(window, meter.WithClock(clk), meter.WithSize(levelsFor(cells), cells),
					meter.WithSeed(rapid.Uint64().Draw(rt, "seed")), meter.WithPrefetch(rapid.Bool().Draw(rt, "prefetch")))
				if err != nil {
					rt.Fatal(err)
				}
				events := map[string][]int64{}
				keys := []string{"a", "b", "c"}
				for range rapid.IntRange(1, 200).Draw(rt, "ops") {
					clk.Advance(time.Duration(rapid.IntRange(0, 500).Draw(rt, "gap")) * time.Millisecond)
					k := rapid.SampledFrom(keys).Draw(rt, "key")
					r.ObserveAt(clk.Now(), k, 1)
					events[k] = append(events[k], clk.NowMillis())
					q := rapid.SampledFrom(keys).Draw(rt, "query")
					var c float64
					for _, ti := range events[q] {
						c += math.Exp(-float64(clk.NowMillis()-ti) / float64(window.Milliseconds()))
					}
					want := c / window.Seconds()
					got := r.PerSecondAt(clk.Now(), q)
					// float32 rounding, plus what rotation forgets: exp(-16)
					// of each event (see Rate).
					tol := 1e-5*want + 1e-6*float64(len(events[q]))/window.Seconds()
					if got < want-tol {
						rt.Fatalf("rate of %q %v below the model %v", q, got, want)
					}
					if cells > 1 && got > want+tol {
						rt.Fatalf("rate of %q %v above the model %v (no collisions)", q, got, want)
					}
				}
			})
		})
	}
}

// At a steady rate the estimate converges to it: 1 - exp(-t/window).
func TestRateSteady(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, _ := meter.NewRate(time.Second, meter.WithClock(clk))
	for i := range 3000 { // 100/s for 30 s (30 windows: past a rotation at 16)
		clk.Advance(10 * time.Millisecond)
		r.Observe("k")
		if i == 99 { // after one window
			if got := r.PerSecond("k"); math.Abs(got-100*(1-math.Exp(-1))) > 2 {
				t.Fatalf("after one window %v, want about %v", got, 100*(1-math.Exp(-1)))
			}
		}
	}
	if got := r.PerSecond("k"); math.Abs(got-100) > 1 {
		t.Fatalf("steady rate %v, want about 100", got)
	}
}

func TestInflight(t *testing.T) {
	in, err := meter.NewInflight(0)
	if err != nil {
		t.Fatal(err)
	}
	g1 := in.Acquire("k")
	g2 := in.TryAcquire("k", 2)
	if g2 == nil || in.TryAcquire("k", 2) != nil || in.Count("k") != 2 {
		t.Fatalf("count %d", in.Count("k"))
	}
	g1.Release()
	g1.Release() // idempotent
	if in.Count("k") != 1 {
		t.Fatalf("after a double release: %d", in.Count("k"))
	}
	g2.Release()
	var none *meter.Guard
	none.Release()
	if in.Count("k") != 0 {
		t.Fatalf("after releasing all: %d", in.Count("k"))
	}
}

// TryAcquire is exact under contention at several GOMAXPROCS, and a
// collision-forced Inflight never admits a key past max.
func TestInflightSentinel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4, 8} {
		runtime.GOMAXPROCS(procs)
		for _, cells := range []uint32{1, 0} {
			in, _ := meter.NewInflight(0, meter.WithSize(4, cells))
			var got atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 100 {
						if in.TryAcquire("hot", 100) != nil {
							got.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got.Load() != 100 {
				t.Fatalf("procs=%d cells=%d: %d acquired, want exactly 100", procs, cells, got.Load())
			}
		}
	}
}

// Novelty against a last-seen model: exact with roomy cells (but for a
// few ms at the boundary T, where float32 rounding may keep a mark a
// hair longer), and no false negative with every key colliding.
func TestNoveltyModel(t *testing.T) {
	for _, cells := range []uint32{1, 2, 1 << 12} {
		t.Run(fmt.Sprintf("cells=%d", cells), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				within := time.Duration(rapid.IntRange(100, 10_000).Draw(rt, "withinMs")) * time.Millisecond
				clk := sketchtest.NewFakeClock()
				n, err := meter.NewNovelty(within, meter.WithClock(clk), meter.WithSize(levelsFor(cells), cells),
					meter.WithSeed(rapid.Uint64().Draw(rt, "seed")), meter.WithPrefetch(rapid.Bool().Draw(rt, "prefetch")))
				if err != nil {
					rt.Fatal(err)
				}
				last := map[string]int64{}
				keys := []string{"a", "b", "c", "d"}
				slack := int64(2) + within.Milliseconds()/1000
				for range rapid.IntRange(1, 200).Draw(rt, "ops") {
					clk.Advance(time.Duration(rapid.IntRange(0, int(2*within.Milliseconds())).Draw(rt, "gap")) * time.Millisecond)
					k := rapid.SampledFrom(keys).Draw(rt, "key")
					now := clk.NowMillis()
					at, ok := last[k]
					age := now - at
					modelSeen := ok && age < within.Milliseconds()
					got := n.SeenAt(clk.Now(), k)
					if modelSeen && !got {
						rt.Fatalf("false negative: %q seen %dms ago, T=%v", k, age, within)
					}
					if cells == 1<<12 && got && !modelSeen && (!ok || age > within.Milliseconds()+slack) {
						rt.Fatalf("false positive without collisions: %q age %dms (seen before: %v), T=%v", k, age, ok, within)
					}
					last[k] = now
				}
			})
		})
	}
}

// Exactly one of racing callers is told a key is new.
func TestNoveltyOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(procs)
		n, _ := meter.NewNovelty(time.Hour)
		for round := range 50 {
			key := fmt.Sprint("msg-", round)
			var fresh atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if !n.Seen(key) {
						fresh.Add(1)
					}
				})
			}
			wg.Wait()
			if fresh.Load() != 1 {
				t.Fatalf("procs=%d %s: %d callers told new, want 1", procs, key, fresh.Load())
			}
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	r, _ := meter.NewRate(time.Second)
	n, _ := meter.NewNovelty(time.Second)
	in, _ := meter.NewInflight(0)
	for name, f := range map[string]func(){
		"Rate.Observe":   func() { r.Observe("k") },
		"Rate.PerSecond": func() { r.PerSecond("k") },
		"Novelty.Seen":   func() { n.Seen("k") },
		"Count":          func() { in.Count("k") },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocs/op", name, a)
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := meter.NewRate(0); err == nil || !strings.HasPrefix(err.Error(), "meter: ") {
		t.Fatalf("NewRate(0): %v", err)
	}
	if _, err := meter.NewNovelty(-time.Second); err == nil || !strings.HasPrefix(err.Error(), "meter: ") {
		t.Fatalf("NewNovelty(-1s): %v", err)
	}
	if _, err := meter.NewInflight(-1); err == nil || !strings.HasPrefix(err.Error(), "meter: ") {
		t.Fatalf("NewInflight(-1): %v", err)
	}
	if _, err := meter.NewRate(time.Second, meter.WithPeriodWindows(math.NaN())); err == nil {
		t.Fatal("NaN period accepted")
	}
	if _, err := meter.NewRate(time.Second, meter.WithSize(9, 0)); err == nil || !strings.HasPrefix(err.Error(), "meter: Levels") { // a *sketch.ConfigError restated as meter's (audit 105)
		t.Fatalf("Levels 9: %v", err)
	}
	r, _ := meter.NewRate(time.Second)
	in, _ := meter.NewInflight(10)
	for name, f := range map[string]func(){
		"ObserveAt(NaN)": func() { r.ObserveAt(time.Now(), "k", math.NaN()) },
		"ObserveAt(-1)":  func() { r.ObserveAt(time.Now(), "k", -1) },
		"TryAcquire(0)":  func() { in.TryAcquire("k", 0) },
		"TryAcquire(11)": func() { in.TryAcquire("k", 11) },
	} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "meter: ") {
					t.Errorf("%s: panic %q", name, s)
				}
			}()
			f()
		}()
	}
}

// levelsFor gives roomy sketches 4 levels, so that a full collision of
// the test's few keys (about (1/M)^4 per generation) does not happen;
// collision-forced ones (tiny M) keep 2.
func levelsFor(cells uint32) uint32 {
	if cells > 2 {
		return 4
	}
	return 2
}

// Inflight against the exact per-key count, at maxLimit 4, 5 and the
// default: with roomy cells Count is the count; with every key colliding
// it is an upper bound, and TryAcquire never lets a key hold more than
// its max (with Hi = maxLimit, a collision at the clamp under-counted).
func TestInflightModel(t *testing.T) {
	for _, cells := range []uint32{1, 1 << 12} {
		t.Run(fmt.Sprintf("cells=%d", cells), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				maxLimit := rapid.SampledFrom([]int{0, 4, 5}).Draw(rt, "maxLimit")
				in, err := meter.NewInflight(maxLimit, meter.WithSize(levelsFor(cells), cells),
					meter.WithSeed(rapid.Uint64().Draw(rt, "seed")), meter.WithPrefetch(rapid.Bool().Draw(rt, "prefetch")))
				if err != nil {
					rt.Fatal(err)
				}
				keys := []string{"a", "b", "c"}
				held := map[string][]*meter.Guard{}
				for range rapid.IntRange(1, 200).Draw(rt, "ops") {
					k := rapid.SampledFrom(keys).Draw(rt, "key")
					switch rapid.IntRange(0, 2).Draw(rt, "op") {
					case 0:
						held[k] = append(held[k], in.Acquire(k))
					case 1:
						max := rapid.IntRange(1, map[int]int{0: 5, 4: 4, 5: 5}[maxLimit]).Draw(rt, "max")
						if g := in.TryAcquire(k, max); g != nil {
							if len(held[k])+1 > max {
								rt.Fatalf("TryAcquire(%q, %d) admitted with %d held", k, max, len(held[k]))
							}
							held[k] = append(held[k], g)
						}
					case 2:
						if n := len(held[k]); n > 0 {
							i := rapid.IntRange(0, n-1).Draw(rt, "which")
							held[k][i].Release()
							held[k][i].Release() // idempotent
							held[k] = append(held[k][:i], held[k][i+1:]...)
						}
					}
					for _, q := range keys {
						c := in.Count(q)
						if c < len(held[q]) || (cells > 1 && c != len(held[q])) {
							rt.Fatalf("Count(%q) = %d, holding %d (cells %d)", q, c, len(held[q]), cells)
						}
					}
				}
			})
		})
	}
}
