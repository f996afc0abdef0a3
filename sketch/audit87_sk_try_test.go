package sketch_test

import (
	"fmt"
	"math"
	"math/big"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a87Race runs f(g, i) for i < per in each of n goroutines, all started
// together.
func a87Race(n, per int, f func(g, i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range per {
				f(g, i)
				if i%16 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	close(start)
	wg.Wait()
}

// TestAudit87SkTryExactOneKey: API.md, "N goroutines racing TryUpdate(k,
// 1, 1000) with no decay admit exactly 1000, every run", for 1 to 8
// levels, each aggregator (and a custom AggregateFunc), and GOMAXPROCS 1, 2, 4, 8 (set in the test),
// through TryUpdate and TryUpdateString; 8 goroutines try 2000 times in
// all. The key then reads exactly 1000, every level holds 1000, and one
// more call is denied.
func TestAudit87SkTryExactOneKey(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, levels := range []uint32{1, 3, 8} {
			for ai, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean, sketch.Min} {
				var fn func([]float64) float64
				if ai == 3 {
					fn = a87Median // the custom aggregator's slow path
				}
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				s, err := sketch.New(sketch.Config{Levels: levels, CellsPerLevel: 64, Hi: 1e9, Aggregator: agg, AggregateFunc: fn, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				var admitted atomic.Int64
				a87Race(8, 250, func(g, i int) {
					var ok bool
					if (g+i)%2 == 0 {
						ok = s.TryUpdate([]byte("k"), 1, 1000)
					} else {
						ok = s.TryUpdateString("k", 1, 1000)
					}
					if ok {
						admitted.Add(1)
					}
				})
				if n := admitted.Load(); n != 1000 {
					t.Errorf("L=%d %v: %d admitted, want exactly 1000", levels, agg, n)
				}
				det := s.QueryDetailed([]byte("k"))
				if det.Score != 1000 {
					t.Errorf("L=%d %v: key reads %v, want 1000", levels, agg, det.Score)
				}
				for _, l := range det.Levels {
					if l.Score != 1000 {
						t.Errorf("L=%d %v: level %d holds %v, want 1000", levels, agg, l.Level, l.Score)
					}
				}
				if s.TryUpdate([]byte("k"), 1, 1000) {
					t.Errorf("L=%d %v: admitted past the limit", levels, agg)
				}
			}
		}
	})
}

// TestAudit87SkTryAllColliding: API.md, "with every key colliding
// (CellsPerLevel=1) the total admitted over all keys never exceeds the
// limit". Each goroutine uses its own keys (so their TryUpdates run on
// different stripes and conflict in the cells), integer deltas 1 to 3,
// no decay, GOMAXPROCS 1 to 8: the admitted total is at most the limit,
// the cells hold exactly the admitted total (the roll-backs of commit
// conflicts are exact: same millisecond, no negative delta, below Hi),
// and a sequential fill with delta 1 then reaches the limit exactly.
func TestAudit87SkTryAllColliding(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, levels := range []uint32{1, 2, 4, 8} {
			const limit = 600
			clk := sketchtest.NewFakeClock()
			clk.Set(42)
			s, err := sketch.New(sketch.Config{Levels: levels, CellsPerLevel: 1, Hi: 1e9, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			var total atomic.Int64
			a87Race(8, 200, func(g, i int) {
				key := fmt.Sprintf("g%d-k%d", g, i%7)
				d := int64(1 + (g+i)%3)
				if s.TryUpdateString(key, float64(d), limit) {
					total.Add(d)
				}
			})
			got := total.Load()
			if got > limit {
				t.Errorf("L=%d: %d admitted in all, above the limit %d", levels, got, limit)
			}
			det := s.QueryDetailed([]byte("any"))
			for _, l := range det.Levels {
				if l.Score != float64(got) {
					t.Errorf("L=%d: level %d holds %v, want the admitted total %d", levels, l.Level, l.Score, got)
				}
			}
			for i := 0; s.TryUpdateString(fmt.Sprintf("fill-%d", i), 1, limit); i++ {
				got++
			}
			if got != limit {
				t.Errorf("L=%d: the fill stopped at %d, want exactly %d", levels, got, limit)
			}
			if q := s.QueryString("x"); q != limit {
				t.Errorf("L=%d: a key reads %v after the fill, want %d", levels, q, limit)
			}
		}
	})
}

// TestAudit87SkTryFractionalColliding: fractional deltas (0.1, 0.25,
// 0.3), which float32 cannot all hold, every key colliding, racing:
// the exact sum of the admitted deltas (a rational) is at most the limit
// (each admission is aggregate + delta <= limit on an aggregate at or
// above it), and no key reads below it (doc.go: "Every add stores the
// least float32 at or above the exact sum").
func TestAudit87SkTryFractionalColliding(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, levels := range []uint32{1, 4} {
			const limit = 50.0
			clk := sketchtest.NewFakeClock()
			s, err := sketch.New(sketch.Config{Levels: levels, CellsPerLevel: 1, Hi: 1e6, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			deltas := []float64{0.1, 0.25, 0.3}
			var counts [8][3]int64
			a87Race(8, 150, func(g, i int) {
				j := (g + i) % 3
				if s.TryUpdateString(fmt.Sprintf("f%d", g), deltas[j], limit) {
					counts[g][j]++
				}
			})
			sum := new(big.Rat)
			for g := range counts {
				for j, d := range deltas {
					sum.Add(sum, new(big.Rat).Mul(new(big.Rat).SetFloat64(d), big.NewRat(counts[g][j], 1)))
				}
			}
			if sum.Cmp(new(big.Rat).SetFloat64(limit)) > 0 {
				f, _ := sum.Float64()
				t.Errorf("L=%d: exact admitted sum %v above the limit %v", levels, f, limit)
			}
			q := s.QueryString("any")
			if new(big.Rat).SetFloat64(q).Cmp(sum) < 0 {
				f, _ := sum.Float64()
				t.Errorf("L=%d: a key reads %.10g, below the exact admitted sum %.10g", levels, q, f)
			}
			if f, _ := sum.Float64(); f < limit-1 {
				t.Errorf("L=%d: only %.10g admitted of %v after 1200 tries", levels, f, limit)
			}
		}
	})
}

// TestAudit87SkTryLimitAboveHi: API.md, "Any finite limit is accepted, as
// in grudge: the decision is aggregate + delta <= limit even when limit >
// Hi (scores stay clamped at Hi)": racing TryUpdate(k, 1, 1000) on Hi =
// 50 admits every call, and the key reads 50.
func TestAudit87SkTryLimitAboveHi(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		s, err := sketch.New(sketch.Config{Levels: 4, CellsPerLevel: 16, Hi: 50, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		var admitted atomic.Int64
		a87Race(4, 100, func(_, _ int) {
			if s.TryUpdateString("k", 1, 1000) {
				admitted.Add(1)
			}
		})
		if n := admitted.Load(); n != 400 {
			t.Errorf("%d of 400 admitted under a limit above Hi", n)
		}
		if q := s.QueryString("k"); q != 50 {
			t.Errorf("key reads %v, want Hi 50", q)
		}
		if !s.TryUpdateString("k", 950, 1000) || s.TryUpdateString("k", 950.5, 1000) {
			t.Errorf("at Hi 50 with limit 1000: TryUpdate(950) must admit and TryUpdate(950.5) deny")
		}
	})
}

// TestAudit87SkTryNegativeRacing: negative deltas racing admissions.
// One key: TryUpdate(k, +1, 100) and TryUpdate(k, -1, +big) share the
// key's stripe, so with Lo far below the key reads exactly admitted(+1)
// - admitted(-1) afterwards. Every key colliding, with Update(-1) from
// outside the stripes too: no read below the exact sum of everything
// applied (a roll-back after a negative write is exact or keeps the
// increment, doc.go "Roll-backs"), and no more above it than the calls
// denied (each keeps at most its own increment).
func TestAudit87SkTryNegativeRacing(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		s, err := sketch.New(sketch.Config{Levels: 4, CellsPerLevel: 64, Lo: -1e6, Hi: 1e6, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		var net atomic.Int64
		a87Race(6, 200, func(g, i int) {
			if g%2 == 0 {
				if s.TryUpdateString("k", 1, 100) {
					net.Add(1)
				}
			} else if i%3 == 0 && s.TryUpdateString("k", -1, math.MaxFloat64) {
				net.Add(-1)
			}
		})
		if q := s.QueryString("k"); q != float64(net.Load()) || q > 100 {
			t.Errorf("one key: reads %v, want the admitted net %d (at most 100)", q, net.Load())
		}

		c, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 1, Lo: -1e6, Hi: 1e6, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		var sum, denied, negDenied atomic.Int64
		a87Race(6, 200, func(g, i int) {
			switch {
			case g == 0 && i%2 == 0:
				c.UpdateString("outside", -1)
				sum.Add(-1)
			case g%2 == 1 && i%4 == 0:
				if c.TryUpdateString(fmt.Sprintf("neg%d", g), -2, 1e6) {
					sum.Add(-2)
				} else {
					negDenied.Add(1)
				}
			default:
				if c.TryUpdateString(fmt.Sprintf("pos%d-%d", g, i%5), 1, 60) {
					sum.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
		if n := negDenied.Load(); n != 0 {
			t.Errorf("colliding: %d TryUpdate(-2, 1e6) denied on scores within [-1e6, 1e6]", n)
		}
		for _, l := range c.QueryDetailed([]byte("x")).Levels {
			if l.Score < float64(sum.Load()) || l.Score > float64(sum.Load()+denied.Load()) {
				t.Errorf("colliding: level %d holds %v; exact sum %d, denied increments %d", l.Level, l.Score, sum.Load(), denied.Load())
			}
		}
	})
}
