package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit64Law is the float64 oracle of each built-in law.
type audit64Law struct {
	name  string
	decay grudge.Decay
	apply func(v float64, dtMs int64) float64
	hi    float64
}

func audit64Laws() []audit64Law {
	return []audit64Law{
		{"Exponential", grudge.Exponential(0.7), func(v float64, dt int64) float64 {
			return v * math.Exp(-0.7*float64(dt)/1000)
		}, math.Inf(1)},
		{"Linear", grudge.Linear(3), func(v float64, dt int64) float64 {
			return math.Max(0, v-3*float64(dt)/1000)
		}, 50},
		{"None", grudge.None(), func(v float64, dt int64) float64 { return v }, 1e7},
	}
}

type audit64Truth struct {
	v  float64
	ms int64
}

func (tr *audit64Truth) at(law audit64Law, ms int64) float64 {
	if ms > tr.ms {
		tr.v = law.apply(tr.v, ms-tr.ms)
		tr.ms = ms
	}
	return tr.v
}

// A grudge user's Sketch, every Config field set: with non-negative deltas
// and Min, estimates never fall below the truth (REFERENCE.md: "Min
// (default; gives collision shielding and one-sided error)"; root doc:
// "rounded toward +Inf on every store, so Min never under-estimates").
func TestAudit64RootSketchNeverBelowTruth(t *testing.T) {
	testsize.Serial(t)
	for _, law := range audit64Laws() {
		for _, hasher := range []grudge.HasherFactory{nil, grudge.Murmur3(), grudge.SipHash()} {
			t.Run(law.name, func(t *testing.T) {
				clk := grudgetest.NewFakeClock()
				s, err := grudge.New(grudge.Config{
					Levels: 3, CellsPerLevel: 97, Decay: law.decay, Lo: 0, Hi: law.hi,
					Aggregator: grudge.Min, Hasher: hasher, Clock: clk,
				})
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(64, uint64(len(law.name))))
				const nk = 300
				truth := make([]audit64Truth, nk)
				start := clk.NowMillis()
				for i := range truth {
					truth[i].ms = start
				}
				key := func(i int) []byte { return []byte(fmt.Sprintf("user-%d", i)) }
				check := func(i int, got float64, what string) {
					ms := clk.NowMillis()
					want := truth[i].at(law, ms)
					want = math.Min(want, law.hi)
					if got < want*(1-1e-6)-1e-9 {
						t.Fatalf("%s(%s) = %v below the truth %v", what, key(i), got, want)
					}
				}
				for step := 0; step < 20000; step++ {
					if rng.IntN(8) == 0 {
						clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
					}
					i := rng.IntN(nk)
					ms := clk.NowMillis()
					d := float64(rng.IntN(5)) + rng.Float64()
					switch rng.IntN(5) {
					case 0:
						s.Update(key(i), d)
						truth[i].at(law, ms)
						truth[i].v = math.Min(truth[i].v+d, law.hi)
					case 1:
						got := s.UpdateAndQuery(key(i), d)
						truth[i].at(law, ms)
						truth[i].v = math.Min(truth[i].v+d, law.hi)
						check(i, got, "UpdateAndQuery")
					case 2:
						lim := 20.0
						before := s.Query(key(i))
						ok := s.TryUpdate(key(i), d, lim)
						if ok != (before+d <= lim) {
							t.Fatalf("TryUpdate(%v, %v) = %v with Query %v", d, lim, ok, before)
						}
						if ok {
							truth[i].at(law, ms)
							truth[i].v = math.Min(truth[i].v+d, law.hi)
						}
					case 3:
						check(i, s.Query(key(i)), "Query")
					case 4:
						r := s.QueryDetailed(key(i))
						if len(r.LevelScores) != 3 || len(r.CellIndexes) != 3 {
							t.Fatalf("QueryDetailed lengths %d, %d, want 3", len(r.LevelScores), len(r.CellIndexes))
						}
						mn := math.Inf(1)
						for l, v := range r.LevelScores {
							if r.CellIndexes[l] >= 97 {
								t.Fatalf("cell index %d >= 97", r.CellIndexes[l])
							}
							check(i, v, fmt.Sprintf("LevelScores[%d]", l))
							mn = math.Min(mn, v)
						}
						if r.Aggregate != math.Min(mn, law.hi) || r.Aggregate != s.Query(key(i)) {
							t.Fatalf("QueryDetailed Aggregate %v, min of levels %v, Query %v", r.Aggregate, mn, s.Query(key(i)))
						}
					}
				}
				for i := 0; i < nk; i++ {
					check(i, s.Query(key(i)), "final Query")
				}
			})
		}
	}
}

// Rotator with a grudgetest.FakeTicker: rotation follows the ticks only; the
// primary (the oldest) has seen every write since it was built, so its
// estimate is never below the writes since then.
func TestAudit64RootRotatorTickerNeverBelowTruth(t *testing.T) {
	law := audit64Laws()[1] // Linear(3), Hi 50
	clk := grudgetest.NewFakeClock()
	tk := grudgetest.NewFakeTicker()
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 61, Decay: law.decay, Hi: law.hi, Clock: clk, Hasher: grudge.SipHash()},
		Generations: 3,
		Period:      time.Second, // ignored with a Ticker
		Ticker:      tk,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rot.Close()
	const nk = 100
	// truth[g][i]: writes since generation g was built (g counts builds:
	// 0, 1, 2 at New; 3 at the first tick, ...).
	truth := map[int][]audit64Truth{}
	newGen := func(g int) {
		tr := make([]audit64Truth, nk)
		for i := range tr {
			tr[i].ms = clk.NowMillis()
		}
		truth[g] = tr
	}
	newGen(0)
	newGen(1)
	newGen(2)
	rng := rand.New(rand.NewPCG(1, 2))
	primary := 0
	key := func(i int) []byte { return []byte(fmt.Sprintf("ip-%d", i)) }
	for step := 0; step < 6000; step++ {
		if step%1000 == 999 {
			before := rot.Rotations()
			tk.Tick()
			if got := rot.Rotations(); got != before+1 {
				t.Fatalf("Rotations %d after a Tick, was %d: grudgetest: read right after sees it", got, before)
			}
			delete(truth, primary)
			primary++
			newGen(primary + 2)
		}
		if rng.IntN(4) == 0 {
			clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
		ms := clk.NowMillis()
		i := rng.IntN(nk)
		d := float64(rng.IntN(4))
		add := func() {
			for _, tr := range truth {
				tr[i].at(law, ms)
				tr[i].v = math.Min(tr[i].v+d, law.hi)
			}
		}
		switch rng.IntN(4) {
		case 0:
			rot.Update(key(i), d)
			add()
		case 1:
			got := rot.UpdateAndQuery(key(i), d)
			add()
			if want := truth[primary][i].at(law, ms); got < want-1e-9 {
				t.Fatalf("UpdateAndQuery %v below the primary's truth %v", got, want)
			}
		case 2:
			if rot.TryUpdate(key(i), d, 30) {
				add()
			}
		case 3:
			if got, want := rot.Query(key(i)), truth[primary][i].at(law, ms); got < want-1e-9 { // float64 ulps of the oracle's own piecewise decay
				t.Fatalf("step %d: Query %v below the primary's truth %v", step, got, want)
			}
			r := rot.QueryDetailed(key(i))
			if r.Aggregate != rot.Query(key(i)) {
				t.Fatalf("QueryDetailed Aggregate %v != Query %v", r.Aggregate, rot.Query(key(i)))
			}
		}
	}
	// Without ticks, time alone does not rotate a ticker-driven rotator.
	before := rot.Rotations()
	clk.Advance(time.Hour)
	rot.Update([]byte("x"), 1)
	if got := rot.Rotations(); got != before {
		t.Fatalf("ticker-driven rotator rotated on time alone: %d -> %d", before, got)
	}
	rot.Close()
	rot.Close() // idempotent
	if !tk.Stopped() {
		t.Fatal("Close did not stop the Ticker")
	}
	tk.Tick() // after Stop: nothing
	if got := rot.Rotations(); got != before {
		t.Fatalf("Rotations %d after Close and Tick, want %d", got, before)
	}
	rot.Update([]byte("x"), 1) // operations keep working after Close
}

// TryUpdate is exact under contention and across ticks: N goroutines racing
// TryUpdate(k, 1, 1000) admit exactly 1000 (root doc), with the first tick
// in the middle (the new primary has seen every write).
func TestAudit64RootTryUpdateExactAcrossTick(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		tk := grudgetest.NewFakeTicker()
		rot, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch: grudge.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e6, Clock: grudgetest.NewFakeClock()},
			Ticker: tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rot.Close()
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 300; i++ {
					if rot.TryUpdate([]byte("hot"), 1, 1000) {
						admitted.Add(1)
					}
				}
			}()
		}
		tk.Tick()
		wg.Wait()
		if n := admitted.Load(); n != 1000 {
			t.Fatalf("admitted %d, want exactly 1000", n)
		}
		if q := rot.Query([]byte("hot")); q != 1000 {
			t.Fatalf("Query %v, want 1000", q)
		}
	})
}

// Lazy rotator (no Ticker): rotation every Period on access; a score lives at
// most Generations x Period after its last write.
func TestAudit64RootLazyRotator(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Hi: 100, Clock: clk},
		Generations: 2,
		Period:      time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	rot.Update([]byte("k"), 5)
	clk.Advance(59 * time.Second)
	if rot.Query([]byte("k")) != 5 || rot.Rotations() != 0 {
		t.Fatalf("before the Period: %v, %d rotations", rot.Query([]byte("k")), rot.Rotations())
	}
	clk.Advance(time.Second)
	if q := rot.Query([]byte("k")); q != 5 || rot.Rotations() != 1 {
		t.Fatalf("after one Period: Query %v (want 5: the new primary saw the write), %d rotations", q, rot.Rotations())
	}
	clk.Advance(time.Minute)
	if q := rot.Query([]byte("k")); q != 0 || rot.Rotations() != 2 {
		t.Fatalf("after Generations x Period: Query %v (want 0), %d rotations", q, rot.Rotations())
	}
	clk.Advance(10 * time.Minute)
	if n := rot.Rotations(); n != 12 {
		t.Fatalf("a jump over 10 periods: Rotations %d, want 12", n)
	}
}

// SuggestLevels returning (uint32, error): degenerate inputs refused with
// "grudge: " errors; otherwise the smallest L with (1-(1-1/M)^H)^L <= p.
func TestAudit64RootSuggestLevels(t *testing.T) {
	var l uint32
	var err error
	l, err = grudge.SuggestLevels(1000, 100_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	p1 := 1 - math.Pow(1-1.0/100_000, 1000)
	want := uint32(1)
	for math.Pow(p1, float64(want)) > 0.01 && want < 8 {
		want++
	}
	if l != want {
		t.Fatalf("SuggestLevels(1000, 100000, 0.01) = %d, want %d", l, want)
	}
	if l, err = grudge.SuggestLevels(1_000_000, 1000, 1e-9); err != nil || l != 8 {
		t.Fatalf("unreachable target: %d, %v; want 8", l, err)
	}
	for _, c := range []struct {
		h, m uint32
		p    float64
	}{{0, 10, 0.1}, {10, 0, 0.1}, {10, 10, 0}, {10, 10, 1}, {10, 10, math.NaN()}, {10, 10, -1}, {10, 10, 2}} {
		l, err := grudge.SuggestLevels(c.h, c.m, c.p)
		if err == nil || !strings.HasPrefix(err.Error(), "grudge: ") {
			t.Errorf("SuggestLevels(%d, %d, %v) = %d, %v; want a \"grudge: \" error", c.h, c.m, c.p, l, err)
		}
	}
}

// NaN / ±Inf deltas panic; a backwards clock counts as no time passing;
// configuration errors match ErrInvalidConfig with the core's prefix.
func TestAudit64RootPanicsAndClock(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Decay: grudge.Linear(1), Hi: 100, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if msg := sketchtest.Panics(func() { s.Update([]byte("k"), d) }); msg == "" {
			t.Errorf("Update(%v) did not panic", d)
		}
		if msg := sketchtest.Panics(func() { s.TryUpdate([]byte("k"), d, 10) }); msg == "" {
			t.Errorf("TryUpdate(%v) did not panic", d)
		}
	}
	s.Update([]byte("k"), 10)
	clk.Set(clk.Now().Add(-time.Hour))
	if q := s.Query([]byte("k")); q != 10 {
		t.Fatalf("after the clock went back an hour: %v, want 10", q)
	}
	clk.Advance(time.Hour + 2*time.Second) // 2 s past the write
	if q := s.Query([]byte("k")); q != 8 {
		t.Fatalf("2 s of Linear(1) after the write: %v, want 8", q)
	}
	_, err = grudge.New(grudge.Config{Lo: 1, Hi: 2})
	if !errors.Is(err, grudge.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "sketch: ") {
		t.Fatalf("New(Lo 1) error %v", err)
	}
	_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}})
	if !errors.Is(err, grudge.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "rotator: ") {
		t.Fatalf("NewRotator without Period or Ticker: error %v", err)
	}
	// zero allocations on the hot path with a built-in aggregator
	k := []byte("alloc")
	if a := testing.AllocsPerRun(200, func() {
		s.Update(k, 1)
		s.Query(k)
		s.UpdateAndQuery(k, 1)
		s.TryUpdate(k, 1, 50)
	}); a != 0 {
		t.Fatalf("hot path allocated %v", a)
	}
}

// Lo < 0: feedback scores (+/- delta), clamped to [Lo, Hi]; decay moves
// toward 0 from below too.
func TestAudit64RootNegativeScores(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Decay: grudge.Linear(2), Lo: -10, Hi: 10, Clock: clk, Aggregator: grudge.Max})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.UpdateAndQuery([]byte("k"), -25); got != -10 {
		t.Fatalf("clamped to Lo: %v, want -10", got)
	}
	clk.Advance(3 * time.Second)
	if got := s.Query([]byte("k")); got != -4 {
		t.Fatalf("-10 after 3 s of Linear(2): %v, want -4", got)
	}
	clk.Advance(time.Hour)
	if got := s.Query([]byte("k")); got != 0 {
		t.Fatalf("decay crossed 0: %v", got)
	}
}

// README: "Query only reads": many reads along the way leave the same score
// as one read at the end (no write-back drift), on a Sketch and a Rotator;
// the hot paths of a Rotator do not allocate (root doc).
func TestAudit64RootQueryOnlyReads(t *testing.T) {
	for _, law := range audit64Laws() {
		clkA, clkB := grudgetest.NewFakeClock(), grudgetest.NewFakeClock()
		cfg := func(c grudge.Clock) grudge.Config {
			return grudge.Config{Levels: 2, CellsPerLevel: 16, Decay: law.decay, Hi: law.hi, Clock: c}
		}
		a, _ := grudge.New(cfg(clkA))
		b, _ := grudge.New(cfg(clkB))
		ra, _ := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg(clkA), Period: time.Hour})
		rb, _ := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg(clkB), Period: time.Hour})
		k := []byte("k")
		a.Update(k, 37.3)
		b.Update(k, 37.3)
		ra.Update(k, 37.3)
		rb.Update(k, 37.3)
		for i := 0; i < 1000; i++ {
			clkA.Advance(7 * time.Millisecond)
			a.Query(k)
			a.QueryDetailed(k)
			ra.Query(k)
			ra.QueryDetailed(k)
		}
		clkB.Advance(7000 * time.Millisecond)
		if x, y := a.Query(k), b.Query(k); x != y {
			t.Errorf("%s: Sketch after 1000 reads %v, after one %v: Query wrote", law.name, x, y)
		}
		if x, y := ra.Query(k), rb.Query(k); x != y {
			t.Errorf("%s: Rotator after 1000 reads %v, after one %v: Query wrote", law.name, x, y)
		}
		// a denied TryUpdate writes nothing either
		for i := 0; i < 100; i++ {
			clkA.Advance(3 * time.Millisecond)
			a.TryUpdate(k, 1e6, 1)
			ra.TryUpdate(k, 1e6, 1)
		}
		clkB.Advance(300 * time.Millisecond)
		if x, y := a.Query(k), b.Query(k); x != y {
			t.Errorf("%s: Sketch after 100 denied TryUpdates %v, want %v", law.name, x, y)
		}
		if x, y := ra.Query(k), rb.Query(k); x != y {
			t.Errorf("%s: Rotator after 100 denied TryUpdates %v, want %v", law.name, x, y)
		}
		if n := testing.AllocsPerRun(200, func() {
			ra.Update(k, 1)
			ra.Query(k)
			ra.UpdateAndQuery(k, 1)
			ra.TryUpdate(k, 1, 1e9)
		}); n != 0 {
			t.Errorf("%s: Rotator hot path allocated %v", law.name, n)
		}
	}
}

// grudgetest: "Concurrent Ticks each rotate once" (the per-Tick visibility
// is TestAudit64FixedConcurrentTickReturnsEarly).
func TestAudit64RootConcurrentTicks(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		tk := grudgetest.NewFakeTicker()
		rot, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Clock: grudgetest.NewFakeClock()},
			Generations: 3,
			Ticker:      tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer rot.Close()
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 5; i++ {
					tk.Tick()
					rot.Update([]byte("k"), 1)
				}
			}()
		}
		wg.Wait()
		if n := rot.Rotations(); n != 30 {
			t.Fatalf("30 Ticks from 6 goroutines: Rotations %d, want 30", n)
		}
	})
}

// Concurrent writers on colliding keys (None, integer deltas): no update is
// lost, every estimate is at least the key's exact total, and a Sketch and a
// Rotator agree with their own QueryDetailed.
func TestAudit64RootConcurrentNeverBelowTruth(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := grudgetest.NewFakeClock()
		cfg := grudge.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Clock: clk}
		s, err := grudge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		const nk, ng, per = 300, 4, 3000
		var totals [ng][nk]float64
		var wg sync.WaitGroup
		for g := 0; g < ng; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for i := 0; i < per; i++ {
					k := rng.IntN(nk)
					d := float64(1 + rng.IntN(3))
					key := []byte(fmt.Sprintf("k%d", k))
					switch i % 3 {
					case 0:
						s.Update(key, d)
						rot.Update(key, d)
					case 1:
						s.UpdateAndQuery(key, d)
						rot.UpdateAndQuery(key, d)
					case 2:
						if !s.TryUpdate(key, d, 1e8) || !rot.TryUpdate(key, d, 1e8) {
							panic("TryUpdate far below its limit denied")
						}
					}
					totals[g][k] += d
					if i%500 == 0 {
						clk.Advance(time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		var all float64
		for k := 0; k < nk; k++ {
			var want float64
			for g := 0; g < ng; g++ {
				want += totals[g][k]
			}
			all += want
			key := []byte(fmt.Sprintf("k%d", k))
			if got := s.Query(key); got < want {
				t.Fatalf("Sketch Query(k%d) = %v below the exact total %v", k, got, want)
			}
			if got := rot.Query(key); got < want {
				t.Fatalf("Rotator Query(k%d) = %v below the exact total %v", k, got, want)
			}
			if d := s.QueryDetailed(key); d.Aggregate != s.Query(key) {
				t.Fatalf("QueryDetailed %v != Query %v", d.Aggregate, s.Query(key))
			}
		}
		// Sum over one level's cells is the total mass: nothing lost.
		var mass float64
		seen := map[uint32]bool{}
		for k := 0; k < nk; k++ {
			d := s.QueryDetailed([]byte(fmt.Sprintf("k%d", k)))
			if !seen[d.CellIndexes[0]] {
				seen[d.CellIndexes[0]] = true
				mass += d.LevelScores[0]
			}
		}
		if mass != all {
			t.Fatalf("level 0 holds %v in all, the writers added %v: updates lost or invented", mass, all)
		}
	})
}
