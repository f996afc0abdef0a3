package rotator_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Colliding keys on the rotator: with every key
// sharing every cell (CellsPerLevel=1, in every generation whatever its
// seed), the admitted total never exceeds the limit, within a period
// (frozen clock) and across promotions (window bound below).

// collideProcs runs f at GOMAXPROCS 1, 2, 4 and 8.
var collideProcs = sketchtest.ForEachGOMAXPROCS

func newCollideRotator(t testing.TB, cfg rotator.Config) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(cfg)
	if err != nil {
		t.Fatalf("rotator.New(%+v): %v", cfg, err)
	}
	t.Cleanup(r.Close)
	return r
}

func collideDescribe(r *rotator.Rotator, key []byte) string {
	var b strings.Builder
	d := r.QueryDetailed(key)
	fmt.Fprintf(&b, "Query=%v levels:", d.Score)
	for _, lv := range d.Levels {
		fmt.Fprintf(&b, " [l%d %v]", lv.Level, lv.Score)
	}
	return b.String()
}

// checkEveryGeneration asserts, with the clock frozen, that the primary
// and then each later generation (reached by advancing the clock one
// Period at a time, each advance promoting once) scores every key at
// most limit. Every generation got every write made while it was live,
// so none may hold more than the limit.
func checkEveryGeneration(t *testing.T, r *rotator.Rotator, clk *sketchtest.FakeClock, keys [][]byte, limit float64, what string) {
	t.Helper()
	n := int(r.Config().Generations)
	for gen := range n {
		for _, k := range keys {
			if q := r.Query(k); q > limit {
				t.Fatalf("%s: generation %d (after %d promotions) scores %s at %v > limit %v; %s",
					what, gen, gen, k, q, limit, collideDescribe(r, k))
			}
		}
		clk.Advance(r.Config().Period)
	}
}

// TestTryUpdateCollidingFrozen: 12 goroutines, one distinct key each,
// 3 TryUpdate(k, 1, 4) each, M=1, L=2..8, Period an hour on a frozen
// clock (no promotion during the run), many short runs: at most 4
// admitted in all, and no generation holds more than 4 afterwards. Then
// 64 keys race to 600 the same way.
func TestTryUpdateCollidingFrozen(t *testing.T) {
	const (
		goroutines = 12
		attempts   = 3
		limit      = 4
	)
	runs := 300
	if testing.Short() {
		runs = 20
	}
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("rot-collide-%d", i))
	}
	race := func(r *rotator.Rotator, keys [][]byte, attempts int, limit float64) int64 {
		var total atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range keys {
			wg.Go(func() {
				<-start
				for a := 0; attempts == 0 || a < attempts; a++ {
					if !r.TryUpdate(keys[g], 1, limit) {
						if attempts == 0 {
							return
						}
						continue
					}
					total.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		return total.Load()
	}
	t.Run("small", func(t *testing.T) {
		collideProcs(t, func(t *testing.T) {
			for run := range runs {
				l := uint32(2 + run%(sketch.MaxLevels-1))
				clk := sketchtest.NewFakeClock()
				r := newCollideRotator(t, rotator.Config{Sketch: sketch.Config{Levels: l, CellsPerLevel: 1, Hi: 1e9, Clock: clk}, Period: time.Hour})
				if n := race(r, keys[:goroutines], attempts, limit); n > limit {
					t.Fatalf("run %d (L=%d): %d colliding keys admitted %d in all > limit %d; %s", run, l, goroutines, n, limit, collideDescribe(r, keys[0]))
				}
				checkEveryGeneration(t, r, clk, keys[:goroutines], limit, fmt.Sprintf("run %d (L=%d)", run, l))
			}
		})
	})
	t.Run("many", func(t *testing.T) {
		reps := 4
		if testing.Short() {
			reps = 1
		}
		collideProcs(t, func(t *testing.T) {
			for rep := range reps {
				for _, l := range []uint32{2, 8} {
					const limit = 600
					clk := sketchtest.NewFakeClock()
					r := newCollideRotator(t, rotator.Config{Sketch: sketch.Config{Levels: l, CellsPerLevel: 1, Hi: 1e9, Clock: clk, Seed: uint64(rep)}, Period: time.Hour})
					if n := race(r, keys, 0, limit); n > limit {
						t.Fatalf("rep %d (L=%d): 64 colliding keys admitted %d in all > limit %d; %s", rep, l, n, limit, collideDescribe(r, keys[0]))
					}
					checkEveryGeneration(t, r, clk, keys, limit, fmt.Sprintf("rep %d (L=%d)", rep, l))
				}
			}
		})
	})
}

// promoAdmission is one admitted TryUpdate: the clock readings just
// before and just after the call.
type promoAdmission struct{ before, after int64 }

// TestTryUpdateAcrossPromotion races colliding keys (M=1, no decay)
// through a run in which the clock moves one Period at a time, ten
// times, while the admissions go on. Which generations an operation
// writes depends on how it raced the promotion, so the bound is stated
// on what is certain.
//
// Phases: phase p is clock time [t0 + p*P, t0 + (p+1)*P). After each
// advance the test waits until that promotion is published (Stats), so
// the generation set of phase p, S_p = [G_{p-N+1} .. G_p] (G_g is born
// at promotion g; the N initial ones are G_{-N+1}..G_0), is current
// before the clock reaches phase p+1. An operation that read the clock
// in phase j acts on S_q with q >= j-1 (its loaded set was S_{j-1} or
// newer, or it promoted it itself to S_j), and q <= the phase of the
// clock reading just after it returned (S_q was published before it
// loaded it). With a = phase(before) and b = phase(after):
//
//	max(a-1, 0) <= q <= b.
//
// G_g is in S_q for g <= q <= g+N-1. So every admission with
// max(a-1, 0) >= g and b <= g+N-1 was written to G_g. An admitted
// TryUpdate commits on every generation of its set, and each
// generation's own score never exceeds the limit (that is the contract
// the rotator must keep for a rate limiter: a generation that misses an
// admission becomes a primary that admits it again), so for every g the
// admissions so attributed to G_g sum to at most limit. Afterwards,
// with the clock frozen, no live generation scores any key above limit.
//
// The advancer moves the clock after every ~limit/2 admissions (or many
// denials), so a retiring primary usually still has room when the next
// promotion comes: an operation that raced the promotion and decided on
// the old primary then writes a generation that the new primary's
// admissions are already filling.
func TestTryUpdateAcrossPromotion(t *testing.T) {
	phases, reps := 10, 10
	if testing.Short() {
		phases, reps = 4, 3
	}
	for _, n := range []uint32{2, 3} {
		for _, l := range []uint32{2, 4} {
			t.Run(fmt.Sprintf("N=%d/L=%d", n, l), func(t *testing.T) {
				collideProcs(t, func(t *testing.T) {
					for rep := range reps {
						promoRun(t, rep, n, l, phases)
					}
				})
			})
		}
	}
}

// promoRun is one run of TestTryUpdateAcrossPromotion.
func promoRun(t *testing.T, rep int, n, l uint32, phases int) {
	const (
		workers = 8
		limit   = 200
		period  = time.Second
		t0      = 1_000_000 // ms
	)
	clk := sketchtest.NewFakeClock()
	clk.Set(t0)
	r := newCollideRotator(t, rotator.Config{
		Sketch:      sketch.Config{Levels: l, CellsPerLevel: 1, Hi: 1e9, Clock: clk},
		Generations: n,
		Period:      period,
	})
	keys := make([][]byte, workers)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("promo-%d", i))
	}
	per := make([][]promoAdmission, workers)
	var admitted, attempts atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if i%16 == 15 {
					// Let the advancer run at GOMAXPROCS=1.
					runtime.Gosched()
				}
				before := clk.NowMillis()
				ok := r.TryUpdate(keys[g], 1, limit)
				after := clk.NowMillis()
				attempts.Add(1)
				if ok {
					admitted.Add(1)
					per[g] = append(per[g], promoAdmission{before, after})
				}
			}
		})
	}
	for p := 1; p <= phases; p++ {
		a0, d0 := admitted.Load(), attempts.Load()
		for admitted.Load()-a0 < limit/2 && attempts.Load()-d0 < 20*limit {
			runtime.Gosched()
		}
		clk.Advance(period)
		// Publish the promotion before the clock moves on.
		for r.Stats().Periods < uint64(p) {
			r.Query(keys[0])
			runtime.Gosched()
		}
	}
	d0 := attempts.Load()
	for attempts.Load()-d0 < 2*limit {
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	if st := r.Stats(); st.Periods != uint64(phases) || st.Promotions != uint64(phases) {
		t.Fatalf("stats %+v; want %d promotions of one period each", st, phases)
	}

	phase := func(ms int64) int { return int((ms - t0) / period.Milliseconds()) }
	for g := -int(n) + 1; g <= phases; g++ {
		sum := 0
		for _, adm := range per {
			for _, x := range adm {
				if max(phase(x.before)-1, 0) >= g && phase(x.after) <= g+int(n)-1 {
					sum++
				}
			}
		}
		if sum > limit {
			var byPhase []int
			for _, adm := range per {
				for _, x := range adm {
					for len(byPhase) <= phase(x.before) {
						byPhase = append(byPhase, 0)
					}
					byPhase[phase(x.before)]++
				}
			}
			t.Fatalf("rep %d: generation G_%d: %d admissions certainly written to it > limit %d (admissions by phase of the clock before the call: %v)",
				rep, g, sum, limit, byPhase)
		}
	}
	checkEveryGeneration(t, r, clk, keys, limit, fmt.Sprintf("rep %d: after the run", rep))
}
