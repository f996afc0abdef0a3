package sketch_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit92CoreStressGroupsExact: sketch/doc.go (TryUpdate "atomically
// with respect to every other TryUpdate of any key that shares cells with
// k") and docs/design.md ("Keys on different stripes"). L = 2, M = 2 and
// M = 3: ten keys on ten stripes, so some share both cells (a group),
// some one, some none; no decay, one millisecond, far bounds. Workers race
// TryUpdate(k, d, limit) round the keys while another adds Updates of
// its own key. Checked after: every cell holds exactly what the admitted
// calls and the Updates add up to (a denial leaves nothing: same
// millisecond, below Hi, no negative delta, so every roll-back is
// exact), and the keys of a group, which decide on the same two cells,
// were admitted at most limit in total. Sizes are small enough that a
// fixed schedule-independent check holds on every architecture.
func TestAudit92CoreStressGroupsExact(t *testing.T) {
	workers, attempts := 4, 300
	if testsize.Race {
		attempts = 100
	}
	for _, m := range []uint32{2, 3} {
		for _, d := range []float64{1, 0.5} {
			t.Run(fmt.Sprintf("m%d/d%v", m, d), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(5_000_000)
				s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: m, Lo: -1e6, Hi: 1e6, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				used := map[uint64]bool{}
				var keys [][]byte
				for i := range 10 {
					keys = append(keys, a92coreFind(t, s, fmt.Sprintf("g%d", i), used, func([]uint32) bool { return true }))
				}
				u := a92coreFind(t, s, "u", used, func([]uint32) bool { return true })
				const limit = 40.0
				admitted := make([]atomic.Int64, len(keys))
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for a := range attempts {
							i := (w*3 + a) % len(keys)
							if s.TryUpdate(keys[i], d, limit) {
								admitted[i].Add(1)
							}
						}
					})
				}
				const updates = 25
				wg.Go(func() {
					for range updates {
						s.Update(u, 1)
					}
				})
				wg.Wait()
				want := []map[uint32]float64{{}, {}}
				group := map[[2]uint32]float64{}
				for i, k := range keys {
					c := a92coreCells(s, k)
					n := float64(admitted[i].Load()) * d
					want[0][c[0]] += n
					want[1][c[1]] += n
					group[[2]uint32{c[0], c[1]}] += n
				}
				cu := a92coreCells(s, u)
				want[0][cu[0]] += updates
				want[1][cu[1]] += updates
				for i, k := range append(append([][]byte{}, keys...), u) {
					for _, lv := range s.QueryDetailed(k).Levels {
						if lv.Score != want[lv.Level][lv.Index] {
							t.Errorf("key %d level %d cell %d = %v, want exactly %v (the admitted calls and Updates on it)", i, lv.Level, lv.Index, lv.Score, want[lv.Level][lv.Index])
						}
					}
				}
				for g, n := range group {
					if n > limit {
						t.Errorf("keys on cells %v were admitted %v in total, over the limit %v", g, n, limit)
					}
				}
			})
		}
	}
}

// TestAudit92CoreStressMixedSignNeverBelowSum: with negative deltas the
// roll-back gives a negative increment back always and never takes
// another key's mass (sketch/doc.go, "Roll-backs ... A negative
// increment ... is always given back"); positive ones may stay (an
// over-estimate). So with bounds far enough that no clamp cuts, every
// cell ends at or above exactly what the admitted calls and Updates add
// up to, in one millisecond with no decay.
func TestAudit92CoreStressMixedSignNeverBelowSum(t *testing.T) {
	workers, attempts := 4, 300
	if testsize.Race {
		attempts = 100
	}
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000_000)
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 2, Lo: -1e6, Hi: 1e6, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint64]bool{}
	var keys [][]byte
	for i := range 8 {
		keys = append(keys, a92coreFind(t, s, fmt.Sprintf("ms%d", i), used, func([]uint32) bool { return true }))
	}
	deltas := []float64{1, -1, 2, -0.5, 1, -2, 0.25, 3}
	limits := []float64{20, 5, 30, 0, 25, 10, 12, 40}
	admitted := make([]atomic.Int64, len(keys))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for a := range attempts {
				i := (w*5 + a) % len(keys)
				if s.TryUpdate(keys[i], deltas[i], limits[i]) {
					admitted[i].Add(1)
				}
			}
		})
	}
	u := a92coreFind(t, s, "msu", used, func([]uint32) bool { return true })
	wg.Go(func() {
		for i := range 60 {
			s.Update(u, float64(i%3)-1) // -1, 0, 1
		}
	})
	wg.Wait()
	want := []map[uint32]float64{{}, {}, {}}
	for i, k := range keys {
		for l, c := range a92coreCells(s, k) {
			want[l][c] += float64(admitted[i].Load()) * deltas[i]
		}
	}
	// u's 60 Updates add up to 0.
	for i, k := range append(append([][]byte{}, keys...), u) {
		for _, lv := range s.QueryDetailed(k).Levels {
			if lv.Score < want[lv.Level][lv.Index] {
				t.Errorf("key %d level %d cell %d = %v, below the %v the admitted calls and Updates add up to", i, lv.Level, lv.Index, lv.Score, want[lv.Level][lv.Index])
			}
		}
	}
}

// TestAudit92CoreDeniedWritesNothing: sketch/doc.go, "Query and a denied
// TryUpdate only read", and core's TryUpdate ("A denial writes nothing,
// except after a commit conflict"). For cells in many states (fresh, at
// Hi, at Lo, at a Hi no float32 holds, decayed for an idle gap the
// denial reads across), every aggregator and law, positive and negative
// deltas, a denied TryUpdate (and its String and At forms) leaves the
// snapshot bytes, every level's score and the key's stripe sequence
// exactly as they were. The idle gaps stay far below the horizon sweep.
func TestAudit92CoreDeniedWritesNothing(t *testing.T) {
	laws := map[string]decay.Decay{"none": decay.None(), "linear": decay.Linear(0.5), "exp": decay.Exponential(0.3)}
	aggs := map[string]sketch.Config{
		"min":  {},
		"max":  {Aggregator: sketch.Max},
		"mean": {Aggregator: sketch.Mean},
		"func": {AggregateFunc: func(v []float64) float64 { return v[0] + v[len(v)-1] }},
	}
	type prep struct {
		name string
		do   func(s *sketch.Sketch, k []byte)
	}
	preps := []prep{
		{"fresh", func(*sketch.Sketch, []byte) {}},
		{"some", func(s *sketch.Sketch, k []byte) { s.Update(k, 3.7) }},
		{"hi", func(s *sketch.Sketch, k []byte) { s.Update(k, 1e9) }},
		{"lo", func(s *sketch.Sketch, k []byte) { s.Update(k, -1e9) }},
	}
	for ln, lw := range laws {
		for an, ac := range aggs {
			for _, hi := range []float64{10, 0.1} {
				for _, pr := range preps {
					for _, gap := range []time.Duration{0, time.Millisecond, 1500 * time.Millisecond} {
						t.Run(fmt.Sprintf("%s/%s/hi%v/%s/gap%v", ln, an, hi, pr.name, gap), func(t *testing.T) {
							clk := sketchtest.NewFakeClock()
							clk.Set(9_000_000)
							cfg := ac
							cfg.Levels, cfg.CellsPerLevel, cfg.Lo, cfg.Hi, cfg.Decay, cfg.Clock = 3, 16, -5, hi, lw, clk
							s, err := sketch.New(cfg)
							if err != nil {
								t.Fatal(err)
							}
							k := []byte("deny-me")
							s.Update([]byte("other"), 2)
							pr.do(s, k)
							clk.Advance(gap)
							before, err := s.MarshalBinary()
							if err != nil {
								t.Fatal(err)
							}
							seq := core.StripeSeq(core.SketchOf(s), k)
							levels := s.QueryDetailed(k).Levels
							est := s.Query(k)
							// Denials: a positive delta over any limit the estimate
							// leaves no room for, and a negative one below it.
							denials := []struct{ d, lim float64 }{
								{1, est}, {1, est + 0.5}, {0.5, -1e9}, {1e-30, est - 1}, {-1, est - 2}, {-0.25, -1e12},
							}
							for _, dn := range denials {
								if est+dn.d <= dn.lim {
									continue // not a denial at this estimate
								}
								if s.TryUpdate(k, dn.d, dn.lim) {
									t.Errorf("TryUpdate(k, %v, %v) admitted on an estimate of %v", dn.d, dn.lim, est)
								}
								if s.TryUpdateString(string(k), dn.d, dn.lim) {
									t.Errorf("TryUpdateString(k, %v, %v) admitted on an estimate of %v", dn.d, dn.lim, est)
								}
								if s.TryUpdateAt(clk.Now(), string(k), dn.d, dn.lim) {
									t.Errorf("TryUpdateAt(now, k, %v, %v) admitted on an estimate of %v", dn.d, dn.lim, est)
								}
							}
							after, err := s.MarshalBinary()
							if err != nil {
								t.Fatal(err)
							}
							if !bytes.Equal(before, after) {
								t.Errorf("denied TryUpdates changed the snapshot bytes (estimate %v, levels %+v -> %+v)", est, levels, s.QueryDetailed(k).Levels)
							}
							if got := core.StripeSeq(core.SketchOf(s), k); got != seq {
								t.Errorf("denied TryUpdates moved the stripe sequence from %d to %d", seq, got)
							}
						})
					}
				}
			}
		}
	}
}

// TestAudit92CoreNonFiniteNeverTouches: sketch/doc.go, "NaN or ±Inf delta
// or limit panics with a message that starts "sketch:" before any cell
// is touched; no cell ever holds NaN or Inf". Every write form, on a key
// at Hi, at Lo and in between: the panic's text, and the snapshot bytes
// unchanged.
func TestAudit92CoreNonFiniteNeverTouches(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: -3, Hi: 7, Decay: decay.Exponential(0.1), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("hi"), 100)
	s.Update([]byte("lo"), -100)
	s.Update([]byte("mid"), 1.5)
	clk.Advance(20 * time.Millisecond)
	mustPanic := func(what string, f func()) {
		t.Helper()
		before, _ := s.MarshalBinary()
		func() {
			defer func() {
				r := recover()
				msg := fmt.Sprint(r)
				if r == nil || !strings.HasPrefix(msg, "sketch:") {
					t.Errorf("%s: recovered %q, want a panic starting \"sketch:\"", what, msg)
				}
			}()
			f()
		}()
		if after, _ := s.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("%s changed the cells before panicking", what)
		}
	}
	for _, key := range []string{"hi", "lo", "mid"} {
		k := []byte(key)
		for _, v := range bad {
			mustPanic(fmt.Sprintf("Update(%s, %v)", key, v), func() { s.Update(k, v) })
			mustPanic(fmt.Sprintf("UpdateString(%s, %v)", key, v), func() { s.UpdateString(key, v) })
			mustPanic(fmt.Sprintf("UpdateAt(%s, %v)", key, v), func() { s.UpdateAt(clk.Now(), key, v) })
			mustPanic(fmt.Sprintf("UpdateAndQuery(%s, %v)", key, v), func() { s.UpdateAndQuery(k, v) })
			mustPanic(fmt.Sprintf("UpdateAndQueryString(%s, %v)", key, v), func() { s.UpdateAndQueryString(key, v) })
			mustPanic(fmt.Sprintf("UpdateAndQueryAt(%s, %v)", key, v), func() { s.UpdateAndQueryAt(clk.Now(), key, v) })
			for _, fin := range []float64{0, 1, -1, 1e300} {
				mustPanic(fmt.Sprintf("TryUpdate(%s, %v, %v)", key, v, fin), func() { s.TryUpdate(k, v, fin) })
				mustPanic(fmt.Sprintf("TryUpdate(%s, %v, %v)", key, fin, v), func() { s.TryUpdate(k, fin, v) })
				mustPanic(fmt.Sprintf("TryUpdateString(%s, %v, %v)", key, fin, v), func() { s.TryUpdateString(key, fin, v) })
				mustPanic(fmt.Sprintf("TryUpdateAt(%s, %v, %v)", key, v, fin), func() { s.TryUpdateAt(clk.Now(), key, v, fin) })
			}
		}
		for _, lv := range s.QueryDetailed(k).Levels {
			if math.IsNaN(lv.Score) || math.IsInf(lv.Score, 0) {
				t.Errorf("%s level %d holds %v", key, lv.Level, lv.Score)
			}
		}
	}
}
