package grudge_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	grudge "github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// ---------------------------------------------------------------------
// Compile-level conformance: a grudge v0.1.0 user's program.
//
// audit68's TestAudit68RootSignatures pins each signature by assigning it
// to a function type. This is the other half: the names used as a grudge
// user writes them (REFERENCE.md, "grudge"; API.md, "grudge (root
// package) and grudgetest"): a toll-style debt limiter (Linear, Lo=0,
// Hi=MaxDebt, Min, SipHash, a 2-generation Rotator), the four readings of
// REFERENCE.md, a *time.Ticker wrapped as a Ticker (doc: "wrap one with C
// returning its C"), struct literals with every field named, Decay
// spelled as a value (grudge.None) and as a call, errors matched with
// errors.Is / errors.As. It must compile unchanged and run.
// ---------------------------------------------------------------------

// a135Toll is a grudge user's token bucket in debt form, as toll builds it.
type a135Toll struct {
	r       *grudge.Rotator
	burst   float64
	perCall float64
}

func a135NewToll(rate, burst float64, clk grudge.Clock, tk grudge.Ticker) (*a135Toll, error) {
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{
			Levels:        4,
			CellsPerLevel: 1 << 12,
			Decay:         grudge.Linear(rate),
			Lo:            0,
			Hi:            burst,
			Aggregator:    grudge.Min,
			Hasher:        grudge.SipHash(),
			Clock:         clk,
		},
		Generations: 2,
		Period:      time.Minute,
		Ticker:      tk,
	})
	if err != nil {
		return nil, fmt.Errorf("toll: %w", err)
	}
	return &a135Toll{r: r, burst: burst, perCall: 1}, nil
}

// Allow is toll's strict mode: TryUpdate against the burst.
func (l *a135Toll) Allow(key string) bool {
	return l.r.TryUpdate([]byte(key), l.perCall, l.burst)
}

// AllowOptimistic is toll's optimistic mode: Query, then Update.
func (l *a135Toll) AllowOptimistic(key string) bool {
	if l.r.Query([]byte(key))+l.perCall > l.burst {
		return false
	}
	l.r.Update([]byte(key), l.perCall)
	return true
}

// RetryAfter is toll's exact retry time from linear refill.
func (l *a135Toll) RetryAfter(key string, rate float64) time.Duration {
	debt := l.r.Query([]byte(key))
	over := debt + l.perCall - l.burst
	if over <= 0 {
		return 0
	}
	return time.Duration(over / rate * float64(time.Second))
}

func (l *a135Toll) Close() { l.r.Close() }

// a135RealTicker wraps *time.Ticker, as the Ticker doc says a user does.
type a135RealTicker struct{ t *time.Ticker }

func (w a135RealTicker) C() <-chan time.Time { return w.t.C }
func (w a135RealTicker) Stop()               { w.t.Stop() }

// a135WallClock is a user's Clock with Now only.
type a135WallClock struct{}

func (a135WallClock) Now() time.Time { return time.Now() }

// a135FNV is a user's Hasher.
type a135FNV uint64

func (h a135FNV) Hash64(key []byte) uint64 {
	x := uint64(14695981039346656037) ^ uint64(h)
	for _, c := range key {
		x ^= uint64(c)
		x *= 1099511628211
	}
	x ^= x >> 31
	x *= 0x9e3779b97f4a7c15
	return x ^ x>>29
}

// a135Median is a user's Aggregator.
func a135Median(levelScores []float64) float64 {
	var tmp [8]float64
	n := copy(tmp[:], levelScores)
	s := tmp[:n]
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

func TestAudit135CompileConformanceUserProgram(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	tk := grudgetest.NewFakeTicker()

	// toll, strict and optimistic, with an exact Retry-After.
	toll, err := a135NewToll(10, 5, clk, tk)
	if err != nil {
		t.Fatal(err)
	}
	defer toll.Close()
	for i := 0; i < 5; i++ {
		if !toll.Allow("alice") {
			t.Fatalf("call %d denied inside the burst", i)
		}
	}
	if toll.Allow("alice") || toll.AllowOptimistic("alice") {
		t.Fatal("admitted past the burst")
	}
	if ra := toll.RetryAfter("alice", 10); ra != 100*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want 100ms (one unit at 10/s)", ra)
	}
	clk.Advance(100 * time.Millisecond)
	if !toll.AllowOptimistic("alice") {
		t.Fatal("not admitted after the refill of one unit")
	}
	tk.Tick()
	if got := toll.r.Rotations(); got != 1 {
		t.Fatalf("Rotations after one Tick = %d", got)
	}

	// The four readings of REFERENCE.md, each in grudge's spelling.
	counter, err := grudge.New(grudge.Config{Decay: grudge.Exponential(math.Ln2), Lo: 0, Hi: math.Inf(1), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	latch, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1 << 10, Decay: grudge.None, Lo: 0, Hi: 1,
		Aggregator: grudge.Max, Hasher: grudge.Murmur3(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	feedback, err := grudge.New(grudge.Config{Levels: 2, CellsPerLevel: 1 << 10, Decay: grudge.Linear(1), Lo: -10, Hi: 10,
		Aggregator: grudge.Mean, Hasher: func(seed uint64) grudge.Hasher { return a135FNV(seed) }, Clock: a135WallClock{}})
	if err != nil {
		t.Fatal(err)
	}
	custom, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 1 << 10, Decay: grudge.None(), Lo: -1, Hi: 100,
		Aggregator: a135Median, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	counter.Update(k, 8)
	clk.Advance(time.Second) // one half-life
	if v := counter.Query(k); math.Abs(v-4) > 1e-5 {
		t.Fatalf("decayed counter after one half-life = %v, want 4", v)
	}
	for i := 0; i < 3; i++ {
		latch.Update(k, 1)
	}
	if v := latch.UpdateAndQuery(k, 1); v != 1 {
		t.Fatalf("latch = %v, want 1 (Hi=1)", v)
	}
	feedback.Update(k, -25)
	if v := feedback.Query(k); v != -10 {
		t.Fatalf("feedback score after -25 = %v, want Lo=-10", v)
	}
	if !custom.TryUpdate(k, 3, 3) || custom.TryUpdate(k, 1, 3.5) {
		t.Fatal("custom-aggregator TryUpdate decisions wrong")
	}
	var res grudge.Result = custom.QueryDetailed(k)
	if res.Aggregate != 3 || len(res.LevelScores) != 3 || len(res.CellIndexes) != 3 {
		t.Fatalf("QueryDetailed = %+v", res)
	}
	for _, ix := range res.CellIndexes {
		if ix >= 1<<10 {
			t.Fatalf("cell index %d out of [0, CellsPerLevel)", ix)
		}
	}

	// A user's Decay value and an Aggregator variable of their own.
	var d grudge.Decay = grudge.Linear(2)
	var a grudge.Aggregator = grudge.Min
	var hf grudge.HasherFactory = grudge.SipHash()
	var h grudge.Hasher = hf(42)
	if h.Hash64(k) != hf(42).Hash64(k) || d.Apply(3, 500) != 2 || a([]float64{3, 1, 2}) != 1 {
		t.Fatal("Decay/Aggregator/Hasher values misbehave")
	}

	// A real ticker, wrapped; Close stops it.
	wrapped := a135RealTicker{time.NewTicker(time.Hour)}
	rr, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Ticker: wrapped})
	if err != nil {
		t.Fatal(err)
	}
	rr.Close()
	rr.Close()

	// Defaults: Levels 0 means 4, CellsPerLevel 0 means 100,000,
	// Generations 0 means 2, Decay nil means None, Aggregator nil Min.
	def, err := grudge.New(grudge.Config{Hi: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	def.Update(k, 0.5)
	clk.Advance(24 * time.Hour)
	dr := def.QueryDetailed(k)
	if len(dr.CellIndexes) != 4 || dr.Aggregate != 0.5 {
		t.Fatalf("default sketch: %d levels, score %v after a day; want 4 and 0.5 (no decay)", len(dr.CellIndexes), dr.Aggregate)
	}
	for _, ix := range dr.CellIndexes {
		if ix >= 100_000 {
			t.Fatalf("default sketch: cell index %d >= 100,000", ix)
		}
	}
	if nc := def.Native().Config(); nc.CellsPerLevel != 100_000 {
		t.Fatalf("default CellsPerLevel = %d", nc.CellsPerLevel)
	}
	dro, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if g := dro.Native().Config().Generations; g != 2 {
		t.Fatalf("default Generations = %d, want 2", g)
	}

	// Errors, as a grudge user checks them.
	_, err = grudge.New(grudge.Config{Lo: 1, Hi: 2})
	var ce *grudge.ConfigError
	if !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce) {
		t.Fatalf("New(Lo=1) err = %v, want a *ConfigError matching ErrInvalidConfig", err)
	}
	if _, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}}); !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Fatalf("NewRotator without Period or Ticker: err = %v", err)
	}
	if n, err := grudge.SuggestLevels(1000, 100_000, 1e-6); err != nil || n < 1 || n > 8 {
		t.Fatalf("SuggestLevels = %d, %v", n, err)
	}
	if _, err := grudge.SuggestLevels(0, 1, 0.5); err == nil {
		t.Fatal("SuggestLevels(0 hot keys) did not refuse")
	}
}

// ---------------------------------------------------------------------
// Behavioural differential: one-sidedness with signed deltas.
// ---------------------------------------------------------------------

// a135Move is a forward clock schedule: still, small steps, and long idle
// times (around 2^31 and 2^32 ms, days, years), plus occasional steps
// back.
func a135Move(rng *rand.Rand) time.Duration {
	ms := time.Millisecond
	switch rng.IntN(24) {
	case 0:
		big := []int64{1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 + 3, 45 * 86400e3, 2 * 365 * 86400e3, 7*86400e3 + 11}
		return time.Duration(big[rng.IntN(len(big))]) * ms
	case 1:
		return -time.Duration(1+rng.IntN(5000)) * ms
	case 2, 3, 4, 5:
		return 0
	case 6, 7:
		return time.Duration(rng.IntN(120_000)) * ms
	default:
		return time.Duration(rng.IntN(700)) * ms
	}
}

// a135Halving is a user's Decay (halves every h ms): monotone in the
// score, toward 0, composing.
type a135Halving struct{ h float64 }

func (l a135Halving) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	return score * math.Exp2(-float64(dt)/l.h)
}

// a135Below reports whether the façade's g is below the reference's truth
// w by more than float64 arithmetic noise, relative to mag: the largest
// level score behind w (a Mean of levels that cancel keeps their absolute
// error, not its own), or w itself. The noise is the reference's: it
// writes the decayed score back at every read, each write-back rounded,
// where the façade decays from the last write in one step (rounded toward
// +Inf, never below the exact score); a Linear(0.37) level read
// 9998.01569 here and 9998.015690000004 there, 4e-12 apart, and a Mean of
// it with -9999.54 and 0 came out 1.2e-12 below the reference's -0.508
// (stop 65's CI).
func a135Below(g, w, mag float64) bool {
	return g < w-1e-12*math.Max(1, math.Max(math.Abs(w), math.Abs(mag)))
}

// TestAudit135SignedOneSidedDifferential: the root Sketch against the
// float64 mutex reference (internal/ref, same seed and cells via
// Native().Config()), with Exponential and Linear laws at non-integer
// rates (non-exact in float32), negative deltas, bounds that are not
// float32 values (Lo=-0.3, Hi=0.7; Hi=0.1), large spans, every built-in
// aggregator, long idle times and steps back. The documented promise
// (API.md: "Min aggregation never under-estimates: Query(k) >= the key's
// true score ... whatever the clamps, roll-backs, ... clock jumps";
// migrating.md: "Every stored score is rounded toward +Inf"; "a
// TryUpdate may deny ... earlier than grudge would, never admit more"):
// every stored cell is rounded up and every law, clamp and aggregator is
// monotone, so each level score, and the aggregate (Min, Max, Mean), is
// never below the reference's; a TryUpdate the façade admits, the
// reference admits. audit76 checked this for Min, Lo=0, non-negative
// deltas; audit68 checked two-sided closeness. The upper side is bounded
// loosely (1e-3 relative, plus about 2^-22 of the delta scale per
// write: with signed deltas that cancel, the round-up's absolute error
// follows the magnitudes written, not the score left).
func TestAudit135SignedOneSidedDifferential(t *testing.T) {
	testsize.Serial(t)
	laws := []struct {
		name string
		d    grudge.Decay
	}{
		{"exp0.37", grudge.Exponential(0.37)},
		{"exp3e-9", grudge.Exponential(3e-9)},
		{"lin0.37", grudge.Linear(0.37)},
		{"lin1e-5", grudge.Linear(1e-5)},
		{"lin123.4", grudge.Linear(123.4)},
		{"user", a135Halving{h: 2345.6}},
	}
	aggs := []struct {
		name string
		a    grudge.Aggregator
	}{{"nil", nil}, {"min", grudge.Min}, {"max", grudge.Max}, {"mean", grudge.Mean}}
	bounds := [][2]float64{{-0.3, 0.7}, {0, 0.1}, {-1e4, 1e4}, {-5, 0}, {-1e30, 1e30}, {math.Inf(-1), math.Inf(1)}}
	seed := uint64(13500)
	for _, law := range laws {
		for _, ag := range aggs {
			for _, b := range bounds {
				seed++
				name := fmt.Sprintf("%s/%s/%v", law.name, ag.name, b)
				a135Diff(t, name, seed, grudge.Config{Levels: 3, CellsPerLevel: 5, Decay: law.d,
					Lo: b[0], Hi: b[1], Aggregator: ag.a}, testsize.Pick(1500, 400))
			}
		}
	}
}

// a135Probe tells Mean (2) from Min (1) and Max (3).
var a135Probe = [3]float64{1, 2, 3}

func a135Diff(t *testing.T, name string, seed uint64, cfg grudge.Config, ops int) {
	t.Helper()
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatalf("%s: New: %v", name, err)
	}
	r, err := ref.New(s.Native().Config())
	if err != nil {
		t.Fatalf("%s: ref.New: %v", name, err)
	}
	rng := rand.New(rand.NewPCG(seed, 135))
	lo, hi := cfg.Lo, cfg.Hi
	if math.IsInf(lo, 0) {
		lo = -1e6
	}
	if math.IsInf(hi, 0) {
		hi = 1e6
	}
	scale := (hi - lo) / 3
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		if n := len(trace); n > 15 {
			trace = trace[n-15:]
		}
		t.Fatalf("%s: "+format+"\nlast steps:\n  %v", append([]any{name}, append(args, trace)...)...)
	}
	// drift bounds the round-up's absolute drift so far: each operation
	// may round a cell up by 2^-22 of its magnitude after the write (a
	// float32 step, twice for a roll-back), and the error stays when the
	// cell later moves toward 0 (a cell at -4e7 with Lo=-Inf drifted 533
	// above the reference, 3 times scale x 2^-22 per write); the magnitude
	// is read from the reference's levels after each operation, at the
	// same instant (no decay, so the reads change nothing there).
	drift := 2.4e-7 * scale
	check := func(op string, key []byte, g, w float64) {
		t.Helper()
		if a135Below(g, w, 0) {
			mag := 0.0
			if cfg.Aggregator != nil && cfg.Aggregator(a135Probe[:]) == 2 {
				// Mean (the probe tells it from Min and Max): the
				// levels' own magnitudes (the façade's reads change
				// nothing).
				for _, v := range s.QueryDetailed(key).LevelScores {
					mag = math.Max(mag, math.Abs(v))
				}
			}
			if a135Below(g, w, mag) {
				fail("%s = %v, below the reference's %v", op, g, w)
			}
		}
		if g > w+1e-3*math.Max(1, math.Abs(w))+drift {
			fail("%s = %v, far above the reference's %v", op, g, w)
		}
	}
	for i := 0; i < ops; i++ {
		if mv := a135Move(rng); mv != 0 {
			clk.Advance(mv)
			trace = append(trace, fmt.Sprintf("advance %v", mv))
		}
		key := []byte(fmt.Sprintf("k%d", rng.IntN(8)))
		d := (rng.Float64()*2 - 1) * scale
		switch rng.IntN(10) {
		case 0:
			d = 0
		case 1:
			d = 4 * scale // clamp at Hi
		case 2:
			d = -4 * scale // clamp at Lo
		}
		switch rng.IntN(5) {
		case 0:
			s.Update(key, d)
			r.Update(key, d)
			trace = append(trace, fmt.Sprintf("Update(%s, %v)", key, d))
		case 1:
			g, w := s.Query(key), r.Query(key)
			trace = append(trace, fmt.Sprintf("Query(%s) = %v / %v", key, g, w))
			check(fmt.Sprintf("op %d Query(%s)", i, key), key, g, w)
		case 2:
			g, w := s.UpdateAndQuery(key, d), r.UpdateAndQuery(key, d)
			trace = append(trace, fmt.Sprintf("UpdateAndQuery(%s, %v) = %v / %v", key, d, g, w))
			check(fmt.Sprintf("op %d UpdateAndQuery(%s, %v)", i, key, d), key, g, w)
		case 3:
			cur := r.Query(key)
			var limit float64
			switch rng.IntN(5) {
			case 0:
				limit = cur + d // at the limit exactly
			case 1:
				limit = cfg.Hi
				if math.IsInf(limit, 0) {
					limit = math.MaxFloat64
				}
			case 2:
				limit = hi + scale // above Hi
			default:
				limit = cur + d + (rng.Float64()-0.5)*scale
			}
			g, w := s.TryUpdate(key, d, limit), r.TryUpdate(key, d, limit)
			trace = append(trace, fmt.Sprintf("TryUpdate(%s, %v, %v) = %v / %v (ref agg %v)", key, d, limit, g, w, cur))
			if g && !w {
				fail("op %d: TryUpdate(%s, %v, %v) admitted where the reference (aggregate %v) denied", i, key, d, limit, cur)
			}
			if w && !g {
				// documented: may deny earlier by the round-up; keep the
				// two in step.
				s.Update(key, d)
			}
		case 4:
			g, w := s.QueryDetailed(key), r.QueryDetailed(key)
			trace = append(trace, fmt.Sprintf("QueryDetailed(%s) = %v / %v", key, g.Aggregate, w.Score))
			check(fmt.Sprintf("op %d QueryDetailed(%s).Aggregate", i, key), key, g.Aggregate, w.Score)
			for l, lv := range w.Levels {
				if g.CellIndexes[l] != lv.Index {
					fail("op %d: level %d cell %d, reference %d", i, l, g.CellIndexes[l], lv.Index)
				}
				check(fmt.Sprintf("op %d QueryDetailed(%s) level %d", i, key, l), key, g.LevelScores[l], lv.Score)
				if g.LevelScores[l] > cfg.Hi || g.LevelScores[l] < cfg.Lo {
					fail("op %d: level %d score %v outside [%v, %v]", i, l, g.LevelScores[l], cfg.Lo, cfg.Hi)
				}
			}
		}
		peak := scale
		for _, lv := range r.QueryDetailed(key).Levels {
			peak = math.Max(peak, math.Abs(lv.Score))
		}
		drift += 2.4e-7 * peak
	}
}

// ---------------------------------------------------------------------
// Rotator: one-sided against grudge's rotator, non-exact laws.
// ---------------------------------------------------------------------

// a135Spread places "k0".."k9" in distinct cells at every level whatever
// the seed (so the two rotators' per-generation seeds do not matter).
type a135Spread struct{}

func (a135Spread) Hash64(key []byte) uint64 {
	i := uint64(9)
	if len(key) > 0 {
		i = uint64(key[len(key)-1] - '0')
	}
	return (1<<20+1)<<32 | i<<28
}

// TestAudit135RotatorOneSidedDifferential: a root Rotator (lazy, and
// driven by a grudgetest.FakeTicker) against internal/ref's rotator
// (grudge's design: RWMutex, rotated by hand at each tick or period
// boundary), with Exponential and non-integer Linear laws, signed real
// deltas, Hi/Lo clamps at non-float32 bounds, long idle times (forward
// only), TryUpdate at and around the limit. Promise: reads of the primary
// are never below the reference's (round-up, migrating.md), an admitted
// TryUpdate is admitted by the reference, Rotations() counts what the
// reference rotated (lazy: "a clock jump over k periods retires k
// generations at once, and Rotations() counts k"; ticker: one per Tick).
// audit76 covered exact laws only; audit68 a model without clamps.
func TestAudit135RotatorOneSidedDifferential(t *testing.T) {
	testsize.Serial(t)
	seed := uint64(13600)
	for _, ticker := range []bool{false, true} {
		for _, gens := range []uint32{2, 3} {
			for _, law := range []grudge.Decay{grudge.Exponential(0.29), grudge.Linear(0.73)} {
				for _, p := range []time.Duration{3 * time.Millisecond, 1700 * time.Millisecond} {
					if ticker && p != 3*time.Millisecond {
						continue
					}
					seed++
					name := fmt.Sprintf("ticker=%v/G=%d/%T/P=%v", ticker, gens, law, p)
					a135RotDiff(t, name, seed, p, gens, law, ticker, testsize.Pick(1500, 500))
				}
			}
		}
	}
}

func a135RotDiff(t *testing.T, name string, seed uint64, period time.Duration, gens uint32, law grudge.Decay, ticker bool, ops int) {
	t.Helper()
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Date(2026, 12, 7, 16, 30, 0, 0, time.UTC))
	cfg := grudge.RotatorConfig{
		Sketch: grudge.Config{Levels: 3, CellsPerLevel: 64, Decay: law, Lo: -3.3, Hi: 7.7, Clock: clk,
			Hasher: func(uint64) grudge.Hasher { return a135Spread{} }},
		Generations: gens,
		Period:      period,
	}
	var tk *grudgetest.FakeTicker
	if ticker {
		tk = grudgetest.NewFakeTicker()
		cfg.Ticker = tk
	}
	root, err := grudge.NewRotator(cfg)
	if err != nil {
		t.Fatalf("%s: NewRotator: %v", name, err)
	}
	defer root.Close()
	nc := root.Native().Config()
	rr, err := ref.NewRotator(ref.RotatorConfig{Sketch: nc.Sketch, Generations: nc.Generations, Period: time.Hour, Manual: true})
	if err != nil {
		t.Fatalf("%s: ref.NewRotator: %v", name, err)
	}
	defer rr.Close()
	t0 := clk.Now().UnixMilli()
	pMs := period.Milliseconds()
	var rotations int64
	sync := func() {
		if ticker {
			return
		}
		want := (clk.Now().UnixMilli() - t0) / pMs
		if want-rotations > int64(gens)+1 {
			for range int(gens) + 1 {
				rr.Rotate()
			}
			rotations = want
		}
		for ; rotations < want; rotations++ {
			rr.Rotate()
		}
	}
	rng := rand.New(rand.NewPCG(seed, 136))
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		if n := len(trace); n > 15 {
			trace = trace[n-15:]
		}
		t.Fatalf("%s: "+format+"\nlast steps:\n  %v", append([]any{name}, append(args, trace)...)...)
	}
	for i := 0; i < ops; i++ {
		switch rng.IntN(8) {
		case 0:
			mv := a135Move(rng)
			if mv < 0 {
				mv = -mv // forward only: the reference's per-generation clocks
			}
			if rng.IntN(2) == 0 && !ticker {
				// on, just before or just after a boundary
				now := clk.Now().UnixMilli()
				next := t0 + ((now-t0)/pMs+1)*pMs + int64(rng.IntN(3)-1)
				if next > now {
					mv = time.Duration(next-now) * time.Millisecond
				}
			}
			clk.Advance(mv)
			trace = append(trace, fmt.Sprintf("advance %v", mv))
		case 1:
			if ticker {
				tk.Tick()
				rr.Rotate()
				rotations++
				trace = append(trace, "tick")
			}
		}
		sync()
		key := []byte(fmt.Sprintf("k%d", rng.IntN(6)))
		d := math.Round((rng.Float64()*14-6)*1000) / 1000
		switch rng.IntN(6) {
		case 0, 1:
			root.Update(key, d)
			rr.Update(key, d)
			trace = append(trace, fmt.Sprintf("Update(%s, %v)", key, d))
		case 2:
			g, w := root.Query(key), rr.Query(key)
			trace = append(trace, fmt.Sprintf("Query(%s) = %v / %v", key, g, w))
			if a135Below(g, w, 0) || g > w+1e-3*math.Max(1, math.Abs(w)) {
				fail("op %d: Query(%s) = %v, reference %v (rotations %d)", i, key, g, w, rotations)
			}
		case 3:
			g, w := root.UpdateAndQuery(key, d), rr.UpdateAndQuery(key, d)
			trace = append(trace, fmt.Sprintf("UpdateAndQuery(%s, %v) = %v / %v", key, d, g, w))
			if a135Below(g, w, 0) || g > w+1e-3*math.Max(1, math.Abs(w)) {
				fail("op %d: UpdateAndQuery(%s, %v) = %v, reference %v", i, key, d, g, w)
			}
		case 4:
			cur := rr.Query(key)
			limit := cur + d
			switch rng.IntN(4) {
			case 0:
				limit += 0.5
			case 1:
				limit -= 0.5
			case 2:
				limit = 7.7 + float64(rng.IntN(3))
			}
			g, w := root.TryUpdate(key, d, limit), rr.TryUpdate(key, d, limit)
			trace = append(trace, fmt.Sprintf("TryUpdate(%s, %v, %v) = %v / %v (ref agg %v)", key, d, limit, g, w, cur))
			if g && !w {
				fail("op %d: TryUpdate(%s, %v, %v) admitted where the reference (aggregate %v) denied", i, key, d, limit, cur)
			}
			if w && !g {
				if math.Abs(cur+d-limit) > 1e-4*math.Max(1, math.Abs(limit)) {
					fail("op %d: TryUpdate(%s, %v, %v) denied far from the limit (reference aggregate %v)", i, key, d, limit, cur)
				}
				root.Update(key, d)
			}
		case 5:
			g, w := root.QueryDetailed(key), rr.QueryDetailed(key)
			if a135Below(g.Aggregate, w.Score, 0) {
				fail("op %d: QueryDetailed(%s) = %v, reference %v", i, key, g.Aggregate, w.Score)
			}
			for l, lv := range w.Levels {
				if a135Below(g.LevelScores[l], lv.Score, 0) || g.CellIndexes[l] != lv.Index {
					fail("op %d: level %d: %v at %d, reference %v at %d", i, l, g.LevelScores[l], g.CellIndexes[l], lv.Score, lv.Index)
				}
			}
			if got := root.Rotations(); got != rotations {
				fail("op %d: Rotations() = %d, want %d", i, got, rotations)
			}
		}
	}
}

// ---------------------------------------------------------------------
// Documented differences: completeness.
// ---------------------------------------------------------------------

// a135Section returns the text of docs/migrating.md from heading to the
// next heading of the same or a higher level.
func a135Section(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("docs/migrating.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, heading+"\n")
	if i < 0 {
		t.Fatalf("docs/migrating.md has no %q", heading)
	}
	rest := s[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	if j := strings.Index(rest, "\n### "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestAudit135FixedSubMillisecondPeriodRefusalUndocumented (audit 135; fixed at stop 64
// in the docs, the text below says what was wrong): a grudge
// program with Ticker nil and a Period under 1 ms (grudge runs a real
// ticker every Period, and time.NewTicker takes any d > 0) compiles
// unchanged but NewRotator now returns an error.
//
// The brief's promise (doc.go): "code written against grudge v0.1.0
// compiles by changing its import path ... and behaves as grudge's README
// promises", with the differences listed under "What differs, and why
// (docs/migrating.md has the details)". migrating.md, "Limits and
// errors", enumerates the inputs refused beyond grudge: "More inputs are
// refused than grudge refuses: Lo/Hi beyond the float32 range, a cell
// block above 4 GiB ..., Lo = Hi = 0 ..., a decay of rate 0 ...; and an
// infinite Lo with a law that does not drain". A sub-millisecond Period
// is not among them, nor in doc.go's "What differs"; only RotatorConfig's
// field doc says "Required (at least 1ms) without a Ticker".
//
// Observed: NewRotator(RotatorConfig{Period: 500µs}) = "rotator: Period
// must be at least 1ms (the clock counts milliseconds); got 500µs"
// (ErrInvalidConfig). Fix: list it in docs/migrating.md "Limits and
// errors" (line ~195) and doc.go's "What differs" (near line 66); the
// rounding of Period up to whole ms (2.9 ms is 3) belongs there too
// (now only in the changelog row at migrating.md:716).
func TestAudit135FixedSubMillisecondPeriodRefusalUndocumented(t *testing.T) {
	_, refusal := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: 500 * time.Microsecond})
	if !errors.Is(refusal, grudge.ErrInvalidConfig) {
		t.Fatalf("Period 500µs without a Ticker: err = %v; the refusal this test documents is gone", refusal)
	}
	// with a Ticker it is accepted (the Period is unused)
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: 500 * time.Microsecond,
		Ticker: grudgetest.NewFakeTicker()})
	if err != nil {
		t.Fatalf("Period 500µs with a Ticker: %v", err)
	}
	r.Close()
	sec := a135Section(t, "### Limits and errors")
	pkg, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	differs := string(pkg)
	if i := strings.Index(differs, "# What differs"); i >= 0 {
		differs = differs[i:]
	}
	mentions := func(s string) bool {
		return strings.Contains(s, "Period") && (strings.Contains(s, "1 ms") || strings.Contains(s, "1ms") ||
			strings.Contains(s, "millisecond"))
	}
	if !mentions(sec) && !mentions(differs) {
		t.Errorf("NewRotator refuses a Period under 1 ms without a Ticker (%v), which grudge's ticker accepts; "+
			"neither migrating.md's \"Limits and errors\" list of inputs refused beyond grudge nor doc.go's "+
			"\"What differs\" says so", refusal)
	}
}

// TestAudit135LazyRotatorKeepsRotatingAfterClose pins a difference that
// the docs state only by implication: grudge's Close stops its ticker, so
// its rotator never rotates again; a lazy Rotator here (Ticker nil) keeps
// rotating after Close (Close: "a no-op for a lazy rotator. Operations
// keep working after Close; a ticker-driven rotator no longer rotates";
// migrating.md: "Close has nothing to stop"). A score written before
// Close is gone N x Period later, where grudge would keep it.
func TestAudit135LazyRotatorKeepsRotatingAfterClose(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk}, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.Update([]byte("a"), 5)
	r.Close()
	clk.Advance(2 * time.Second)
	if got, n := r.Query([]byte("a")), r.Rotations(); got != 0 || n != 2 {
		t.Fatalf("after Close and 2 periods: Query = %v, Rotations = %d; want 0 and 2", got, n)
	}
	// a ticker-driven one no longer rotates after Close
	tk := grudgetest.NewFakeTicker()
	rt, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk}, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	rt.Update([]byte("a"), 5)
	rt.Close()
	if !tk.Stopped() {
		t.Fatal("Close did not stop the Ticker")
	}
	tk.Tick() // after Stop: does nothing
	clk.Advance(time.Hour)
	if got, n := rt.Query([]byte("a")), rt.Rotations(); got != 5 || n != 0 {
		t.Fatalf("ticker rotator after Close: Query = %v, Rotations = %d; want 5 and 0", got, n)
	}
}

// TestAudit135FixedLazyRotationFollowsConfigClockUndocumented (audit 135; fixed at stop 64
// in the docs, the text below says what was wrong): with
// Ticker nil, grudge rotates on a real ticker every Period (migrating.md's
// own table: "Ticker | nil = a real ticker every Period"; REFERENCE.md:
// "retires the oldest every Period via a background ticker goroutine"),
// whatever Config.Clock is. Here the lazy Rotator measures Period on
// Config.Clock. With grudgetest.FakeClock, the clock grudge users test
// with, the two differ observably, both ways:
//   - FakeClock advanced 3 x Period at once, no real time passing: grudge
//     (no tick yet) still reads the score; here it is gone (Rotations 3);
//   - real time of many Periods passing with the FakeClock still: grudge
//     rotates (the score is gone); here nothing rotates.
//
// migrating.md, "Rotation on access, or on ticks", says the lazy rotation
// "changes nothing observable: the first access sees exactly the
// generations it would have seen", and neither it nor doc.go's "What
// differs" says that the Period is counted on Config.Clock rather than on
// real time. Fix: say so in docs/migrating.md (the Ticker: nil bullet,
// line ~130) and doc.go ("Without a Ticker a Rotator rotates lazily",
// line ~61), e.g. "Periods are counted on Config.Clock (a FakeClock's
// Advance rotates it; grudge's nil-Ticker rotation runs on real time)".
func TestAudit135FixedLazyRotationFollowsConfigClockUndocumented(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk}, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := []byte("a")
	r.Update(k, 5)
	clk.Advance(3 * time.Minute) // no real time passes
	forgotten := r.Query(k) == 0 && r.Rotations() == 3

	clk2 := grudgetest.NewFakeClock()
	r2, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Clock: clk2}, Period: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	r2.Update(k, 5)
	time.Sleep(20 * time.Millisecond) // ten real Periods; the FakeClock stands still
	kept := r2.Query(k) == 5 && r2.Rotations() == 0

	if !forgotten || !kept {
		t.Fatalf("the lazy rotator no longer follows Config.Clock (forgotten=%v kept=%v), as doc.go and docs/migrating.md say it does", forgotten, kept)
	}
	sec := a135Section(t, "### Rotation on access, or on ticks")
	pkg, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	differs := string(pkg)
	if i := strings.Index(differs, "# What differs"); i >= 0 {
		differs = differs[i:]
	}
	says := func(s string) bool {
		return strings.Contains(s, "Config.Clock") || strings.Contains(s, "FakeClock") ||
			strings.Contains(s, "the sketch's Clock") || strings.Contains(s, "its Clock")
	}
	if !says(sec) && !says(differs) {
		t.Error("with Ticker nil and a grudgetest.FakeClock, Advance(3 x Period) retired the score (Rotations 3) " +
			"and 10 real Periods retired nothing, where grudge's real ticker does the opposite; migrating.md says the " +
			"lazy rotation \"changes nothing observable\" and neither it nor doc.go says Periods count on Config.Clock")
	}
}

// TestAudit135CustomAggregatorCallsAsGrudge: a custom Aggregator (the slow
// path) is called as grudge calls it, once per reading operation and never
// by Update: grudge's Update only adds to the cells; Query,
// UpdateAndQuery, TryUpdate (admitted or denied) and QueryDetailed each
// aggregate once. An Aggregator with side effects (a counter, a log) sees
// the same calls after the import change, on the Sketch and the Rotator
// (which aggregates only its primary), and Rotations() calls it not at all.
func TestAudit135CustomAggregatorCallsAsGrudge(t *testing.T) {
	n := 0
	agg := func(v []float64) float64 { n++; return v[0] }
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Hi: 10, Aggregator: agg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, Aggregator: agg, Clock: clk},
		Period: time.Second, Generations: 3})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("a")
	type scorer interface {
		Update([]byte, float64)
		Query([]byte) float64
		UpdateAndQuery([]byte, float64) float64
		TryUpdate([]byte, float64, float64) bool
		QueryDetailed([]byte) grudge.Result
	}
	for name, x := range map[string]scorer{"sketch": s, "rotator": r} {
		for _, c := range []struct {
			op   string
			f    func()
			want int
		}{
			{"Update", func() { x.Update(k, 1) }, 0},
			{"Query", func() { x.Query(k) }, 1},
			{"UpdateAndQuery", func() { x.UpdateAndQuery(k, 1) }, 1},
			{"TryUpdate admitted", func() { x.TryUpdate(k, 1, 100) }, 1},
			{"TryUpdate denied", func() { x.TryUpdate(k, 100, 1) }, 1},
			{"QueryDetailed", func() { x.QueryDetailed(k) }, 1},
		} {
			n = 0
			c.f()
			if n != c.want {
				t.Errorf("%s %s called the Aggregator %d times, want %d", name, c.op, n, c.want)
			}
		}
	}
	n = 0
	clk.Advance(1500 * time.Millisecond)
	if got := r.Rotations(); got != 1 || n != 0 {
		t.Errorf("Rotations() = %d with %d Aggregator calls, want 1 and 0", got, n)
	}
}
