package grudge_test

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/spaolacci/murmur3"
)

// A custom aggregator is called with the key's per-level scores decayed to
// now (the same values QueryDetailed reports), in level order.
func TestAudit30CustomAggregatorSeesDecayedLevels(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	var mu sync.Mutex
	var seen [][]float64
	rec := func(s []float64) float64 {
		mu.Lock()
		seen = append(seen, append([]float64(nil), s...))
		mu.Unlock()
		return s[len(s)-1] // the last level
	}
	const L = 5
	s, err := grudge.New(grudge.Config{Levels: L, CellsPerLevel: 1 << 12, Hi: 1000,
		Decay: grudge.Linear(2), Aggregator: rec, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("key")
	if got := s.UpdateAndQuery(k, 100); got != 100 {
		t.Errorf("UpdateAndQuery = %v, want 100", got)
	}
	clk.Advance(10 * time.Second) // Linear(2): 100 -> 80
	mu.Lock()
	seen = nil
	mu.Unlock()
	q := s.Query(k)
	d := s.QueryDetailed(k)
	mu.Lock()
	calls := seen
	mu.Unlock()
	if q != 80 || d.Aggregate != 80 {
		t.Errorf("Query=%v Aggregate=%v, want 80 (Linear(2) over 10 s from 100)", q, d.Aggregate)
	}
	if len(calls) < 1 {
		t.Fatalf("aggregator not called by Query")
	}
	for i, c := range calls {
		if len(c) != L {
			t.Fatalf("call %d: len %d, want %d", i, len(c), L)
		}
		for l, v := range c {
			if v != 80 {
				t.Errorf("call %d level %d: %v, want 80", i, l, v)
			}
			if v != d.LevelScores[l] {
				t.Errorf("call %d level %d: %v, QueryDetailed %v", i, l, v, d.LevelScores[l])
			}
		}
	}
	// TryUpdate decides on the aggregate of the decayed levels.
	if s.TryUpdate(k, 21, 100) {
		t.Errorf("TryUpdate(21, 100) at 80 admitted")
	}
	if !s.TryUpdate(k, 20, 100) {
		t.Errorf("TryUpdate(20, 100) at 80 denied")
	}
	if got := s.Query(k); got != 100 {
		t.Errorf("after admitted TryUpdate: %v, want 100", got)
	}
}

// grudge's Aggregator contract only forbids retaining the slice. A median
// aggregator that sorts its argument in place (the common way to write one)
// must not disturb level order: QueryDetailed, TryUpdate and the cells stay
// right.
func TestAudit30SortingAggregatorHarmless(t *testing.T) {
	median := func(s []float64) float64 {
		sort.Float64s(s)
		n := len(s)
		if n%2 == 1 {
			return s[n/2]
		}
		return (s[n/2-1] + s[n/2]) / 2
	}
	// A hasher that makes "hot" and "cold" collide at level 0 only, so the
	// level scores differ: cells (h1 + l*h2) with h2 differing.
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1, Hi: 1000, Aggregator: median, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// One cell per level: every key shares all cells; still, the levels must
	// keep their own values through writes. Write, then query detailed.
	k := []byte("a")
	for i := 0; i < 10; i++ {
		s.Update(k, 1)
		if !s.TryUpdate(k, 1, 1000) {
			t.Fatalf("TryUpdate denied at %v", s.Query(k))
		}
		_ = s.UpdateAndQuery(k, 1)
	}
	d := s.QueryDetailed(k)
	for l, v := range d.LevelScores {
		if v != 30 {
			t.Errorf("level %d = %v, want 30", l, v)
		}
	}
	if d.Aggregate != 30 {
		t.Errorf("Aggregate = %v, want 30", d.Aggregate)
	}
}

// The slice a custom aggregator gets is its own for the call: concurrent
// calls never share it (each writes a sentinel and reads it back), at
// several GOMAXPROCS, and results equal the fast path's.
func TestAudit30CustomAggregatorSliceNotShared(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		var clash atomic.Int64
		var id atomic.Int64
		agg := func(s []float64) float64 {
			m := s[0]
			for _, v := range s[1:] {
				if v < m {
					m = v
				}
			}
			tag := float64(-1 - id.Add(1))
			for i := range s {
				s[i] = tag
			}
			for range 20 {
				for i := range s {
					if s[i] != tag {
						clash.Add(1)
					}
				}
			}
			return m
		}
		fast, _ := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 64, Hi: 1e6})
		slow, _ := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 64, Hi: 1e6, Aggregator: agg})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 300 {
					k := []byte(fmt.Sprintf("k%d", (g*7+i)%50))
					slow.Update(k, 1)
					if v := slow.UpdateAndQuery(k, 1); v < 0 {
						t.Errorf("negative %v", v)
					}
					slow.TryUpdate(k, 1, 1e5)
					_ = slow.Query(k)
					_ = slow.QueryDetailed(k)
					fast.Update(k, 1)
				}
			})
		}
		wg.Wait()
		if c := clash.Load(); c != 0 {
			t.Errorf("custom aggregator's slice changed under it %d times: shared between calls", c)
		}
		// No corruption of the cells by the aggregator's writes.
		for i := range 50 {
			k := []byte(fmt.Sprintf("k%d", i))
			d := slow.QueryDetailed(k)
			for l, v := range d.LevelScores {
				if v < 0 {
					t.Fatalf("key %s level %d = %v: aggregator's write reached a cell", k, l, v)
				}
			}
		}
	})
}

// Min, Max and Mean (fast paths) equal the same functions run as custom
// aggregators, on colliding keys, including Hi that no float32 holds.
func TestAudit30FastPathsEqualGeneric(t *testing.T) {
	type pair struct {
		name string
		fast grudge.Aggregator
		slow grudge.Aggregator
	}
	pairs := []pair{
		{"Min", grudge.Min, func(s []float64) float64 { return grudge.Min(s) }},
		{"Max", grudge.Max, func(s []float64) float64 { return grudge.Max(s) }},
		{"Mean", grudge.Mean, func(s []float64) float64 { return grudge.Mean(s) }},
		{"nil", nil, func(s []float64) float64 { return grudge.Min(s) }},
	}
	for _, hi := range []float64{1000, 0.1, 1e9 + 1} {
		for _, p := range pairs {
			clk := grudgetest.NewFakeClock()
			seedF := func(uint64) grudge.Hasher { return grudge.Murmur3()(42) }
			mk := func(a grudge.Aggregator) *grudge.Sketch {
				s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 7, Hi: hi, Lo: -hi,
					Decay: grudge.Exponential(0.3), Aggregator: a, Hasher: seedF, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			f, g := mk(p.fast), mk(p.slow)
			for i := range 400 {
				k := []byte(fmt.Sprintf("key-%d", i%23))
				delta := float64((i*37)%11) - 3
				delta *= hi / 7
				a, b := f.UpdateAndQuery(k, delta), g.UpdateAndQuery(k, delta)
				if a != b {
					t.Fatalf("%s hi=%v step %d: UpdateAndQuery fast %v, generic %v", p.name, hi, i, a, b)
				}
				ta, tb := f.TryUpdate(k, hi/5, hi/2), g.TryUpdate(k, hi/5, hi/2)
				if ta != tb {
					t.Fatalf("%s hi=%v step %d: TryUpdate fast %v, generic %v", p.name, hi, i, ta, tb)
				}
				if a, b := f.Query(k), g.Query(k); a != b {
					t.Fatalf("%s hi=%v step %d: Query fast %v, generic %v", p.name, hi, i, a, b)
				}
				df, dg := f.QueryDetailed(k), g.QueryDetailed(k)
				if df.Aggregate != dg.Aggregate || df.Aggregate != f.Query(k) {
					t.Fatalf("%s: QueryDetailed %v vs %v vs Query %v", p.name, df.Aggregate, dg.Aggregate, f.Query(k))
				}
				if p.fast != nil {
					if agg := p.fast(df.LevelScores); agg != df.Aggregate {
						t.Fatalf("%s hi=%v: Aggregate %v != agg(LevelScores %v) = %v", p.name, hi, df.Aggregate, df.LevelScores, agg)
					}
				}
				for l := range df.LevelScores {
					if df.LevelScores[l] > hi || df.LevelScores[l] < -hi {
						t.Fatalf("level score %v outside [-%v, %v]", df.LevelScores[l], hi, hi)
					}
				}
				if i%50 == 0 {
					clk.Advance(700 * time.Millisecond)
				}
			}
		}
	}
}

// A custom aggregator's result is returned as is (grudge returns
// agg(levelScores)), even above Hi: a Sum of 4 levels at Hi reads 4*Hi.
func TestAudit30CustomAggregatorNotCapped(t *testing.T) {
	sum := func(s []float64) float64 {
		r := 0.0
		for _, v := range s {
			r += v
		}
		return r
	}
	for _, hi := range []float64{10, 0.1} {
		s, _ := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 1000, Hi: hi, Aggregator: sum})
		k := []byte("k")
		got := s.UpdateAndQuery(k, 2*hi)
		if math.Abs(got-4*hi) > 1e-12 {
			t.Errorf("hi=%v: Sum aggregate = %v, want %v", hi, got, 4*hi)
		}
		if q := s.Query(k); math.Abs(q-4*hi) > 1e-12 {
			t.Errorf("hi=%v: Query = %v, want %v", hi, q, 4*hi)
		}
	}
}

// Murmur3 is MurmurHash3 x64-128's first 64 bits from spaolacci/murmur3,
// seeded with the seed folded to 32 bits; deterministic for a seed.
func TestAudit30Murmur3Matches(t *testing.T) {
	seeds := []uint64{0, 1, 0xdeadbeef, 0xffffffff00000000, 0x123456789abcdef0}
	keys := [][]byte{nil, {}, []byte("a"), []byte("hello world"), make([]byte, 1000)}
	for _, seed := range seeds {
		h := grudge.Murmur3()(seed)
		h2 := grudge.Murmur3()(seed)
		fold := uint32(seed) ^ uint32(seed>>32)
		for _, k := range keys {
			want, _ := murmur3.Sum128WithSeed(k, fold)
			if got := h.Hash64(k); got != want {
				t.Errorf("seed %#x key %q: Murmur3 %#x, want first 64 bits of Sum128 %#x", seed, k, got, want)
			}
			if h.Hash64(k) != h2.Hash64(k) {
				t.Errorf("Murmur3 not deterministic for seed %#x", seed)
			}
		}
	}
	// SipHash is keyed: different seeds, different hashes; same seed, same.
	a, b, a2 := grudge.SipHash()(1), grudge.SipHash()(2), grudge.SipHash()(1)
	diff := 0
	for i := range 64 {
		k := []byte(fmt.Sprint(i))
		if a.Hash64(k) != a2.Hash64(k) {
			t.Fatalf("SipHash not deterministic")
		}
		if a.Hash64(k) != b.Hash64(k) {
			diff++
		}
	}
	if diff < 63 {
		t.Errorf("SipHash under two seeds agreed on %d of 64 keys", 64-diff)
	}
}
