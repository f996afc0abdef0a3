package law_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/internal/testsize"
)

// audit89ExactLinear is the exact linear law: score moved toward 0 by
// rate x dt / 1000 (rate as the float64 it is), stopping at 0.
func audit89ExactLinear(rate, score float64, dt int64) *big.Rat {
	drop := new(big.Rat).Mul(new(big.Rat).SetFloat64(rate), new(big.Rat).SetInt64(dt))
	drop.Quo(drop, big.NewRat(1000, 1))
	s := new(big.Rat).SetFloat64(score)
	if score > 0 {
		s.Sub(s, drop)
		if s.Sign() < 0 {
			s.SetInt64(0)
		}
	} else {
		s.Add(s, drop)
		if s.Sign() > 0 {
			s.SetInt64(0)
		}
	}
	return s
}

// audit89ExpNeg returns e^-x for x >= 0 at 256 bits: Taylor series of
// x/2^k (|x/2^k| < 2^-12), squared k times.
func audit89ExpNeg(x *big.Float) *big.Float {
	const prec = 256
	y := new(big.Float).SetPrec(prec).Set(x)
	k := 0
	if x.Sign() > 0 {
		k = max(x.MantExp(nil)+12, 0)
	}
	y.SetMantExp(y, -k)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for i := int64(1); i < 40; i++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(-i))
		sum.Add(sum, term)
	}
	for range k {
		sum.Mul(sum, sum)
	}
	return sum
}

// audit89ExactExp is score x e^(-lambda x dt / 1000) at 256 bits.
func audit89ExactExp(lambda, score float64, dt int64) *big.Float {
	const prec = 256
	x := new(big.Float).SetPrec(prec).SetFloat64(lambda)
	x.Mul(x, new(big.Float).SetPrec(prec).SetInt64(dt))
	x.Quo(x, new(big.Float).SetPrec(prec).SetInt64(1000))
	f := audit89ExpNeg(x)
	return f.Mul(f, new(big.Float).SetPrec(prec).SetFloat64(score))
}

// audit89LinearCase draws the i-th (rate, score, age) of a fixed-seed
// sample: binary and decimal-fraction rates, whole thousands (package
// limit's units), rates a float64 ulp below an integer; scores of both
// signs, some float32 values; ages up to 2^32 ms.
func audit89LinearCase(r *rand.Rand, i int) (rate, score float64, dt int64) {
	switch i % 4 {
	case 0:
		rate = math.Ldexp(1+r.Float64(), r.IntN(60)-30)
	case 1:
		rate = float64(1+r.IntN(2000)) / float64(1+r.IntN(9))
	case 2:
		rate = 1000 * float64(1+r.IntN(1<<20/1000))
	default:
		rate = math.Nextafter(float64(r.IntN(5000)+1), 0)
	}
	score = math.Ldexp(1+r.Float64(), r.IntN(90)-40)
	if r.IntN(3) == 0 {
		score = float64(float32(score))
	}
	if r.IntN(2) == 0 {
		score = -score
	}
	return rate, score, 1 + r.Int64N(1<<r.IntN(32))
}

// audit89LinearUlpsAbove returns, where the plain float64 expression
// (rounded to nearest) is below the exact result and so moves (addUp),
// how many float64 steps Linear(rate)'s Apply lands above the least
// float64 at or above the exact result (0: the least, or no move; -1:
// below the exact), after checking the compiled form
// agrees bit for bit and the result stays within the score and its sign.
func audit89LinearUlpsAbove(t *testing.T, rate, score float64, dt int64) int {
	t.Helper()
	d := decay.Linear(rate)
	got := d.Apply(score, dt)
	if c := law.Compile(d).Apply(score, dt); math.Float64bits(c) != math.Float64bits(got) {
		t.Fatalf("Linear(%v).Apply(%v, %d) = %v, compiled %v", rate, score, dt, got, c)
	}
	if math.Abs(got) > math.Abs(score) || got*score < 0 {
		t.Fatalf("Linear(%v).Apply(%v, %d) = %v: past the score or across 0", rate, score, dt, got)
	}
	exact := audit89ExactLinear(rate, score, dt)
	if new(big.Rat).SetFloat64(got).Cmp(exact) < 0 {
		return -1
	}
	// The plain expression, each step rounded (float64 conversions: no
	// fused multiply-add), clamped at 0.
	plain := score - float64(float64(rate*float64(dt))/1000)
	if score < 0 {
		plain = min(score+float64(float64(rate*float64(dt))/1000), 0)
	}
	plain = max(plain, min(score, 0))
	if score > 0 {
		plain = max(plain, 0)
	}
	if new(big.Rat).SetFloat64(plain).Cmp(exact) >= 0 {
		// Not below the exact result: nothing to move, the plain value
		// stands (up to half an ulp of the drop above the exact).
		if plain != got {
			t.Fatalf("Linear(%v).Apply(%v, %d) = %v, the plain expression %v is already at or above the exact", rate, score, dt, got, plain)
		}
		return 0
	}
	n := 0
	for x := got; x != score && x != 0; n++ {
		x = math.Nextafter(x, math.Inf(-1))
		if new(big.Rat).SetFloat64(x).Cmp(exact) < 0 {
			break
		}
	}
	return n
}

// TestAudit89LawLinearAboveExact: decay's "Linear(rate) ... its float64
// result rounded toward +Inf (never below the exact drain of the float64
// rate ...)" and precision.md's "A result below the exact drain moves to
// the least float64 at or above it (addUp), never past the score and
// never past 0": for a fixed-seed sample of rates, scores (both signs)
// and ages, Linear's Apply and the compiled LinearApply agree bit for
// bit, are at or above the exact result (math/big), never past the score
// or 0; a plain float64 expression already at or above the exact result
// stands as it is, and one below it moves to the least float64 at or
// above the exact result.
func TestAudit89LawLinearAboveExact(t *testing.T) {
	testsize.Serial(t)
	r := rand.New(rand.NewPCG(89, 1))
	for i := range 30000 {
		rate, score, dt := audit89LinearCase(r, i)
		switch n := audit89LinearUlpsAbove(t, rate, score, dt); {
		case n < 0:
			t.Fatalf("Linear(%v).Apply(%v, %d) below the exact result", rate, score, dt)
		case n > 0:
			t.Fatalf("Linear(%v).Apply(%v, %d) moved to %d float64 steps above the least at or above the exact", rate, score, dt, n)
		}
	}
}

// TestAudit89LawLinearDocExamples: the numbered examples of
// precision.md's "Linear decay is rounded toward +Inf" and decay's doc.
func TestAudit89LawLinearDocExamples(t *testing.T) {
	testsize.Serial(t)
	// Linear(0.1), 1 read 6 ms later: no longer 0.99939999999999995.
	got := decay.Linear(0.1).Apply(1, 6)
	if new(big.Rat).SetFloat64(got).Cmp(audit89ExactLinear(0.1, 1, 6)) < 0 || got == 0.99939999999999995 {
		t.Errorf("Linear(0.1).Apply(1, 6) = %.20g, below the exact 0.99939999999999999997", got)
	}
	// Linear(nextafter(500, 0)): 1 less a drop of 0.5 - 5.7e-17 is above 0.5.
	if got := decay.Linear(math.Nextafter(500, 0)).Apply(1, 1); !(got > 0.5) {
		t.Errorf("Linear(nextafter(500, 0)).Apply(1, 1) = %v, want above 0.5", got)
	}
	// Exact drains come out exact, the plain expression bit for bit.
	for _, c := range []struct {
		rate, score float64
		dt          int64
	}{{1, 5, 3000}, {1, 3000, 3000}, {1000, 12345, 17}, {3000, 1 << 24, 1000}, {1 << 20, 1 << 40, 999}, {2000, 1 << 30, 1}} {
		want := c.score - c.rate*float64(c.dt)/1000
		want = max(want, 0)
		if got := decay.Linear(c.rate).Apply(c.score, c.dt); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("Linear(%v).Apply(%v, %d) = %v, want the plain expression's %v", c.rate, c.score, c.dt, got, want)
		}
	}
	// The float64 law stepped 1 ms at a time from -2^40 under
	// Linear(0.05), 10^6 steps: precision.md quotes the float64
	// reference reading -1099511627653.9, 72 above the exact.
	s := -math.Ldexp(1, 40)
	l := decay.Linear(0.05)
	for range 1000000 {
		s = l.Apply(s, 1)
	}
	if math.Abs(s-(-1099511627653.9)) > 0.1 {
		t.Errorf("Linear(0.05) from -2^40, 10^6 1-ms steps: %.1f, precision.md quotes -1099511627653.9", s)
	}
	if exact := -math.Ldexp(1, 40) + 50; s < exact {
		t.Errorf("Linear(0.05) stepped reads %v below the exact %v", s, exact)
	}
}

// TestAudit89LawUndecayExponentialNeverShort: Undecay's "returns a value
// that decays to b or more over dt ms under d ... rounded up", for
// Exponential against the exact law (e^-x to 256 bits), not only the
// float64 Apply, b from 2^-60 to 2^60, lambda from 1e-5 to 1e3 per second.
func TestAudit89LawUndecayExponentialNeverShort(t *testing.T) {
	testsize.Serial(t)
	r := rand.New(rand.NewPCG(89, 2))
	for range 6000 {
		lambda := math.Pow(10, r.Float64()*8-5)
		d := law.Exponential(lambda)
		b := math.Ldexp(1+r.Float64(), r.IntN(120)-60)
		dt := 1 + r.Int64N(1<<r.IntN(31))
		v, ok := law.Undecay(d, b, dt)
		if !ok || math.IsNaN(v) {
			t.Fatalf("Exponential(%v): Undecay(%v, %d) = %v, %v", lambda, b, dt, v, ok)
		}
		if math.IsInf(v, 1) || v > math.MaxFloat32 {
			continue // beyond any Hi: the clamp takes it
		}
		if audit89ExactExp(lambda, v, dt).Cmp(new(big.Float).SetFloat64(b)) < 0 {
			t.Fatalf("Exponential(%v): Undecay(%v, %d ms) = %v decays exactly below b", lambda, b, dt, v)
		}
		if got := d.Apply(v, dt); got < b {
			t.Fatalf("Exponential(%v): Undecay(%v, %d ms) = %v, Apply gives %v < b", lambda, b, dt, v, got)
		}
	}
}

// TestAudit89LawUndecayLinearNeverShort: Undecay's "returns a value that
// decays to b or more over dt ms under d ... b + rate x dt for Linear",
// with b small against the drop (where the drop rounds by about as much
// as the sum's ulp): Linear's Apply brings the value back to b or more.
// (Against the exact drain of the float64 rate it may fall short by a
// fraction of the value's float64 ulp: Undecay(Linear(180.33232628398792),
// 1.182030331774539e-10, 211067) = 38062.2031117826 drains exactly to
// 1.17926504117e-10; Apply reads the same rounding of the drop that
// Undecay added, so it reads b or more.)
func TestAudit89LawUndecayLinearNeverShort(t *testing.T) {
	r := rand.New(rand.NewPCG(89, 2))
	for range 20000 {
		rate := math.Ldexp(1+r.Float64(), r.IntN(40)-10)
		if r.IntN(2) == 0 {
			rate = float64(1+r.IntN(100000)) / float64(1+r.IntN(997))
		}
		d := law.Linear(rate)
		c := law.Compile(d)
		b := math.Ldexp(1+r.Float64(), r.IntN(120)-60)
		if r.IntN(2) == 0 {
			b = float64(float32(b))
		}
		dt := 1 + r.Int64N(1<<r.IntN(31))
		v, ok := law.Undecay(d, b, dt)
		if !ok || math.IsNaN(v) || v < b {
			t.Fatalf("Linear(%v): Undecay(%v, %d) = %v, %v", rate, b, dt, v, ok)
		}
		if got := d.Apply(v, dt); got < b {
			t.Fatalf("Linear(%v): Undecay(%v, %d ms) = %v, which Apply decays to %v < b", rate, b, dt, v, got)
		}
		if got := c.Apply(v, dt); got < b {
			t.Fatalf("Linear(%v): Undecay(%v, %d ms) = %v, which the compiled law decays to %v < b", rate, b, dt, v, got)
		}
	}
}

// TestAudit89LawCompiledAboveExact: Compiled's "for a positive score the
// result is never below the law's own float64 Apply", and the bar behind
// it (the engine's value never below the exact decay): Compiled.Apply and
// ExpFast (where it answers) at or above the exact s x e^-x (256-bit) for
// both signs, laws from near the table threshold to 1e4/s, ages across
// the table's 2^24 ms edge, scores from the float32 subnormals to
// MaxFloat32, and never past the score's magnitude or across 0.
func TestAudit89LawCompiledAboveExact(t *testing.T) {
	testsize.Serial(t)
	r := rand.New(rand.NewPCG(89, 3))
	thr := 1000 * math.Ldexp(1, -39)
	lams := []float64{1e-12, thr, math.Nextafter(thr, 1), 2 * thr, 1e-6, 1e-3, 0.0693, 1, 45, 1e4}
	dts := []int64{1, 2, 255, 256, 65535, 65536, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1<<31 - 1}
	for _, lam := range lams {
		c := law.Compile(law.Exponential(lam))
		for range 600 {
			s := float64(float32(math.Ldexp(1+r.Float64(), r.IntN(270)-149)))
			switch r.IntN(10) {
			case 0:
				s = math.MaxFloat32
			case 1:
				s = float64(math.SmallestNonzeroFloat32) * float64(1+r.IntN(8))
			}
			if s == 0 {
				s = math.SmallestNonzeroFloat32
			}
			if r.IntN(3) == 0 {
				s = -s
			}
			dt := dts[r.IntN(len(dts))]
			if r.IntN(2) == 0 {
				dt = 1 + r.Int64N(1<<r.IntN(32))
			}
			if r.IntN(4) == 0 && lam >= 0.04 {
				// a product near the subnormal range on the table path
				x := 680 + r.Float64()*80
				dt = max(1, min(int64(x*1000/lam), 1<<24-1))
			}
			exact := audit89ExactExp(lam, s, dt)
			check := func(name string, got float64) {
				if got == 0 && new(big.Float).Abs(exact).Cmp(new(big.Float).SetMantExp(big.NewFloat(1), -1075)) < 0 {
					return // a float64 underflow: "an exact underflow stays 0" (precision.md)
				}
				if new(big.Float).SetFloat64(got).Cmp(exact) < 0 {
					t.Fatalf("Exponential(%v) %s(%v, %d ms) = %v below the exact %v", lam, name, s, dt, got, exact.Text('g', 20))
				}
				if math.Abs(got) > math.Abs(s) || got*s < 0 {
					t.Fatalf("Exponential(%v) %s(%v, %d ms) = %v: past the score or across 0", lam, name, s, dt, got)
				}
			}
			check("Compiled.Apply", c.Apply(s, dt))
			if v, ok := c.ExpFast(s, dt); ok {
				check("ExpFast", v)
			}
			if s > 0 {
				if got, lawv := c.Apply(s, dt), law.Exponential(lam).Apply(s, dt); got < lawv {
					t.Fatalf("Exponential(%v) Compiled.Apply(%v, %d) = %v below the law's %v", lam, s, dt, got, lawv)
				}
			}
		}
	}
}

// TestAudit89LawValidateNamesValue: Validate's "returns nil or an error
// that names the offending value" and decay's "invalid parameters (NaN,
// Inf, <= 0)": -0, the least subnormal's negation, ±Inf, NaN are refused
// with the value in the message; the least subnormal and MaxFloat64 are
// valid; a nil law is valid and None.
func TestAudit89LawValidateNamesValue(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), -math.SmallestNonzeroFloat64, -1, math.Inf(1), math.Inf(-1), math.NaN()} {
		for _, d := range []law.Decay{law.Exponential(v), law.Linear(v)} {
			err := law.Validate(d)
			if err == nil {
				t.Errorf("Validate(%#v) = nil for %v", d, v)
				continue
			}
			if !strings.Contains(err.Error(), fmt.Sprint(v)) {
				t.Errorf("Validate(%#v) = %q: does not name %v", d, err, v)
			}
		}
	}
	for _, v := range []float64{math.SmallestNonzeroFloat64, 1e-300, math.MaxFloat64} {
		for _, d := range []law.Decay{law.Exponential(v), law.Linear(v)} {
			if err := law.Validate(d); err != nil {
				t.Errorf("Validate(%#v) = %v, want nil", d, err)
			}
			if !law.Drains(d) {
				t.Errorf("Drains(%#v) = false for a valid provided law", d)
			}
		}
	}
	if err := law.Validate(nil); err != nil {
		t.Errorf("Validate(nil) = %v", err)
	}
	if k, p := law.Params(nil); k != law.KindNone || p != 0 {
		t.Errorf("Params(nil) = %v, %v", k, p)
	}
}

// TestAudit89LawSubnormalFactor: precision.md, "Scores below 1e-290": "a
// score near Hi = MaxFloat32 decayed by e^-708 to e^-745 is a normal
// number (1.1e-269 to 9.6e-286) whose factor alone is subnormal or 0
// ... the law itself returned 0 for MaxFloat32 x e^-745.2 (the exact
// value is 7.9e-286). Now the table path hands a factor below 2^-1022 to
// the slow path": the quoted values, and 5,000 gaps of MaxFloat32 (and
// nearby float32 scores) with x in [700, 746] under laws whose table
// covers them, through the law and the compiled form: never below the
// exact value, the law within 1e-12 of it, the compiled form within
// 4e-12 (its 2^-40 nudge is 9.1e-13).
func TestAudit89LawSubnormalFactor(t *testing.T) {
	testsize.Serial(t)
	mf := float64(math.MaxFloat32)
	for _, c := range []struct {
		x, want float64
	}{{708, 1.1e-269}, {745, 9.6e-286}, {745.2, 7.9e-286}} {
		got := law.Exponential(1).Apply(mf, int64(c.x*1000))
		if math.Abs(got/c.want-1) > 0.05 {
			t.Errorf("Exponential(1).Apply(MaxFloat32, %v s) = %v, precision.md says %v", c.x, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(89, 4))
	for range 5000 {
		lam := math.Ldexp(1+r.Float64(), r.IntN(12)-4) // 1/16 to 4096 per second
		x := 700 + r.Float64()*46
		dt := int64(x * 1000 / lam)
		if dt < 1 || dt >= 1<<24 {
			continue
		}
		s := float64(math.Nextafter32(math.MaxFloat32, 0)) * (1 - float64(r.IntN(1000))*0x1p-20)
		s = float64(float32(s))
		exact := audit89ExactExp(lam, s, dt)
		c := law.Compile(law.Exponential(lam))
		for name, got := range map[string]float64{"Compiled.Apply": c.Apply(s, dt), "law": law.Exponential(lam).Apply(s, dt)} {
			g := new(big.Float).SetFloat64(got)
			if name != "law" && g.Cmp(exact) < 0 {
				t.Fatalf("Exponential(%v) %s(%v, %d) = %v below the exact %v", lam, name, s, dt, got, exact.Text('g', 17))
			}
			e, _ := exact.Float64()
			if tol := map[bool]float64{true: 1e-12, false: 4e-12}[name == "law"]; math.Abs(got/e-1) > tol {
				t.Fatalf("Exponential(%v) %s(%v, %d) = %v, exact %v", lam, name, s, dt, got, e)
			}
		}
	}
}

// TestAudit89LawLinearDrainEdges: Linear's rounding toward +Inf where it
// is hardest: a score within a few float64 steps of the drop itself (the
// float64 drop rounded up past the score while the exact drain leaves a
// sliver, or the reverse), both signs, and drops past MaxFloat64's
// product (wideDrop: rate x dt overflows): never below the exact result,
// never past the score or across 0.
func TestAudit89LawLinearDrainEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(89, 6))
	check := func(rate, score float64, dt int64) {
		t.Helper()
		got := decay.Linear(rate).Apply(score, dt)
		if math.IsNaN(got) || math.Abs(got) > math.Abs(score) || got*score < 0 {
			t.Fatalf("Linear(%v).Apply(%v, %d) = %v", rate, score, dt, got)
		}
		if exact := audit89ExactLinear(rate, score, dt); new(big.Rat).SetFloat64(got).Cmp(exact) < 0 {
			t.Fatalf("Linear(%v).Apply(%v, %d) = %v below the exact %v", rate, score, dt, got, exact.FloatString(30))
		}
	}
	for range 20000 {
		rate := math.Ldexp(1+r.Float64(), r.IntN(80)-30)
		if r.IntN(3) == 0 {
			rate = float64(1+r.IntN(10000)) / float64(1+r.IntN(99))
		}
		dt := 1 + r.Int64N(1<<r.IntN(33))
		drop, _ := new(big.Rat).Quo(new(big.Rat).Mul(new(big.Rat).SetFloat64(rate), new(big.Rat).SetInt64(dt)), big.NewRat(1000, 1)).Float64()
		if drop == 0 || math.IsInf(drop, 0) {
			continue
		}
		s := drop
		for range r.IntN(4) {
			s = math.Nextafter(s, math.Inf(1))
		}
		for range r.IntN(3) {
			s = math.Nextafter(s, 0)
		}
		if s == 0 {
			continue
		}
		if r.IntN(2) == 0 {
			s = -s
		}
		check(rate, s, dt)
	}
	for range 2000 {
		// rate x dt beyond MaxFloat64, the drop within it
		dt := 1001 + r.Int64N(1<<20)
		rate := math.MaxFloat64 / float64(dt) * (1 + r.Float64()*900)
		s := math.MaxFloat64 * (0.5 + r.Float64()/2)
		if r.IntN(2) == 0 {
			s = -s
		}
		check(rate, s, dt)
	}
}
