package sketch_test

// Audit 98: docs/precision.md's figures at the boundaries it names,
// through the public API (every write form), against exact values.

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a98Writes are the write forms that add delta to a key.
var a98Writes = []struct {
	name string
	do   func(s *sketch.Sketch, clk *sketchtest.FakeClock, k string, d float64)
}{
	{"Update", func(s *sketch.Sketch, _ *sketchtest.FakeClock, k string, d float64) { s.UpdateString(k, d) }},
	{"UpdateAt", func(s *sketch.Sketch, clk *sketchtest.FakeClock, k string, d float64) { s.UpdateAt(clk.Now(), k, d) }},
	{"UpdateAndQuery", func(s *sketch.Sketch, _ *sketchtest.FakeClock, k string, d float64) { s.UpdateAndQueryString(k, d) }},
	{"UpdateAndQueryAt", func(s *sketch.Sketch, clk *sketchtest.FakeClock, k string, d float64) {
		s.UpdateAndQueryAt(clk.Now().Add(time.Hour), k, d)
	}},
	{"TryUpdate", func(s *sketch.Sketch, _ *sketchtest.FakeClock, k string, d float64) {
		if !s.TryUpdateString(k, d, math.MaxFloat64) {
			panic("denied")
		}
	}},
	{"TryUpdateAt", func(s *sketch.Sketch, clk *sketchtest.FakeClock, k string, d float64) {
		if !s.TryUpdateAt(clk.Now(), k, d, math.MaxFloat64) {
			panic("denied")
		}
	}},
}

// TestAudit98PrecRoundingExamples: precision.md, "The add is exact before
// the rounding up": "`0.1` is stored as 0.10000000149, `-0.1` as
// -0.09999999404 (toward zero), `1e6 + 1e-5` as 1000000.0625, `2^24 + 1`
// as 16777218, `2^60 + 1` as 2^60 + 2^37", and "1000 adds of 1e14 to
// 2^100 leave 2^100 + 1000 float32 ulps (2^77 each)"; "Integers are exact
// up to 2^24"; for every write form, at L = 3 (each level the same).
func TestAudit98PrecRoundingExamples(t *testing.T) {
	cases := []struct {
		name string
		ds   []float64
		n    int // the last delta repeated n times in all
		want float64
	}{
		{"0.1", []float64{0.1}, 1, float64(float32(0.1))},
		{"-0.1", []float64{-0.1}, 1, -0.09999999403953552},
		{"1e6+1e-5", []float64{1e6, 1e-5}, 1, 1000000.0625},
		{"2^24-1 then +1", []float64{1<<24 - 1, 1}, 1, 1 << 24},
		{"2^24+1", []float64{1 << 24, 1}, 1, 16777218},
		{"2^60+1", []float64{0x1p60, 1}, 1, 0x1p60 + 0x1p37},
		{"2^100+1000x1e14", []float64{0x1p100, 1e14}, 1000, 0x1p100 + 1000*0x1p77},
	}
	for _, w := range a98Writes {
		for _, c := range cases {
			t.Run(w.name+"/"+c.name, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000)
				s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Lo: -1, Hi: math.MaxFloat32, Clock: clk})
				for i, d := range c.ds {
					reps := 1
					if i == len(c.ds)-1 {
						reps = c.n
					}
					for range reps {
						w.do(s, clk, "k", d)
					}
				}
				det := s.QueryDetailed([]byte("k"))
				if det.Score != c.want {
					t.Errorf("Query = %.17g, want %.17g", det.Score, c.want)
				}
				for _, lv := range det.Levels {
					if lv.Score != c.want {
						t.Errorf("level %d = %.17g, want %.17g", lv.Level, lv.Score, c.want)
					}
				}
			})
		}
	}
}

// TestAudit98PrecTinyAddsGrowthBound: precision.md, "n tiny adds grow the
// score by a factor of (1 + 2^-23)^n at most: 1.2e-7 per add, 12.7% after
// a million", and "each update still moves the score up by one whole
// ulp": a million adds of 1e-30 on 1 read exactly 1 + 10^6 x 2^-23 (all
// in [1, 2): one ulp is 2^-23), below the stated bound.
func TestAudit98PrecTinyAddsGrowthBound(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 1, CellsPerLevel: 1, Hi: 10, Clock: clk})
	s.UpdateString("k", 1)
	const n = 1_000_000
	for range n {
		s.UpdateString("k", 1e-30)
	}
	got := s.QueryString("k")
	if want := 1 + n*0x1p-23; got != want {
		t.Errorf("after %d tiny adds: %.10g, want %.10g", n, got, want)
	}
	if bound := math.Pow(1+0x1p-23, n); got > bound || math.Abs(bound-1.127) > 0.0005 {
		t.Errorf("bound (1+2^-23)^n = %.6g (doc: 12.7%%), read %.6g", bound, got)
	}
}

// TestAudit98PrecClampReadsAtHiBoundaries: sketch/doc.go, "A Hi that no
// float32 holds (0.1) is stored rounded up and read back capped at Hi: no
// level's read exceeds Hi", precision.md "Reads capped at Hi ...
// `TryUpdate(k, 0, Hi)` admits it", and "With Hi = +Inf a score
// saturates at MaxFloat32": at the boundaries the audit names (Hi below
// the smallest float32, at it, between subnormals, near and at
// MaxFloat32, +Inf), for every write form and each law, a key pinned at
// Hi reads exactly min(Hi, MaxFloat32) at every level, and a TryUpdate of
// 0 against that limit is admitted.
func TestAudit98PrecClampReadsAtHiBoundaries(t *testing.T) {
	his := []float64{1e-46, 0x1p-149, 1.5 * 0x1p-149, 3e-45, 0.1, 1e12, math.Nextafter(math.MaxFloat32, 0), float64(math.Nextafter32(math.MaxFloat32, 0)) + 1, math.MaxFloat32, math.Inf(1)}
	laws := []decay.Decay{decay.None(), decay.Exponential(1e-3), decay.Linear(1e-30)}
	for _, w := range a98Writes {
		for li, law := range laws {
			for _, hi := range his {
				if math.IsInf(hi, 1) && li == 0 {
					continue
				}
				t.Run(fmt.Sprintf("%s/law%d/hi=%g", w.name, li, hi), func(t *testing.T) {
					clk := sketchtest.NewFakeClock()
					clk.Set(5)
					s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 4, Decay: law, Hi: hi, Clock: clk})
					w.do(s, clk, "k", math.MaxFloat64/2)
					w.do(s, clk, "k", 1)
					want := min(hi, math.MaxFloat32)
					det := s.QueryDetailed([]byte("k"))
					if det.Score != want {
						t.Errorf("Query = %.17g, want %.17g", det.Score, want)
					}
					for _, lv := range det.Levels {
						if lv.Score != want {
							t.Errorf("level %d = %.17g, want %.17g", lv.Level, lv.Score, want)
						}
					}
					if !s.TryUpdateString("k", 0, want) {
						t.Errorf("TryUpdate(k, 0, %g) denied at the clamp", want)
					}
				})
			}
		}
	}
}

// a98ExactExpDecay returns s x e^(-lambda x dt/1000) at a98Prec bits
// (lambda, s float64; dt whole ms).
func a98ExactExpDecay(s, lambda float64, dt int64) *big.Float {
	x := new(big.Float).SetPrec(a98Prec).Mul(a98Big(lambda), new(big.Float).SetPrec(a98Prec).SetInt64(dt))
	x.Quo(x, a98Big(1000))
	return new(big.Float).SetPrec(a98Prec).Mul(a98Big(s), a98ExpNeg(x))
}

// TestAudit98PrecExpNearUnderflowNeverBelow: sketch/doc.go "Never below
// the truth", precision.md "Scores below 1e-290" and "A factor, not a
// score, near the subnormal range is no exception": one cell written with
// s and read after a gap whose lambda x age sweeps 600 to 840 (the
// 700 switch to exp(log|s| - x), the subnormal factor below 2^-1022 at
// 708, the product below 1e-290 and in the float64 subnormals), on the
// table path (gap below 2^24 ms) and past it, for scores from MaxFloat32
// to the smallest float32. The read is never below the exact s x e^-x
// but by the documented underflow to 0 (2^-1070 absolute).
func TestAudit98PrecExpNearUnderflowNeverBelow(t *testing.T) {
	scores := []float64{math.MaxFloat32, 1e38, 3.5, 1e-30, 0x1p-149}
	paths := []struct {
		name   string
		lambda float64
	}{
		{"table", 100},  // x = 0.1 x dt: dt 6,000 to 8,400 ms
		{"slow", 0.033}, // x = 3.3e-5 x dt: dt above 2^24 ms
	}
	for _, p := range paths {
		for _, sc := range scores {
			t.Run(fmt.Sprintf("%s/s=%g", p.name, sc), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				for i := range 121 {
					x := 600 + 2*float64(i) + 0.013*float64(i%7)
					dt := int64(math.Round(x * 1000 / p.lambda))
					clk.Set(0)
					s := mustNewSketch(t, sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: decay.Exponential(p.lambda), Hi: math.MaxFloat32, Clock: clk})
					s.UpdateString("k", sc)
					clk.Set(dt)
					got := s.QueryString("k")
					want := a98ExactExpDecay(sc, p.lambda, dt)
					if a98Below(got, want) {
						t.Errorf("dt=%d ms (x=%.4f): read %.17g below the exact %s", dt, p.lambda*float64(dt)/1000, got, want.Text('g', 20))
					}
				}
			})
		}
	}
}

// TestAudit98PrecSmallestFloat32UnderflowGap: precision.md, "an exact
// underflow stays 0: a gap whose float64 decay underflows (lambda x age
// above about 745, about 644 from 1.4e-45) still brings a score to 0
// rather than leaving it at the smallest float32": the least lambda x age
// at which a cell holding 1.4e-45 reads 0 (and, written once more with 0,
// stores 0) is 641.855: 2^-149 x e^-x rounds to 0 below 2^-1075, x above
// 745.13 - 103.28. The page's "about 644" is 2.1 high (audit 98 report);
// its "about 6e-4/s" for the sweep (641.9 over 2^30 ms) agrees with
// 641.855.
func TestAudit98PrecSmallestFloat32UnderflowGap(t *testing.T) {
	const lambda = 1.0 // x = dt/1000
	zeroAt := func(dt int64) bool {
		clk := sketchtest.NewFakeClock()
		s := mustNewSketch(t, sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: decay.Exponential(lambda), Hi: 1, Clock: clk})
		s.UpdateString("k", 0x1p-149)
		clk.Set(dt)
		q := s.QueryString("k")
		s.UpdateString("k", 0)
		if stored := s.QueryString("k"); (q == 0) != (stored == 0) {
			t.Errorf("dt=%d: Query %g but a write of 0 stored %g", dt, q, stored)
		}
		return q == 0
	}
	lo, hi := int64(500_000), int64(800_000)
	if zeroAt(lo) || !zeroAt(hi) {
		t.Fatalf("no underflow edge in [%d, %d] ms", lo, hi)
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if zeroAt(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	x := float64(hi) / 1000
	t.Logf("a cell at 1.4e-45 first reads 0 at lambda x age = %.3f", x)
	if math.Abs(x-641.855) > 0.002 {
		t.Errorf("underflow edge from 1.4e-45 at lambda x age = %.3f, want 641.855 (docs/precision.md: about 644)", x)
	}
	if lam := x / (1 << 30) * 1000; math.Abs(lam-6e-4)/6e-4 > 0.01 {
		t.Errorf("the sweep's slowest law to meet the edge: %.3g/s; docs/precision.md says about 6e-4/s", lam)
	}
}

// TestAudit98PrecDecayedCounterBound: precision.md, "How big the error
// gets": "If delta >= score*2^-23 ... a decayed counter's relative error
// stays below (score/delta)*2^-23, where score/delta is the number of
// events per decay time constant (rate/lambda)", and "What users should
// do" 1 ("at most (score/delta)*2^-23"). One key alone in its cells,
// events of delta every millisecond (several a millisecond for the last
// case), against the exact decayed sum, after every millisecond, for
// steady states from 1.4e3 to 1.4e5 events a time constant and a
// fractional delta; the error is at or above 0 and below both forms of
// the bound (rate/lambda, and the current exact score over delta).
func TestAudit98PrecDecayedCounterBound(t *testing.T) {
	cases := []struct {
		name      string
		lambda    float64 // per second
		delta     float64
		perMs, ms int
	}{
		{"a1-shape 10s half-life", math.Ln2 / 10, 1, 1, 60_000},
		{"1s half-life", math.Ln2, 1, 1, 20_000},
		{"fractional 0.37", math.Ln2 / 3, 0.37, 1, 30_000},
		{"4 a ms, 100s half-life", math.Ln2 / 100, 1, 4, 25_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 2, Decay: decay.Exponential(c.lambda), Hi: 1e12, Clock: clk})
			q := a98ExpNeg(new(big.Float).SetPrec(a98Prec).Quo(a98Big(c.lambda), a98Big(1000)))
			exact := a98Big(0)
			rateOverLambda := float64(c.perMs) * 1000 / c.lambda
			worst := 0.0
			for ms := 1; ms <= c.ms; ms++ {
				clk.Set(int64(ms))
				exact.Mul(exact, q)
				for range c.perMs {
					s.UpdateString("k", c.delta)
					exact.Add(exact, a98Big(c.delta))
				}
				got := s.QueryString("k")
				ex, _ := exact.Float64()
				rel := (got - ex) / ex
				if a98Below(got, exact) {
					t.Fatalf("ms %d: %.17g below the exact %.17g", ms, got, ex)
				}
				worst = max(worst, rel/(rateOverLambda*0x1p-23))
				if bound := min(rateOverLambda, ex/c.delta) * 0x1p-23; rel >= bound {
					t.Fatalf("ms %d: relative error %.3g at or above the bound %.3g (score %.6g)", ms, rel, bound, ex)
				}
			}
			t.Logf("worst error / (rate/lambda x 2^-23) = %.3f", worst)
		})
	}
}

// TestAudit98PrecLinearApplyExact: decay/doc.go, "Linear(rate) moves s
// toward 0 by rate per second and stops at 0, its float64 result rounded
// toward +Inf (never below the exact drain of the float64 rate; exact
// drains, such as whole units a millisecond, come out exact)", and the
// Decay contract (|Apply(s, dt)| <= |s|, the sign never flips). Against
// math/big.Rat: rates whose drain no float holds (0.1, 1/3), whole rates
// (the limit package's), the extremes (1e-290, 1e300 and MaxFloat64,
// whose rate x dt overflows), scores of every magnitude and sign, and
// ages up to 2^53 ms. The result is never below the exact value, and
// equals it where the exact value is a float64 (but where the drop
// overflows: the wide-drop path keeps its documented 2^-51 widening).
// Rates below 1e-290 and ages past 2^53 ms are the findings below.
func TestAudit98PrecLinearApplyExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(98, 7))
	rates := []float64{0.1, 1.0 / 3, 1, 1000, 7000, 1 << 20, 100, math.Nextafter(500, 0), 1e-290, 1e300, math.MaxFloat64}
	for range 40 {
		rates = append(rates, math.Ldexp(1+rng.Float64(), rng.IntN(200)-100))
	}
	scores := []float64{1, -1, 0.1, -0.1, 1 << 24, -(1 << 40), 5e-324, -5e-324, math.MaxFloat64, -math.MaxFloat64, math.MaxFloat32, 1e-300}
	for range 40 {
		sc := math.Ldexp(1+rng.Float64(), rng.IntN(240)-120)
		if rng.IntN(2) == 0 {
			sc = -sc
		}
		scores = append(scores, sc)
	}
	dts := []int64{1, 2, 3, 6, 999, 1000, 1 << 24, 1<<32 + 1, 1 << 53}
	for range 20 {
		dts = append(dts, rng.Int64N(1<<40)+1)
	}
	n := 0
	for _, r := range rates {
		law := decay.Linear(r)
		for _, sc := range scores {
			for _, dt := range dts {
				got := law.Apply(sc, dt)
				ex, drop := a98LinearExact(r, sc, dt)
				switch {
				case math.IsNaN(got) || math.Abs(got) > math.Abs(sc) || got*sc < 0:
					t.Errorf("Linear(%g).Apply(%g, %d) = %g: outside [0, s]", r, sc, dt, got)
				case new(big.Rat).SetFloat64(got).Cmp(ex) < 0:
					t.Errorf("Linear(%g).Apply(%g, %d) = %.17g below the exact %s", r, sc, dt, got, ex.FloatString(25))
				default:
					exf, exact := ex.Float64()
					if df, _ := drop.Float64(); exact && df < 0x1p1000 && got != exf {
						t.Errorf("Linear(%g).Apply(%g, %d) = %.17g, the exact %.17g is a float64", r, sc, dt, got, exf)
					}
				}
				n++
			}
		}
	}
	if n < 10_000 {
		t.Fatalf("only %d cases", n)
	}
}

// a98LinearExact returns the exact linear law: s moved toward 0 by
// rate x dt/1000, stopping at 0; and that drop.
func a98LinearExact(rate, s float64, dt int64) (ex, drop *big.Rat) {
	drop = new(big.Rat).SetFloat64(rate)
	drop.Mul(drop, new(big.Rat).SetInt64(dt))
	drop.Quo(drop, big.NewRat(1000, 1))
	ex = new(big.Rat).SetFloat64(s)
	if s > 0 {
		ex.Sub(ex, drop)
		if ex.Sign() < 0 {
			ex.SetInt64(0)
		}
	} else {
		ex.Add(ex, drop)
		if ex.Sign() > 0 {
			ex.SetInt64(0)
		}
	}
	return ex, drop
}

// TestAudit98PrecFixedLinearApplyAgePast2p53 (audit 98; fixed at stop 59, the text below
// says what was wrong; linearAt takes an age past 2^53 ms rounded down and
// a rate below 2^-900 a second by tinyLinearAt): decay/doc.go, Linear's
// "float64 result rounded toward +Inf (never below the exact drain of
// the float64 rate)", for any dtMillis int64. linearAt converts dt to
// float64 first (t := float64(dt)) and keeps the errors of the product
// and the quotient of that t, not of dt: an age past 2^53 ms that rounds
// up drains more than the law. Linear(1000).Apply(2^54, 2^53 + 3) returns
// 2^53 - 4 (t = 2^53 + 4, every error term 0) for an exact 2^53 - 3, a
// float64. (2^53 ms is 285,000 years: the sketch never passes such an age
// to its law; decay.Linear's Apply is public.)
func TestAudit98PrecFixedLinearApplyAgePast2p53(t *testing.T) {
	cases := []struct {
		rate, s float64
		dt      int64
	}{
		{1000, 0x1p54, 1<<53 + 3},
		{1000, 5.834899041075238e+31, math.MaxInt64},
	}
	for _, c := range cases {
		got := decay.Linear(c.rate).Apply(c.s, c.dt)
		ex, _ := a98LinearExact(c.rate, c.s, c.dt)
		if new(big.Rat).SetFloat64(got).Cmp(ex) < 0 {
			t.Errorf("Linear(%g).Apply(%.17g, %d) = %.17g, below the exact %s", c.rate, c.s, c.dt, got, ex.FloatString(3))
		}
	}
}

// TestAudit98PrecFixedLinearTinyRateBelowExact (audit 98; fixed at stop 59, the text below
// says what was wrong; linearAt takes an age past 2^53 ms rounded down and
// a rate below 2^-900 a second by tinyLinearAt): decay/doc.go, Linear's
// "float64 result rounded toward +Inf (never below the exact drain of
// the float64 rate)", and docs/precision.md, "Linear decay is rounded
// toward +Inf ... A result below the exact drain moves to the least
// float64 at or above it". For a valid rate (finite, > 0) below about
// 1e-290 the drop, or the error terms linearAt keeps of it
// ((e1 + e2) x 0.001), fall in the float64 subnormals or underflow to 0,
// and the step up is lost or short: Linear(5e-324).Apply(-1, 1) returns
// -1 for an exact -1 + 5e-327 (the drop 5e-327 underflows, so delta is 0
// and a negative score keeps its whole value), and
// Linear(1.4071580708471e-310).Apply(1.2723538005971758e-307, 549658)
// returns 4.988981096915039e-308, below the exact value by subnormal
// ulps (a positive score).
func TestAudit98PrecFixedLinearTinyRateBelowExact(t *testing.T) {
	cases := []struct {
		rate, s float64
		dt      int64
	}{
		{5e-324, -1, 1},
		{5e-324, -0.1, 6},
		{1.4071580708471e-310, 1.2723538005971758e-307, 549658},
	}
	for _, c := range cases {
		got := decay.Linear(c.rate).Apply(c.s, c.dt)
		ex, _ := a98LinearExact(c.rate, c.s, c.dt)
		if new(big.Rat).SetFloat64(got).Cmp(ex) < 0 {
			short := new(big.Rat).Sub(ex, new(big.Rat).SetFloat64(got))
			t.Errorf("Linear(%g).Apply(%.17g, %d) = %.17g, %s below the exact value", c.rate, c.s, c.dt, got, new(big.Float).SetPrec(64).SetRat(short).Text('g', 5))
		}
	}
}

// TestAudit98PrecFixedSketchTinyLinearRateKeepsNegative (audit 98; fixed at stop 59, the text below
// says what was wrong; linearAt takes an age past 2^53 ms rounded down and
// a rate below 2^-900 a second by tinyLinearAt): docs/precision.md,
// "Linear decay is rounded toward +Inf ... Rounded up, such a drain now
// moves the cell the float32 step toward 0 that any inexact write does"
// and "The rounding bias holds for negative deltas too (it is toward
// +Inf, which for a negative score means toward 0)". Under Linear(5e-324)
// (a valid Config: finite, > 0) a credit of -1 read 1 ms later, or
// written again with 0 a thousand times 1 ms apart, still reads -1, the
// float32 below its exact -1 + 5e-327 x n: the drain underflows in the
// law and the cell never takes the float32 step toward 0 (-0.99999994)
// that the page promises for an inexact decay.
func TestAudit98PrecFixedSketchTinyLinearRateKeepsNegative(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 1, CellsPerLevel: 1, Decay: decay.Linear(5e-324), Lo: -1, Hi: 1, Clock: clk})
	s.UpdateString("k", -1)
	clk.Set(1)
	if got := s.QueryString("k"); got <= -1 {
		t.Errorf("Query 1 ms after -1: %.17g, below the exact -1 + 5e-327 (want the float32 step toward 0, -0.99999994)", got)
	}
	for ms := int64(2); ms <= 1000; ms++ {
		clk.Set(ms)
		s.UpdateString("k", 0)
	}
	if got := s.QueryString("k"); got <= -1 {
		t.Errorf("after 1000 writes of 0 1 ms apart: %.17g, below the exact -1 + 5e-324", got)
	}
}

// TestAudit98PrecCompareRoundsDownAdmitsAndCellHoldsIt: precision.md, "A
// TryUpdate still decides `aggregate + delta <= limit` as a float64
// compare ... (an add the compare rounds down to the limit is admitted,
// and then held in full by the cell)", and "a delta below half a float64
// ulp of the score ... still steps the score up a float32 ulp": a key at
// 1 with TryUpdate(k, 1e-17, 1) (1 + 1e-17 == 1 in float64) is admitted
// and then reads 1 + 2^-23 at every level, the least float32 above the
// exact sum; a second such TryUpdate is denied (the aggregate is now above
// the limit). At a score of 2^100 with a delta of 1e14, the same with a
// step of 2^77.
func TestAudit98PrecCompareRoundsDownAdmitsAndCellHoldsIt(t *testing.T) {
	for _, c := range []struct{ base, d, step float64 }{{1, 1e-17, 0x1p-23}, {0x1p100, 1e14, 0x1p77}} {
		clk := sketchtest.NewFakeClock()
		s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Hi: math.MaxFloat32, Clock: clk})
		s.UpdateString("k", c.base)
		if !s.TryUpdateString("k", c.d, c.base) {
			t.Fatalf("TryUpdate(k, %g, %g) on %g denied: the float64 compare rounds the sum to the limit", c.d, c.base, c.base)
		}
		for _, lv := range s.QueryDetailed([]byte("k")).Levels {
			if lv.Score != c.base+c.step {
				t.Errorf("base %g: level %d reads %.17g after the admitted %g, want %.17g", c.base, lv.Level, lv.Score, c.d, c.base+c.step)
			}
		}
		if s.TryUpdateString("k", c.d, c.base) {
			t.Errorf("base %g: a second TryUpdate admitted above the limit", c.base)
		}
	}
}

// TestAudit98PrecMergeSumsRoundUp: precision.md, "The merge and the
// roll-back round each of their float64 adds toward +Inf (atom.SumUp) ...
// so they too are never below the exact sum": a replica's 1e-20 merged
// onto 1, and 1e14 onto 2^100 (each absorbed by the float64 add), read
// the next float32 up; an exact merge (3 onto 2^24 - 3) reads exactly
// 2^24. Under None and under Exponential (same instant: no decay).
func TestAudit98PrecMergeSumsRoundUp(t *testing.T) {
	for _, d := range []decay.Decay{decay.None(), decay.Exponential(0.5)} {
		for _, c := range []struct{ a, b, want float64 }{
			{1, 1e-20, 1 + 0x1p-23},
			{0x1p100, 1e14, 0x1p100 + 0x1p77},
			{1<<24 - 3, 3, 1 << 24},
			{1e-20, 1, 1 + 0x1p-23},
		} {
			clk := sketchtest.NewFakeClock()
			clk.Set(77)
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 4, Decay: d, Hi: math.MaxFloat32, Clock: clk}
			a, b := mustNewSketch(t, cfg), mustNewSketch(t, cfg)
			a.UpdateString("k", c.a)
			b.UpdateString("k", c.b)
			if err := a.Merge(b); err != nil {
				t.Fatal(err)
			}
			for _, lv := range a.QueryDetailed([]byte("k")).Levels {
				if lv.Score != c.want {
					t.Errorf("%T: %g merged onto %g: level %d reads %.17g, want %.17g", d, c.b, c.a, lv.Level, lv.Score, c.want)
				}
			}
		}
	}
}

// TestAudit98PrecAggregateFuncGetsCappedScores: sketch.Config's
// AggregateFunc, "The scores it gets are capped at Hi", with Hi values no
// float32 holds (0.1, 1e12) and one below the smallest float32 (1e-46):
// a key pinned at Hi hands the function exactly Hi at every level.
func TestAudit98PrecAggregateFuncGetsCappedScores(t *testing.T) {
	for _, hi := range []float64{0.1, 1e12, 1e-46, 1.1} {
		var seen []float64
		agg := func(sc []float64) float64 {
			seen = append(seen[:0], sc...)
			return sc[0]
		}
		clk := sketchtest.NewFakeClock()
		s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 4, Hi: hi, AggregateFunc: agg, Clock: clk})
		s.UpdateString("k", 2*hi)
		q := s.QueryString("k")
		if q != hi || len(seen) != 3 {
			t.Errorf("Hi=%g: Query %.17g, scores %v", hi, q, seen)
		}
		for i, v := range seen {
			if v != hi {
				t.Errorf("Hi=%g: AggregateFunc got %.17g at level %d", hi, v, i)
			}
		}
	}
}

// TestAudit98PrecTableRowA1OneKey: docs/precision.md's "Measured" row
// a1 ("100 keys x 1 kHz, 60 s | 6000000 | 600000 | 0.000485 | 0.000434 |
// 6.878 | yes"), the one row audit 80 left out as too large. Every key
// of a1 sees the same stream (+1 each ms, compared every 10 ms), so one
// key alone in its cell has the same trajectory, and so the same
// maximum, median and maximum absolute error: recomputed here with one
// key (60,000 ops), formatted as the table is.
func TestAudit98PrecTableRowA1OneKey(t *testing.T) {
	k := []byte("key-0")
	p := newPrecPair(t, sketch.Config{Decay: decay.Exponential(math.Ln2 / 10), Hi: 1e9})
	for ms := 1; ms <= 60_000; ms++ {
		p.clk.Set(int64(ms))
		p.update(k, 1)
		if ms%10 == 0 {
			p.compare(k)
		}
	}
	r := p.result("a1")
	got := fmt.Sprintf("%.3g | %.3g | %.4g | %v", r.maxRel, r.medRel, r.maxAbs, r.oneSided)
	if want := "0.000485 | 0.000434 | 6.878 | true"; got != want {
		t.Errorf("a1 with one key: %s, the table says %s", got, want)
	}
}

// TestAudit98PrecDocumentedLinearWideDropExactDrainNotExact (audit 98;
// documented at stop 59, the text below says what was wrong; decay's doc
// now states the 2^-51 widening above about 1e289 a second, and the test
// asserts the result within it, never below the exact one). decay/doc.go,
// Linear "... (never below the exact drain of the float64 rate; exact
// drains, such as whole units a millisecond, come out exact)". Where
// rate x dt overflows float64 (a rate above about 1e289/s) the law
// divides first (wideDrop) and always widens the result by 2^-51 of the
// drop, even where the drop and the difference are exact:
// Linear(2^1000).Apply(2^1021, 1000 x 2^20) drains exactly 2^1020 and
// returns 2^1020 + 4 ulps; Linear(2^1000).Apply(2^1020, 1000 x 2^20)
// drains exactly to 0 and returns 5e291; Linear(MaxFloat64).Apply(
// MaxFloat64, 1000) returns 8e292 for an exact 0. (On the safe side, and
// out of a sketch's reach: its float32 scores drain to 0 long before.
// The 2^-51 widening is stated only in internal/law's comment.)
func TestAudit98PrecDocumentedLinearWideDropExactDrainNotExact(t *testing.T) {
	cases := []struct {
		rate, s float64
		dt      int64
		want    float64
	}{
		{0x1p1000, 0x1p1021, 1000 << 20, 0x1p1020},
		{0x1p1000, -0x1p1021, 1000 << 20, -0x1p1020},
		{0x1p1000, 0x1p1020, 1000 << 20, 0},
		{math.MaxFloat64, math.MaxFloat64, 1000, 0},
	}
	for _, c := range cases {
		drop := c.rate * (float64(c.dt) / 1000) // exact in these cases
		got := decay.Linear(c.rate).Apply(c.s, c.dt)
		// At or above the exact result, by at most the widening (2^-51
		// of the drop) and a float64 step of the result.
		slack := drop*0x1p-50 + math.Abs(c.want)*0x1p-52
		if got < c.want || got > c.want+slack {
			t.Errorf("Linear(%g).Apply(%g, %d) = %.17g; want within [%.17g, +%.3g] (decay's doc: widened by 2^-51 of the drop)", c.rate, c.s, c.dt, got, c.want, slack)
		}
	}
}
