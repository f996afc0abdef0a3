package sketch_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Compile-time checks that both implementations are drop-in Scorers.
var (
	_ sketch.Scorer = (*sketch.Sketch)(nil)
	_ sketch.Scorer = (*ref.Sketch)(nil)
)

// forEachGOMAXPROCS runs f at GOMAXPROCS 1, 2, 4 and 8 (the suite's
// helper, sketchtest.ForEachGOMAXPROCS).
var forEachGOMAXPROCS = sketchtest.ForEachGOMAXPROCS

// fataler is what the helpers need of a test: a *testing.T or B, or a
// *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// mustNewSketch is sketch.New that fails t on an error.
func mustNewSketch(t fataler, cfg sketch.Config) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatalf("sketch.New(%+v): %v", cfg, err)
	}
	return s
}

// restoredAt is a sketch of cfg on a fake clock set to ms (Unix ms)
// that has read snap, failing t on an error.
func restoredAt(t fataler, cfg sketch.Config, snap []byte, ms int64) *sketch.Sketch {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(ms)
	cfg.Clock = clk
	s := mustNewSketch(t, cfg)
	if _, err := s.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatalf("restore at %d ms: %v", ms, err)
	}
	return s
}

func mustNewReference(t testing.TB, cfg sketch.Config) *ref.Sketch {
	t.Helper()
	r, err := ref.New(cfg)
	if err != nil {
		t.Fatalf("ref.New(%+v): %v", cfg, err)
	}
	return r
}

var allAggregators = []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean}

// TestTryUpdateCollisions races TryUpdates with per-key limits and
// positive Updates on 40 keys in a sketch of M=4 cells per level, where
// every key collides with many others at every level. No key may be
// admitted past its own limit, a key's estimate never falls below its own
// committed mass (cells only grow, and a rolled-back TryUpdate removes
// only its own increment), and at the end every cell holds at least the
// committed mass of the keys that map to it, and all cells together hold
// exactly that plus one increment per roll-back that could not be exact
// (counted by the Held hook): no increment lost or duplicated, and none
// left behind unaccounted.
func TestTryUpdateCollisions(t *testing.T) {
	const (
		nKeys      = 40
		goroutines = 8
	)
	opsPer, reps := 400, 3
	if testing.Short() {
		opsPer, reps = 100, 1
	}
	keys := make([][]byte, nKeys)
	limits := make([]float64, nKeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "collide-%d", i)
		limits[i] = float64(20 + 15*i)
	}
	for _, agg := range allAggregators {
		for levels := uint32(2); levels <= 4; levels++ {
			t.Run(fmt.Sprintf("agg=%v/L=%d", agg, levels), func(t *testing.T) {
				forEachGOMAXPROCS(t, func(t *testing.T) {
					for rep := range reps {
						cfg := sketch.Config{Levels: levels, CellsPerLevel: 4, Hi: 1e9, Aggregator: agg, Seed: uint64(rep)}
						s := mustNewSketch(t, cfg)
						var held atomic.Int64
						core.SetHooks(core.SketchOf(s), core.Hooks{Held: func(uint32) { held.Add(1) }})
						var admitted, updated [nKeys]atomic.Int64
						var violation atomic.Value
						start := make(chan struct{})
						var wg sync.WaitGroup
						for g := range goroutines {
							wg.Go(func() {
								rng := rand.New(rand.NewPCG(uint64(rep), uint64(g)))
								<-start
								for range opsPer {
									k := rng.IntN(nKeys)
									switch r := rng.IntN(10); {
									case r == 0:
										d := 1 + rng.IntN(2)
										s.Update(keys[k], float64(d))
										updated[k].Add(int64(d))
									case r <= 2:
										// Counters are bumped after the op returns, so
										// everything counted here has fully committed.
										own := admitted[k].Load() + updated[k].Load()
										if q := s.Query(keys[k]); q < float64(own) {
											violation.CompareAndSwap(nil, fmt.Sprintf("Query(key %d) = %v < committed mass %d", k, q, own))
										}
									default:
										if s.TryUpdate(keys[k], 1, limits[k]) {
											admitted[k].Add(1)
										}
									}
								}
							})
						}
						close(start)
						wg.Wait()
						if v := violation.Load(); v != nil {
							t.Fatalf("rep %d: %v", rep, v)
						}
						// want[l][i] is the committed mass of the keys that own cell i
						// of level l.
						want := make([][4]float64, levels)
						details := make([]sketch.Detail, nKeys)
						for k := range keys {
							details[k] = s.QueryDetailed(keys[k])
							mass := float64(admitted[k].Load() + updated[k].Load())
							for _, lv := range details[k].Levels {
								want[lv.Level][lv.Index] += mass
							}
						}
						seen := map[[2]uint32]bool{}
						var extra float64
						for k := range keys {
							for _, lv := range details[k].Levels {
								if c := [2]uint32{lv.Level, lv.Index}; !seen[c] {
									seen[c] = true
									extra += lv.Score - want[lv.Level][lv.Index]
								}
							}
						}
						if extra != float64(held.Load()) {
							t.Fatalf("rep %d: the cells hold %v beyond the committed mass; %d roll-backs kept their increment", rep, extra, held.Load())
						}
						for k := range keys {
							a := float64(admitted[k].Load())
							if a > limits[k] {
								t.Fatalf("rep %d: key %d admitted %v times past its limit %v", rep, k, a, limits[k])
							}
							if q := s.Query(keys[k]); q < a {
								t.Fatalf("rep %d: Query(key %d) = %v < admitted %v", rep, k, q, a)
							}
							for _, lv := range details[k].Levels {
								if lv.Score < want[lv.Level][lv.Index] {
									t.Fatalf("rep %d: cell (%d, %d) holds %v, below the committed mass %v", rep, lv.Level, lv.Index, lv.Score, want[lv.Level][lv.Index])
								}
							}
						}
					}
				})
			})
		}
	}
}

var drainingDecays = []struct {
	name string
	law  decay.Decay
}{
	{"Linear", decay.Linear(1)},
	{"Exponential", decay.Exponential(0.1)},
}

// TestClockJump50Days moves the clock 50 days forward, past the 2^32 ms
// stamp wrap: scores stay finite, non-negative and never grow, and every
// operation keeps working.
func TestClockJump50Days(t *testing.T) {
	laws := append([]struct {
		name string
		law  decay.Decay
	}{{"None", decay.None()}}, drainingDecays...)
	for _, law := range laws {
		t.Run("decay="+law.name, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			s := mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 256, Hi: 1e6, Decay: law.law, Clock: fc})
			keys := make([][]byte, 20)
			before := make([]float64, len(keys))
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "jump-%d", i)
				s.Update(keys[i], float64(1+i*1000))
				before[i] = s.Query(keys[i])
			}
			fc.Advance(50 * 24 * time.Hour)
			for i, k := range keys {
				for _, lv := range s.QueryDetailed(k).Levels {
					if math.IsNaN(lv.Score) || math.IsInf(lv.Score, 0) || lv.Score < 0 {
						t.Fatalf("key %d level %d: score %v after the jump", i, lv.Level, lv.Score)
					}
				}
				if q := s.Query(k); q > before[i] {
					t.Fatalf("key %d: score grew over the jump: %v -> %v", i, before[i], q)
				}
			}
			k := []byte("after-jump")
			s.Update(k, 5)
			if q := s.Query(k); !(q >= 5 && q < 1e6) {
				t.Fatalf("Update(5) after the jump: Query = %v", q)
			}
			if !s.TryUpdate(k, 1, 1e6) {
				t.Fatal("TryUpdate denied after the jump with a huge limit")
			}
			if s.TryUpdate(k, 1, 0) {
				t.Fatal("TryUpdate admitted after the jump with limit 0")
			}
			fc.Advance(time.Second)
			if q := s.UpdateAndQuery(k, 1); math.IsNaN(q) || math.IsInf(q, 0) || q < 1 {
				t.Fatalf("UpdateAndQuery after the jump: %v", q)
			}
		})
	}
}

// TestClamp: no number of updates pushes a score past Hi or below Lo.
func TestClamp(t *testing.T) {
	// Bounds that are float32 values are enforced exactly.
	s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 16, Lo: -50, Hi: 100})
	key := []byte("clamped")
	for i := range 1000 {
		if q := s.UpdateAndQuery(key, 7); q > 100 {
			t.Fatalf("update %d: UpdateAndQuery = %v > Hi", i, q)
		}
	}
	for _, lv := range s.QueryDetailed(key).Levels {
		if lv.Score != 100 {
			t.Fatalf("level %d: %v, want Hi = 100", lv.Level, lv.Score)
		}
	}
	for i := range 1000 {
		if q := s.UpdateAndQuery(key, -3); q < -50 {
			t.Fatalf("update %d: UpdateAndQuery = %v < Lo", i, q)
		}
	}
	for _, lv := range s.QueryDetailed(key).Levels {
		if lv.Score != -50 {
			t.Fatalf("level %d: %v, want Lo = -50", lv.Level, lv.Score)
		}
	}

	// Bounds that are not float32 values are rounded up to float32: the
	// score never drops below Lo, and exceeds Hi by less than one float32
	// ulp (documented in package atomiccell: no update loses mass).
	const lo, hi = -50.3, 100.1
	s = mustNewSketch(t, sketch.Config{Lo: lo, Hi: hi})
	for range 100 {
		s.Update(key, 7)
	}
	if q := s.Query(key); q < hi || q-hi > hi/(1<<23) {
		t.Fatalf("Hi = %v: score %v, want Hi rounded up to float32", hi, q)
	}
	for range 100 {
		s.Update(key, -7)
	}
	if q := s.Query(key); q < lo || q-lo > -lo/(1<<23) {
		t.Fatalf("Lo = %v: score %v, want Lo rounded up to float32", lo, q)
	}
}

// TestInfiniteBoundsNeverStoreInf: with Hi = +Inf (or Lo = -Inf) and a
// draining decay, huge deltas saturate at ±MaxFloat32 instead of storing
// an infinity.
func TestInfiniteBoundsNeverStoreInf(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 32, Lo: math.Inf(-1), Hi: math.Inf(1), Decay: decay.Exponential(1), Clock: fc})
	finite := func(what string, v float64) {
		t.Helper()
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
			t.Fatalf("%s = %v, want finite and within ±MaxFloat32", what, v)
		}
	}
	up, down := []byte("up"), []byte("down")
	for i := range 20 {
		s.Update(up, math.MaxFloat64)
		finite("UpdateAndQuery(+1e308)", s.UpdateAndQuery(up, 1e308))
		s.TryUpdate(up, math.MaxFloat64, math.MaxFloat32) // the largest limit Hi=+Inf takes
		s.Update(down, -math.MaxFloat64)
		finite("UpdateAndQuery(-1e308)", s.UpdateAndQuery(down, -1e308))
		if i%5 == 0 {
			fc.Advance(time.Millisecond)
		}
	}
	for _, k := range [][]byte{up, down} {
		d := s.QueryDetailed(k)
		finite("Score", d.Score)
		for _, lv := range d.Levels {
			finite(fmt.Sprintf("%s level %d", k, lv.Level), lv.Score)
		}
	}
	if q := s.Query(up); q != math.MaxFloat32 {
		t.Fatalf("Query(up) = %v, want MaxFloat32", q)
	}
	if q := s.Query(down); q != -math.MaxFloat32 {
		t.Fatalf("Query(down) = %v, want -MaxFloat32", q)
	}
}

// TestConfigNormalized: Config returns the normalized configuration.
func TestConfigNormalized(t *testing.T) {
	s := mustNewSketch(t, sketch.Config{Hi: 1})
	got := s.Config()
	if got.Levels != sketch.DefaultLevels || got.CellsPerLevel != sketch.DefaultCellsPerLevel ||
		got.Decay != decay.None() || got.Hasher == nil || got.Aggregator != sketch.Min ||
		got.Clock != nil || got.Lo != 0 || got.Hi != 1 || got.Seed != 0 {
		t.Fatalf("Config() = %+v, want the defaults filled in", got)
	}
	_, norm, err := conv.Normalize(sketch.Config{Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got.Levels != norm.Levels || got.CellsPerLevel != norm.CellsPerLevel || got.Decay != norm.Decay {
		t.Fatalf("Config() = %+v, Normalize() = %+v", got, norm)
	}

	fc := sketchtest.NewFakeClock()
	in := sketch.Config{Levels: 3, CellsPerLevel: 17, Decay: decay.Linear(2), Lo: -5, Hi: 7,
		Aggregator: sketch.Mean, Hasher: sketch.SipHash(), Seed: 42, Clock: fc}
	got = mustNewSketch(t, in).Config()
	if got.Levels != 3 || got.CellsPerLevel != 17 || got.Decay != decay.Linear(2) || got.Lo != -5 ||
		got.Hi != 7 || got.Aggregator != sketch.Mean || got.Seed != 42 || got.Clock != sketch.Clock(fc) {
		t.Fatalf("Config() = %+v, want %+v", got, in)
	}
	if got.Hasher(42).Sum64String("x") != sketch.SipHash()(42).Sum64String("x") {
		t.Fatal("Config().Hasher is not the SipHash factory given")
	}

	bad := []sketch.Config{
		{Levels: 9, Hi: 1},
		{CellsPerLevel: sketch.MaxCellsPerLevel + 1, Hi: 1},
		{Lo: 1, Hi: 2},
		{Hi: -1},
		{Lo: 0, Hi: 0},
		{Hi: math.NaN()},
		{Hi: math.Inf(1)},
		{Lo: math.Inf(-1), Hi: 1},
		{Hi: 1, Aggregator: 7},
		{Hi: 1, Decay: decay.Linear(0)},
		{Hi: 1, Decay: decay.Exponential(math.NaN())},
	}
	for _, cfg := range bad {
		if _, err := sketch.New(cfg); err == nil || !strings.HasPrefix(err.Error(), "sketch: ") {
			t.Errorf("New(%+v) = %v, want an error starting \"sketch: \"", cfg, err)
		}
	}
}

// TestSizes: at the default shape (L=4, M=100k) the lock-free sketch takes
// at most 1/2.5 of the reference's memory (8-byte cells against 24).
func TestSizes(t *testing.T) {
	cfg := sketch.Config{Levels: 4, CellsPerLevel: 100_000, Hi: 1}
	lf := mustNewSketch(t, cfg).Sizes()
	ref := mustNewReference(t, cfg).Sizes()
	t.Logf("L=4 M=100000: lock-free Cells=%d Total=%d; reference Cells=%d Total=%d; ratio Total %.2f",
		lf.Cells, lf.Total, ref.Cells, ref.Total, float64(ref.Total)/float64(lf.Total))
	if lf.Cells < 4*100_000*8 || lf.Total < lf.Cells {
		t.Fatalf("lock-free Sizes %+v smaller than its cells", lf)
	}
	if float64(lf.Total)*2.5 > float64(ref.Total) || float64(lf.Cells)*2.5 > float64(ref.Cells) {
		t.Fatalf("lock-free %+v is more than 1/2.5 of reference %+v", lf, ref)
	}
}

// TestQueryDetailedMatchesIndex: QueryDetailed reports, per level, the
// cell sketch.Index picks for the key's hash, and its aggregate is Query's.
func TestQueryDetailedMatchesIndex(t *testing.T) {
	for _, hf := range []struct {
		name string
		f    sketch.HasherFactory
	}{{"XXH3", sketch.XXH3()}, {"SipHash", sketch.SipHash()}} {
		for _, m := range []uint32{1, 3, 64, 100_003} {
			for _, agg := range allAggregators {
				cfg := sketch.Config{Levels: 5, CellsPerLevel: m, Hi: 1e9, Hasher: hf.f, Seed: uint64(m) * 7, Aggregator: agg}
				s := mustNewSketch(t, cfg)
				h := hf.f(cfg.Seed)
				for i := range 50 {
					key := fmt.Appendf(nil, "detail-%d", i)
					s.Update(key, float64(i))
					d := s.QueryDetailed(key)
					if len(d.Levels) != 5 {
						t.Fatalf("%d levels, want 5", len(d.Levels))
					}
					hash := h.Sum64(key)
					scores := make([]float64, 0, 5)
					for l, lv := range d.Levels {
						if lv.Level != uint32(l) || lv.Index != core.Index(hash, uint32(l), m) || lv.Index >= m {
							t.Fatalf("%s M=%d key %q level %d: got (%d, %d), want (%d, %d)",
								hf.name, m, key, l, lv.Level, lv.Index, l, core.Index(hash, uint32(l), m))
						}
						scores = append(scores, lv.Score)
					}
					if q := s.Query(key); d.Score != q || d.Score != core.Aggregator(agg).Aggregate(scores) {
						t.Fatalf("Detail.Score %v, Query %v, aggregate of levels %v", d.Score, q, core.Aggregator(agg).Aggregate(scores))
					}
				}
			}
		}
	}
}

// TestStringTwins: the string entry points address the same cells and do
// the same arithmetic as the []byte ones.
func TestStringTwins(t *testing.T) {
	for _, hf := range []sketch.HasherFactory{sketch.XXH3(), sketch.SipHash()} {
		a := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Hi: 1e9, Hasher: hf, Seed: 99})
		b := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Hi: 1e9, Hasher: hf, Seed: 99})
		for i := range 200 {
			ks := fmt.Sprintf("twin-%d", i%13)
			kb := []byte(ks)
			d := float64(i%5) + 0.25
			var x, y float64
			switch i % 4 {
			case 0:
				a.Update(kb, d)
				b.UpdateString(ks, d)
			case 1:
				x, y = a.UpdateAndQuery(kb, d), b.UpdateAndQueryString(ks, d)
			case 2:
				x, y = a.Query(kb), b.QueryString(ks)
			case 3:
				if a.TryUpdate(kb, d, 40) != b.TryUpdateString(ks, d, 40) {
					t.Fatalf("op %d: TryUpdate and TryUpdateString disagree", i)
				}
			}
			if x != y {
				t.Fatalf("op %d: []byte %v, string %v", i, x, y)
			}
		}
	}
}

// TestScorerSwap drives both implementations through the Scorer interface
// only: with no decay and integer deltas they agree exactly.
func TestScorerSwap(t *testing.T) {
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 1e6, Clock: sketchtest.NewFakeClock()}
	scorers := []sketch.Scorer{mustNewSketch(t, cfg), mustNewReference(t, cfg)}
	for i := range 300 {
		key := fmt.Appendf(nil, "swap-%d", i%11)
		var got [2]any
		for j, s := range scorers {
			switch i % 5 {
			case 0:
				s.Update(key, float64(i%7))
			case 1:
				got[j] = s.Query(key)
			case 2:
				got[j] = s.UpdateAndQuery(key, 2)
			case 3:
				got[j] = s.TryUpdate(key, 3, 150)
			case 4:
				got[j] = s.QueryDetailed(key)
			}
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Fatalf("op %d: lock-free %+v, reference %+v", i, got[0], got[1])
		}
	}
}
