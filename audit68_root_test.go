package grudge_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/spaolacci/murmur3"
)

// a68HalfLife is a user's own Decay (halves every h ms); it composes over
// subdivisions of time, as Decay's doc requires.
type a68HalfLife struct{ h float64 }

func (l a68HalfLife) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return score * math.Exp2(-float64(dt)/l.h)
}

// a68SecondMin is a custom Aggregator: the second-smallest level score
// (the slow path).
func a68SecondMin(v []float64) float64 {
	a, b := math.Inf(1), math.Inf(1)
	for _, x := range v {
		if x < a {
			a, b = x, a
		} else if x < b {
			b = x
		}
	}
	if len(v) == 1 {
		return a
	}
	return b
}

// a68XorHasher is a user's Hasher (FNV-1a 64 mixed with the seed).
type a68XorHasher uint64

func (h a68XorHasher) Hash64(key []byte) uint64 {
	x := uint64(14695981039346656037) ^ uint64(h)
	for _, c := range key {
		x ^= uint64(c)
		x *= 1099511628211
	}
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	return x
}

// TestAudit68RootDifferentialReference runs random sequential operation
// sequences (Update, Query, UpdateAndQuery, TryUpdate, QueryDetailed)
// against the root package and the float64 mutex reference built from the
// root sketch's own configuration (same seed, same cells), under a
// grudgetest.FakeClock moved in whole ms, for every law (None, Exponential,
// Linear, a user's Decay), every aggregator (Min, Max, Mean, a user's),
// clamp ranges with negative Lo, and the three kinds of hasher. The
// promise (REFERENCE.md, root doc): switching from grudge is one import
// change; the root package keeps grudge's semantics with float32 cells
// rounded up. Every reading must agree with the reference to float32
// precision, TryUpdate's decisions must agree away from the boundary, and
// QueryDetailed's cell indices must be the reference's.
func TestAudit68RootDifferentialReference(t *testing.T) {
	testsize.Serial(t)
	laws := []struct {
		name string
		d    grudge.Decay
		inf  bool // drains: an infinite bound is allowed
	}{
		{"none", grudge.None, false},
		{"none()", grudge.None(), false},
		{"exp", grudge.Exponential(0.7), true},
		{"lin", grudge.Linear(4), true},
		{"custom", a68HalfLife{h: 1500}, false},
	}
	aggs := []struct {
		name string
		a    grudge.Aggregator
	}{{"min", grudge.Min}, {"max", grudge.Max}, {"mean", grudge.Mean}, {"secondmin", a68SecondMin}, {"nil", nil}}
	bounds := [][2]float64{{0, 100}, {-50, 50}, {-1e6, 0}, {0, math.Inf(1)}}
	hashers := []struct {
		name string
		h    grudge.HasherFactory
	}{{"default", nil}, {"murmur3", grudge.Murmur3()}, {"siphash", grudge.SipHash()},
		{"user", func(seed uint64) grudge.Hasher { return a68XorHasher(seed) }}}
	seed := uint64(0)
	for _, law := range laws {
		for _, ag := range aggs {
			for _, b := range bounds {
				if math.IsInf(b[1], 0) && !law.inf {
					continue
				}
				for _, hs := range hashers {
					seed++
					name := fmt.Sprintf("%s/%s/%v/%s", law.name, ag.name, b, hs.name)
					a68Diff(t, name, seed, grudge.Config{
						Levels: 3, CellsPerLevel: 11, Decay: law.d, Lo: b[0], Hi: b[1],
						Aggregator: ag.a, Hasher: hs.h,
					})
				}
			}
		}
	}
}

func a68Diff(t *testing.T, name string, seed uint64, cfg grudge.Config) {
	t.Helper()
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cfg.Clock = clk
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatalf("%s: New: %v", name, err)
	}
	ref, err := reference.New(s.Native().Config())
	if err != nil {
		t.Fatalf("%s: reference.New: %v", name, err)
	}
	rng := rand.New(rand.NewPCG(seed, 68))
	scale := 10.0
	if cfg.Hi-cfg.Lo > 1000 {
		scale = 1e4
	}
	close := func(a, b float64) bool {
		if a == b {
			return true
		}
		// float32 cells rounded up: 2^-23 relative per write, which
		// adds up over the writes of a cell; 1e-4 of the delta scale
		// covers a cell's share of the sequence.
		return math.Abs(a-b) <= 2e-5*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))+1e-4*scale
	}
	nonNeg := cfg.Lo >= 0
	for i := 0; i < 1500; i++ {
		if rng.IntN(4) == 0 {
			clk.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		key := []byte(fmt.Sprintf("k%d", rng.IntN(30)))
		d := math.Round(rng.Float64()*scale*100) / 100
		if !nonNeg && rng.IntN(2) == 0 {
			d = -d
		}
		switch rng.IntN(5) {
		case 0:
			s.Update(key, d)
			ref.Update(key, d)
		case 1:
			g, w := s.Query(key), ref.Query(key)
			if !close(g, w) || (nonNeg && cfg.Aggregator == nil && g < w-1e-12*math.Abs(w)) {
				t.Fatalf("%s op %d: Query(%s) = %v, reference %v", name, i, key, g, w)
			}
		case 2:
			g, w := s.UpdateAndQuery(key, d), ref.UpdateAndQuery(key, d)
			if !close(g, w) {
				t.Fatalf("%s op %d: UpdateAndQuery(%s, %v) = %v, reference %v", name, i, key, d, g, w)
			}
		case 3:
			cur := ref.Query(key)
			limit := cur + d + (rng.Float64()-0.5)*scale
			if math.Abs(cur+d-limit) < 1e-2*scale+1e-5*math.Abs(limit) {
				continue
			}
			g, w := s.TryUpdate(key, d, limit), ref.TryUpdate(key, d, limit)
			if g != w {
				t.Fatalf("%s op %d: TryUpdate(%s, %v, %v) = %v, reference %v (aggregate %v)", name, i, key, d, limit, g, w, cur)
			}
		case 4:
			g, w := s.QueryDetailed(key), ref.QueryDetailed(key)
			if !close(g.Aggregate, w.Score) || len(g.LevelScores) != len(w.Levels) {
				t.Fatalf("%s op %d: QueryDetailed(%s) aggregate %v, reference %v", name, i, key, g.Aggregate, w.Score)
			}
			for l, lv := range w.Levels {
				if g.CellIndexes[l] != lv.Index || !close(g.LevelScores[l], lv.Score) {
					t.Fatalf("%s op %d: level %d: cell %d score %v, reference cell %d score %v", name, i, l, g.CellIndexes[l], g.LevelScores[l], lv.Index, lv.Score)
				}
			}
		}
	}
}

// a68Gen is one generation of the model: exact float64 scores per key,
// each decayed lazily from its last access, as grudge's cells are.
type a68Gen map[string]*[2]float64 // score, last ms

// TestAudit68RootTickerRotatorModel drives a ticker-driven Rotator
// (grudgetest.FakeTicker) through random Update, Query, UpdateAndQuery,
// TryUpdate, ticks and clock moves (no collisions: M = 2^14, 6 keys),
// against a model of grudge's rotator (REFERENCE.md: "N generations ...
// reads the oldest, writes all, retires the oldest every Period via a
// background ticker"; the root doc: "one rotation per tick", "writes go
// to all, reads to the oldest"): every reading must be the model's, to
// float32 precision, for N = 2, 3 and 5 and three laws.
func TestAudit68RootTickerRotatorModel(t *testing.T) {
	laws := []struct {
		name string
		d    grudge.Decay
		f    func(s float64, dt int64) float64
	}{
		{"none", grudge.None, func(s float64, dt int64) float64 { return s }},
		{"exp", grudge.Exponential(0.5), func(s float64, dt int64) float64 { return s * math.Exp(-0.5*float64(dt)/1000) }},
		{"lin", grudge.Linear(3), func(s float64, dt int64) float64 { return math.Max(0, s-3*float64(dt)/1000) }},
	}
	for _, gens := range []uint32{2, 3, 5} {
		for li, law := range laws {
			clk := grudgetest.NewFakeClock()
			clk.Set(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
			tk := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch:      grudge.Config{Levels: 4, CellsPerLevel: 1 << 14, Decay: law.d, Hi: 1000, Clock: clk, Hasher: grudge.SipHash()},
				Generations: gens, Ticker: tk,
			})
			if err != nil {
				t.Fatal(err)
			}
			model := make([]a68Gen, gens)
			for i := range model {
				model[i] = a68Gen{}
			}
			nowMs := func() float64 { return float64(clk.NowMillis()) }
			read := func(g a68Gen, k string) float64 {
				c := g[k]
				if c == nil {
					return 0
				}
				return law.f(c[0], int64(nowMs()-c[1]))
			}
			write := func(g a68Gen, k string, d float64) {
				v := math.Min(1000, math.Max(0, read(g, k)+d))
				g[k] = &[2]float64{v, nowMs()}
			}
			rng := rand.New(rand.NewPCG(uint64(gens), uint64(li)))
			ticks := 0
			for i := 0; i < 1200; i++ {
				k := fmt.Sprintf("key%d", rng.IntN(6))
				d := float64(rng.IntN(50))
				tol := 1e-4 * math.Max(1, read(model[0], k))
				switch rng.IntN(8) {
				case 0:
					clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
				case 1:
					tk.Tick()
					ticks++
					model = append(model[1:], a68Gen{})
					if got := r.Rotations(); got != int64(ticks) {
						t.Fatalf("gens=%d %s op %d: Rotations %d after %d ticks", gens, law.name, i, got, ticks)
					}
				case 2:
					r.Update([]byte(k), d)
					for _, g := range model {
						write(g, k, d)
					}
				case 3:
					if got, want := r.Query([]byte(k)), read(model[0], k); math.Abs(got-want) > tol || got < want-1e-9 {
						t.Fatalf("gens=%d %s op %d (ticks %d): Query(%s) = %v, model %v", gens, law.name, i, ticks, k, got, want)
					}
				case 4:
					got := r.UpdateAndQuery([]byte(k), d)
					for _, g := range model {
						write(g, k, d)
					}
					if want := read(model[0], k); math.Abs(got-want) > tol || got < want-1e-9 {
						t.Fatalf("gens=%d %s op %d: UpdateAndQuery(%s, %v) = %v, model %v", gens, law.name, i, k, d, got, want)
					}
				case 5, 6:
					cur := read(model[0], k)
					limit := math.Round(cur+d+(rng.Float64()-0.5)*40) + 0.5
					if math.Abs(cur+d-limit) < 0.01 {
						continue
					}
					got := r.TryUpdate([]byte(k), d, limit)
					want := cur+d <= limit
					if got != want {
						t.Fatalf("gens=%d %s op %d: TryUpdate(%s, %v, %v) = %v, model %v (primary %v)", gens, law.name, i, k, d, limit, got, want, cur)
					}
					if want {
						for _, g := range model {
							write(g, k, d)
						}
					}
				case 7:
					res := r.QueryDetailed([]byte(k))
					if want := read(model[0], k); math.Abs(res.Aggregate-want) > tol {
						t.Fatalf("gens=%d %s op %d: QueryDetailed(%s) = %v, model %v", gens, law.name, i, k, res.Aggregate, want)
					}
				}
			}
			r.Close()
			if !tk.Stopped() {
				t.Errorf("Close did not stop the Ticker")
			}
			before := r.Rotations()
			tk.Tick() // after Close: no rotation
			r.Update([]byte("x"), 1)
			if got := r.Rotations(); got != before {
				t.Errorf("Rotations %d after Close and a Tick, want %d", got, before)
			}
		}
	}
}

// TestAudit68RootLazyRotatorModel: the lazy Rotator (no Ticker) rotates
// once per Period counted from NewRotator, whole ms rounded up ("2.9 ms is
// 3"), by the operation that finds the Period over, and a clock jump over
// k periods counts k. Random operation sequences against the same model
// of grudge's generations as above, with jumps of many periods.
func TestAudit68RootLazyRotatorModel(t *testing.T) {
	testsize.Serial(t)
	for _, gens := range []uint32{2, 3, 4} {
		for _, period := range []time.Duration{3 * time.Millisecond, 2900 * time.Microsecond, 250 * time.Millisecond} {
			pms := int64((period + time.Millisecond - 1) / time.Millisecond)
			clk := grudgetest.NewFakeClock()
			clk.Set(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
			start := clk.NowMillis()
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch:      grudge.Config{Levels: 4, CellsPerLevel: 1 << 14, Decay: grudge.Linear(100), Hi: 1000, Clock: clk, Hasher: grudge.SipHash()},
				Generations: gens, Period: period,
			})
			if err != nil {
				t.Fatal(err)
			}
			model := make([]a68Gen, gens)
			for i := range model {
				model[i] = a68Gen{}
			}
			rotations := int64(0)
			catchUp := func() {
				due := (clk.NowMillis() - start) / pms
				for ; rotations < due; rotations++ {
					model = append(model[1:], a68Gen{})
				}
			}
			now := func() float64 { return float64(clk.NowMillis()) }
			read := func(g a68Gen, k string) float64 {
				c := g[k]
				if c == nil {
					return 0
				}
				return math.Max(0, c[0]-100*(now()-c[1])/1000)
			}
			write := func(g a68Gen, k string, d float64) {
				g[k] = &[2]float64{math.Min(1000, read(g, k)+d), now()}
			}
			rng := rand.New(rand.NewPCG(uint64(gens), uint64(pms)))
			for i := 0; i < 1500; i++ {
				k := fmt.Sprintf("key%d", rng.IntN(5))
				d := float64(1 + rng.IntN(20))
				switch rng.IntN(5) {
				case 0:
					step := time.Duration(rng.Int64N(2*pms+1)) * time.Millisecond
					if rng.IntN(20) == 0 {
						step = time.Duration(rng.Int64N(int64(gens+3)*pms)) * time.Millisecond
					}
					clk.Advance(step)
				case 1:
					catchUp()
					if got := r.Rotations(); got != rotations {
						t.Fatalf("gens=%d period=%v op %d: Rotations %d, want %d", gens, period, i, got, rotations)
					}
				case 2:
					catchUp()
					r.Update([]byte(k), d)
					for _, g := range model {
						write(g, k, d)
					}
				case 3, 4:
					catchUp()
					got, want := r.Query([]byte(k)), read(model[0], k)
					if math.Abs(got-want) > 1e-3 || got < want-1e-9 {
						t.Fatalf("gens=%d period=%v op %d (rotations %d): Query(%s) = %v, model %v", gens, period, i, rotations, k, got, want)
					}
				}
			}
		}
	}
}

// TestAudit68FixedBackwardsStepNotGrudgeSemantics (fixed in the docs,
// stop 47: migrating.md's "Clock" now states the difference, time stands
// still for every cell after a step back; checked: 100, at or above
// grudge's 50). The audit quoted docs/migrating.md,
// "What is identical": "Semantics of every operation: decay applied
// lazily on access, before anything else; a backwards clock step counts
// as zero elapsed time". grudge keeps time per cell (REFERENCE.md: "Cell
// = {score float64, lastUpdated int64 (UnixMilli)}", "dt <= 0 (backwards
// clock) leaves the score unchanged"), so a cell first written after the
// clock stepped back is stamped at the earlier time and decays as the
// clock moves on from there. The root package holds the whole sketch at
// its high-water mark instead (internal/ref/doc.go says as much: "grudge
// keeps the step per cell ... the oracle must share its time
// semantics"), so the same program reads a different score: here 100
// where grudge reads 50 (Linear(10), 5 s after the write). The model
// below is grudge's per-cell rule as REFERENCE.md states it.
func TestAudit68FixedBackwardsStepNotGrudgeSemantics(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	clk.Set(t0)
	s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 1 << 12, Decay: grudge.Linear(10), Hi: 1000, Clock: clk, Hasher: grudge.SipHash()})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("a"), 1) // the clock has read t0
	clk.Set(t0.Add(-10 * time.Second))
	s.Update([]byte("b"), 100) // grudge: b's cells stamped t0-10s
	clk.Set(t0.Add(-5 * time.Second))
	// grudge's per-cell model: dt = (t0-5s) - (t0-10s) = 5 s > 0, so
	// Linear(10) takes 50 off.
	want := 100 - 10*5.0
	if got := s.Query([]byte("b")); math.Abs(got-100) > 1e-6 || got < want {
		t.Errorf("Query(b) 5 s after a write made after a 10 s backwards step: got %v; migrating.md \"Clock\": time stands still until the clock catches up, 100 (grudge's per-cell rule gives %v)", got, want)
	}
}

// TestAudit68RootDefaultHashIsMurmur3: Config.Hasher "nil means Murmur3
// (grudge's default)"; Murmur3 is spaolacci/murmur3's Sum64WithSeed under
// the seed folded to 32 bits; level l's cell is h1 + l*h2 (h2 forced odd)
// reduced to [0, M) (multiply-shift, docs/migrating.md). A user's Hasher
// is hashed with Hash64. Checked through QueryDetailed's CellIndexes.
func TestAudit68RootDefaultHashIsMurmur3(t *testing.T) {
	const M = 100003
	idx := func(h uint64, l uint32) uint32 {
		g := uint32(h) + l*(uint32(h>>32)|1)
		return uint32(uint64(g) * M >> 32)
	}
	for _, hf := range []struct {
		name string
		f    grudge.HasherFactory
		sum  func(seed uint64, key []byte) uint64
	}{
		{"nil", nil, func(seed uint64, key []byte) uint64 {
			return murmur3.Sum64WithSeed(key, uint32(seed)^uint32(seed>>32))
		}},
		{"Murmur3", grudge.Murmur3(), func(seed uint64, key []byte) uint64 {
			return murmur3.Sum64WithSeed(key, uint32(seed)^uint32(seed>>32))
		}},
		{"user", func(seed uint64) grudge.Hasher { return a68XorHasher(seed) }, func(seed uint64, key []byte) uint64 {
			return a68XorHasher(seed).Hash64(key)
		}},
	} {
		s, err := grudge.New(grudge.Config{Levels: 5, CellsPerLevel: M, Hi: 1, Hasher: hf.f})
		if err != nil {
			t.Fatal(err)
		}
		seed := s.Native().Config().Seed
		for i := 0; i < 300; i++ {
			key := []byte(fmt.Sprintf("user-%d", i*7919))
			h := hf.sum(seed, key)
			res := s.QueryDetailed(key)
			for l := uint32(0); l < 5; l++ {
				if got, want := res.CellIndexes[l], idx(h, l); got != want {
					t.Fatalf("%s: key %s level %d: cell %d, want %d", hf.name, key, l, got, want)
				}
			}
		}
	}
}

// a68Flaky panics while armed: a user's Aggregator or Decay with a bug.
type a68Flaky struct{ armed *atomic.Bool }

func (f a68Flaky) Apply(score float64, dt int64) float64 {
	if f.armed.Load() {
		panic("a68: law panics")
	}
	if dt <= 0 {
		return score
	}
	return score * math.Exp(-float64(dt)/1000)
}

// TestAudit68RootPanickingUserFuncsLeaveNothingStuck: a user's Aggregator
// or Decay that panics (a bug in user code) must not leave the sketch or
// rotator wedged: after the panic is recovered, every operation on the
// same key (and TryUpdate, which may hold a stripe) completes and reads
// sensible scores. grudge releases its cell locks by defer
// (internal/ref/doc.go says so of the reference), and the root package
// promises "no locks" (sketch/doc.go) for its own sketch.
func TestAudit68RootPanickingUserFuncsLeaveNothingStuck(t *testing.T) {
	var armed atomic.Bool
	agg := func(v []float64) float64 {
		if armed.Load() {
			panic("a68: aggregator panics")
		}
		return grudge.Min(v)
	}
	clk := grudgetest.NewFakeClock()
	mk := []func() (interface {
		Update([]byte, float64)
		Query([]byte) float64
		UpdateAndQuery([]byte, float64) float64
		TryUpdate([]byte, float64, float64) bool
	}, error){
		func() (interface {
			Update([]byte, float64)
			Query([]byte) float64
			UpdateAndQuery([]byte, float64) float64
			TryUpdate([]byte, float64, float64) bool
		}, error) {
			return grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 64, Decay: a68Flaky{&armed}, Hi: 1e6, Aggregator: agg, Clock: clk})
		},
		func() (interface {
			Update([]byte, float64)
			Query([]byte) float64
			UpdateAndQuery([]byte, float64) float64
			TryUpdate([]byte, float64, float64) bool
		}, error) {
			return grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Levels: 3, CellsPerLevel: 64, Decay: a68Flaky{&armed}, Hi: 1e6, Aggregator: agg, Clock: clk}, Period: time.Second})
		},
	}
	for mi, m := range mk {
		s, err := m()
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		s.Update(k, 10)
		clk.Advance(7 * time.Millisecond)
		armed.Store(true)
		for op := 0; op < 4; op++ {
			msg := sketchtest.Panics(func() {
				switch op {
				case 0:
					s.Update(k, 1)
				case 1:
					s.Query(k)
				case 2:
					s.UpdateAndQuery(k, 1)
				case 3:
					s.TryUpdate(k, 1, 1e5)
				}
			})
			if msg == "" {
				t.Errorf("maker %d op %d: no panic from the armed user function", mi, op)
			}
		}
		armed.Store(false)
		clk.Advance(3 * time.Millisecond)
		done := make(chan float64, 1)
		go func() {
			var n float64
			for i := 0; i < 100; i++ {
				if s.TryUpdate(k, 1, 1e5) {
					n++
				}
				s.Update(k, 1)
				n += s.UpdateAndQuery(k, 0) * 0
			}
			done <- s.Query(k)
		}()
		select {
		case q := <-done:
			if q < 200 || q > 1e5 || math.IsNaN(q) {
				t.Errorf("maker %d: score after the panics and 200 increments: %v", mi, q)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("maker %d: operations on a key wedged after a user Aggregator/Decay panicked", mi)
		}
	}
}

// TestAudit68RootSignatures pins the grudge v0.1.0 surface that
// docs/migrating.md's "Side by side" table lists (and REFERENCE.md):
// each assignment fails to compile if a signature differs.
func TestAudit68RootSignatures(t *testing.T) {
	var (
		_ func(grudge.Config) (*grudge.Sketch, error)          = grudge.New
		_ func(grudge.RotatorConfig) (*grudge.Rotator, error)  = grudge.NewRotator
		_ func(*grudge.Sketch, []byte, float64)                = (*grudge.Sketch).Update
		_ func(*grudge.Sketch, []byte) float64                 = (*grudge.Sketch).Query
		_ func(*grudge.Sketch, []byte, float64) float64        = (*grudge.Sketch).UpdateAndQuery
		_ func(*grudge.Sketch, []byte, float64, float64) bool  = (*grudge.Sketch).TryUpdate
		_ func(*grudge.Sketch, []byte) grudge.Result           = (*grudge.Sketch).QueryDetailed
		_ func(*grudge.Rotator, []byte, float64)               = (*grudge.Rotator).Update
		_ func(*grudge.Rotator, []byte) float64                = (*grudge.Rotator).Query
		_ func(*grudge.Rotator, []byte, float64) float64       = (*grudge.Rotator).UpdateAndQuery
		_ func(*grudge.Rotator, []byte, float64, float64) bool = (*grudge.Rotator).TryUpdate
		_ func(*grudge.Rotator, []byte) grudge.Result          = (*grudge.Rotator).QueryDetailed
		_ func(*grudge.Rotator)                                = (*grudge.Rotator).Close
		_ func(*grudge.Rotator) int64                          = (*grudge.Rotator).Rotations
		_ func(float64) grudge.Decay                           = grudge.Exponential
		_ func(float64) grudge.Decay                           = grudge.Linear
		_ grudge.Decay                                         = grudge.None
		_ grudge.Aggregator                                    = grudge.Min
		_ grudge.Aggregator                                    = grudge.Max
		_ grudge.Aggregator                                    = grudge.Mean
		_ func() grudge.HasherFactory                          = grudge.Murmur3
		_ func() grudge.HasherFactory                          = grudge.SipHash
		_ func(uint32, uint32, float64) (uint32, error)        = grudge.SuggestLevels
		_ func() *grudgetest.FakeClock                         = grudgetest.NewFakeClock
		_ func() *grudgetest.FakeTicker                        = grudgetest.NewFakeTicker
		_ func(*grudgetest.FakeClock, time.Duration)           = (*grudgetest.FakeClock).Advance
		_ func(*grudgetest.FakeClock, time.Time)               = (*grudgetest.FakeClock).Set
		_ func(*grudgetest.FakeClock) time.Time                = (*grudgetest.FakeClock).Now
		_ func(*grudgetest.FakeTicker)                         = (*grudgetest.FakeTicker).Tick
		_ grudge.Clock                                         = grudgetest.NewFakeClock()
		_ grudge.Ticker                                        = grudgetest.NewFakeTicker()
		_ func(grudge.Decay, float64, int64) float64           = grudge.Decay.Apply
		_ func(grudge.Hasher, []byte) uint64                   = grudge.Hasher.Hash64
		_ func(grudge.Ticker) <-chan time.Time                 = grudge.Ticker.C
		_ func(grudge.Ticker)                                  = grudge.Ticker.Stop
		_ func(grudge.Clock) time.Time                         = grudge.Clock.Now
		_ func(uint64) grudge.Hasher                           = grudge.HasherFactory(nil)
		_ func([]float64) float64                              = grudge.Aggregator(nil)
		_ struct {
			A float64
			L []float64
			C []uint32
		} = struct {
			A float64
			L []float64
			C []uint32
		}(struct {
			A float64
			L []float64
			C []uint32
		}{})
	)
	c := grudge.Config{Levels: 1, CellsPerLevel: 1, Decay: grudge.None, Lo: 0, Hi: 1, Aggregator: grudge.Min, Hasher: grudge.Murmur3(), Clock: grudgetest.NewFakeClock()}
	rc := grudge.RotatorConfig{Sketch: c, Generations: 2, Period: time.Second, Ticker: grudgetest.NewFakeTicker()}
	r := grudge.Result{Aggregate: 1, LevelScores: []float64{1}, CellIndexes: []uint32{0}}
	_, _, _ = c, rc, r
}
