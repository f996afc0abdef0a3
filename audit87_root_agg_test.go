package grudge_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/spaolacci/murmur3"
)

// a87SeedlessHasher ignores the sketch's random seed, so two root
// sketches built from the same Config map every key to the same cells
// (the root package draws a seed per sketch and has no Seed field).
type a87SeedlessHasher struct{}

func (a87SeedlessHasher) Hash64(key []byte) uint64 { return murmur3.Sum64WithSeed(key, 87) }

func a87Seedless(uint64) grudge.Hasher { return a87SeedlessHasher{} }

// TestAudit87RootAggFuncFormAgrees: the built-in Min, Max and Mean take
// the fast path, and the same function called through a wrapper (so New
// sees a custom Aggregator: the slow path) must compute the same thing
// (root config.go: "Min, Max and Mean take the lock-free fast path; any
// other function works"). Two root sketches with one seedless Hasher
// share their cell layout; the same random sequence (collisions: M = 5,
// 24 keys; clock moves; negative deltas; a Hi no float32 holds, so reads
// are capped) runs on both. Query, UpdateAndQuery and QueryDetailed must
// agree exactly (the built-in Mean additionally capped at Hi: doc.go,
// "Reads are capped at Hi"), and each TryUpdate must decide
// aggregate + delta <= limit on its own sketch's aggregate, at the exact
// boundary too.
func TestAudit87RootAggFuncFormAgrees(t *testing.T) {
	aggs := []struct {
		name string
		a    grudge.Aggregator
	}{{"min", grudge.Min}, {"max", grudge.Max}, {"mean", grudge.Mean}}
	laws := []struct {
		name string
		d    grudge.Decay
	}{{"none", grudge.None}, {"lin1000", grudge.Linear(1000)}, {"exp", grudge.Exponential(0.9)}}
	bounds := [][2]float64{{0, 100}, {0, 100.1}, {-50.3, 60.7}, {-1e4, 0}}
	seed := uint64(8700)
	for _, ag := range aggs {
		for _, law := range laws {
			for _, b := range bounds {
				seed++
				t.Run(fmt.Sprintf("%s/%s/%v", ag.name, law.name, b), func(t *testing.T) {
					a87AggPair(t, seed, ag.a, law.d, b[0], b[1])
				})
			}
		}
	}
}

func a87AggPair(t *testing.T, seed uint64, builtin grudge.Aggregator, law grudge.Decay, lo, hi float64) {
	const levels = 3
	var badLen atomic.Int64
	wrapped := func(v []float64) float64 {
		if len(v) != levels {
			badLen.Add(1)
		}
		return builtin(v)
	}
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC))
	mk := func(a grudge.Aggregator) *grudge.Sketch {
		s, err := grudge.New(grudge.Config{Levels: levels, CellsPerLevel: 5, Decay: law, Lo: lo, Hi: hi,
			Aggregator: a, Hasher: a87Seedless, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fast, slow := mk(builtin), mk(wrapped)
	// want is what the fast path must read, given the slow path's value:
	// equal, except that the built-in aggregate is capped at Hi.
	want := func(v float64) float64 { return math.Min(v, hi) }
	rng := rand.New(rand.NewPCG(seed, 87))
	for i := range 2500 {
		if rng.IntN(5) == 0 {
			clk.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
		}
		key := []byte(fmt.Sprintf("k%d", rng.IntN(24)))
		d := float64(rng.IntN(40))
		if rng.IntN(3) == 0 {
			d += 0.5
		}
		if lo < 0 && (hi == 0 || rng.IntN(2) == 0) {
			d = -d
		}
		switch rng.IntN(5) {
		case 0:
			fast.Update(key, d)
			slow.Update(key, d)
		case 1:
			f, s := fast.Query(key), slow.Query(key)
			if f != want(s) {
				t.Fatalf("op %d: Query(%s): fast path %v, func form %v", i, key, f, s)
			}
		case 2:
			f, s := fast.UpdateAndQuery(key, d), slow.UpdateAndQuery(key, d)
			if f != want(s) {
				t.Fatalf("op %d: UpdateAndQuery(%s, %v): fast path %v, func form %v", i, key, d, f, s)
			}
		case 3:
			fq, sq := fast.Query(key), slow.Query(key)
			limit := fq + d
			switch rng.IntN(4) {
			case 0:
				limit -= 1
			case 1:
				limit += 1
			case 2:
				limit = math.Nextafter(limit, math.Inf(-1))
			}
			f, s := fast.TryUpdate(key, d, limit), slow.TryUpdate(key, d, limit)
			if f != (fq+d <= limit) || s != (sq+d <= limit) {
				t.Fatalf("op %d: TryUpdate(%s, %v, %v): fast path %v (aggregate %v), func form %v (aggregate %v); want aggregate + delta <= limit",
					i, key, d, limit, f, fq, s, sq)
			}
		case 4:
			f, s := fast.QueryDetailed(key), slow.QueryDetailed(key)
			if len(f.LevelScores) != levels || len(s.LevelScores) != levels || len(f.CellIndexes) != levels {
				t.Fatalf("op %d: QueryDetailed lengths %d/%d/%d, want %d", i, len(f.LevelScores), len(s.LevelScores), len(f.CellIndexes), levels)
			}
			for l := range levels {
				if f.LevelScores[l] != s.LevelScores[l] || f.CellIndexes[l] != s.CellIndexes[l] {
					t.Fatalf("op %d: level %d: fast (cell %d, %v), func form (cell %d, %v)", i, l, f.CellIndexes[l], f.LevelScores[l], s.CellIndexes[l], s.LevelScores[l])
				}
				if f.CellIndexes[l] >= 5 || f.LevelScores[l] > hi || f.LevelScores[l] < lo {
					t.Fatalf("op %d: level %d: cell %d score %v outside M = 5 or [%v, %v]", i, l, f.CellIndexes[l], f.LevelScores[l], lo, hi)
				}
			}
			if s.Aggregate != builtin(s.LevelScores) || f.Aggregate != want(builtin(f.LevelScores)) {
				t.Fatalf("op %d: QueryDetailed aggregates fast %v, func form %v; the function of the levels %v gives %v",
					i, f.Aggregate, s.Aggregate, f.LevelScores, builtin(f.LevelScores))
			}
			if q := fast.Query(key); q != f.Aggregate {
				t.Fatalf("op %d: Query %v != QueryDetailed.Aggregate %v", i, q, f.Aggregate)
			}
		}
	}
	if n := badLen.Load(); n != 0 {
		t.Fatalf("the custom aggregator saw %d slices whose length is not Levels = %d", n, levels)
	}
}

// a87Sum is a custom Aggregator (the slow path) that is not one of the
// built-ins: the sum of the level scores.
func a87Sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

// TestAudit87RootAggCustomTryUpdateExact: TryUpdate is exact with any
// Aggregator ("any func works", and TryUpdate "atomically with respect to
// every other TryUpdate"), at GOMAXPROCS 1, 2, 4 and 8: 16 goroutines
// racing TryUpdate(k, 1, 1000) on a Sketch and on a lazy Rotator whose
// aggregator is the sum of 4 levels admit exactly 250 (each admission
// raises the sum by 4: the 250th sees 996 + 1 <= 1000, the 251st 1000 + 1);
// with a wrapped Max and every key colliding (CellsPerLevel 1) the total
// over 8 keys is exactly 1000. On the Rotator also with one promotion
// inside the race ("exactly across concurrent callers and rotations").
func TestAudit87RootAggCustomTryUpdateExact(t *testing.T) {
	wrappedMax := func(v []float64) float64 { return grudge.Max(v) }
	cases := []struct {
		name   string
		agg    grudge.Aggregator
		m      uint32
		keys   int
		admits int64
	}{{"sum", a87Sum, 4096, 1, 250}, {"max/colliding", wrappedMax, 1, 8, 1000}}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, c := range cases {
			for _, mode := range []string{"sketch", "rotator", "rotator+promotion"} {
				clk := grudgetest.NewFakeClock()
				cfg := grudge.Config{Levels: 4, CellsPerLevel: c.m, Hi: 1e6, Aggregator: c.agg, Clock: clk}
				var try func([]byte) bool
				if mode == "sketch" {
					s, err := grudge.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					try = func(k []byte) bool { return s.TryUpdate(k, 1, 1000) }
				} else {
					r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Period: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					try = func(k []byte) bool { return r.TryUpdate(k, 1, 1000) }
				}
				var admitted, calls atomic.Int64
				var wg sync.WaitGroup
				if mode == "rotator+promotion" {
					// One Period passes once 200 calls have run: the
					// promotion lands inside the race (N = 2: the new
					// primary was written all along, so the count holds).
					wg.Add(1)
					go func() {
						defer wg.Done()
						for calls.Load() < 200 {
							runtime.Gosched()
						}
						clk.Advance(time.Hour)
					}()
				}
				for g := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 150 {
							if try([]byte(fmt.Sprintf("k%d", (g+i)%c.keys))) {
								admitted.Add(1)
							}
							calls.Add(1)
						}
					}()
				}
				wg.Wait()
				if n := admitted.Load(); n != c.admits {
					t.Fatalf("%s %s: %d admitted, want exactly %d", c.name, mode, n, c.admits)
				}
			}
		}
	})
}

// TestAudit87RootAggCustomDetailed: with a custom Aggregator, Result's
// Aggregate "is what Query would have returned", the function applied to
// LevelScores, on the Sketch and on the Rotator (its primary), after
// collisions (M = 3) and a rotation.
func TestAudit87RootAggCustomDetailed(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	cfg := grudge.Config{Levels: 4, CellsPerLevel: 3, Hi: 1e6, Aggregator: a87Sum, Clock: clk, Decay: grudge.Linear(1)}
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 3, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	faces := map[string]interface {
		Update([]byte, float64)
		Query([]byte) float64
		QueryDetailed([]byte) grudge.Result
	}{"sketch": s, "rotator": r}
	for i := range 60 {
		k := []byte(fmt.Sprintf("k%d", i%7))
		for _, f := range faces {
			f.Update(k, float64(1+i%5))
		}
		clk.Advance(130 * time.Millisecond)
		for name, f := range faces {
			d := f.QueryDetailed(k)
			if q := f.Query(k); d.Aggregate != q || d.Aggregate != a87Sum(d.LevelScores) || len(d.LevelScores) != 4 {
				t.Fatalf("%s step %d: Aggregate %v, Query %v, sum of LevelScores %v = %v", name, i, d.Aggregate, q, d.LevelScores, a87Sum(d.LevelScores))
			}
		}
	}
	if n := r.Rotations(); n != 7 {
		t.Fatalf("Rotations = %d after 7.8 s, want 7", n)
	}
}

// a87SortMedian is a custom Aggregator that sorts its argument in place
// (allowed: Aggregator's doc only forbids retaining it) and returns the
// upper median.
func a87SortMedian(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// a87CopyMedian is a87SortMedian without touching its argument.
func a87CopyMedian(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// TestAudit87RootAggMutatingFunc: an Aggregator that sorts the slice it
// is given must not reorder anything the sketch keeps or reports:
// QueryDetailed's LevelScores are "each level's decayed cell score, in
// level order", and every reading and decision equals that of an
// aggregator computing the same value without touching its argument
// (two sketches sharing one cell layout through a seedless Hasher, with
// collisions).
func TestAudit87RootAggMutatingFunc(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	mk := func(a grudge.Aggregator) *grudge.Sketch {
		s, err := grudge.New(grudge.Config{Levels: 5, CellsPerLevel: 4, Hi: 1e6, Aggregator: a, Hasher: a87Seedless, Clock: clk, Decay: grudge.Linear(1000)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := mk(a87SortMedian), mk(a87CopyMedian)
	rng := rand.New(rand.NewPCG(87, 3))
	for i := range 2000 {
		if rng.IntN(4) == 0 {
			clk.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
		}
		k := []byte(fmt.Sprintf("k%d", rng.IntN(16)))
		d := float64(rng.IntN(50))
		switch rng.IntN(4) {
		case 0:
			a.Update(k, d)
			b.Update(k, d)
		case 1:
			if x, y := a.UpdateAndQuery(k, d), b.UpdateAndQuery(k, d); x != y {
				t.Fatalf("op %d: UpdateAndQuery %v (sorting aggregator) vs %v", i, x, y)
			}
		case 2:
			limit := b.Query(k) + d + float64(rng.IntN(3)) - 1
			if x, y := a.TryUpdate(k, d, limit), b.TryUpdate(k, d, limit); x != y {
				t.Fatalf("op %d: TryUpdate %v (sorting aggregator) vs %v", i, x, y)
			}
		case 3:
			x, y := a.QueryDetailed(k), b.QueryDetailed(k)
			if x.Aggregate != y.Aggregate || fmt.Sprint(x.LevelScores) != fmt.Sprint(y.LevelScores) || fmt.Sprint(x.CellIndexes) != fmt.Sprint(y.CellIndexes) {
				t.Fatalf("op %d: QueryDetailed %+v (sorting aggregator) vs %+v", i, x, y)
			}
		}
	}
}
