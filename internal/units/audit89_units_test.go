package units

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
)

// TestAudit89UnitsDocExamples: the examples of the Units comment: 10/s:
// unit 100, drain 1; 3/s: unit 1000, drain 3; 1/60 per second: unit
// 60000, drain 1; 1000/h: unit 3600, drain 1; 5001/s: unit 1000, drain
// 5001 (all exact at a small MaxDebt); Fraction gives 3 for Limit(3), 1/3
// for Every(3s), 1000/7 for Every(7ms); 60000's odd part takes 11 bits,
// so its units are kept up to 8191 tokens and not at 8192.
func TestAudit89UnitsDocExamples(t *testing.T) {
	for _, c := range []struct {
		rate, unit, drain float64
	}{{10, 100, 1}, {3, 1000, 3}, {1.0 / 60, 60000, 1}, {1000.0 / 3600, 3600, 1}, {5001, 1000, 5001}} {
		unit, drain, exact, fbits := Units(c.rate, 10)
		if unit != c.unit || drain != c.drain || !exact || fbits != 0 {
			t.Errorf("Units(%v, 10) = %v, %v, %v, %v; the doc says unit %v, drain %v (exact)", c.rate, unit, drain, exact, fbits, c.unit, c.drain)
		}
	}
	for _, c := range []struct {
		rate float64
		p, q int64
	}{{3, 3, 1}, {1 / (3 * time.Second).Seconds(), 1, 3}, {1 / (7 * time.Millisecond).Seconds(), 1000, 7}} {
		p, q, ok := Fraction(c.rate)
		if !ok || p.Int64() != c.p || q.Int64() != c.q {
			t.Errorf("Fraction(%v) = %v/%v, %v; want %d/%d", c.rate, p, q, ok, c.p, c.q)
		}
	}
	if odd := uint64(60000) >> bits.TrailingZeros64(60000); bits.Len64(odd) != 11 {
		t.Errorf("60000's odd part %d takes %d bits, the doc says 11", odd, bits.Len64(odd))
	}
	if unit, drain, exact, fbits := Units(1.0/60, 8191); unit != 60000 || drain != 1 || exact || fbits != 0 {
		t.Errorf("Units(1/60, 8191) = %v, %v, %v, %v; the doc keeps unit 60000 up to 8191 tokens", unit, drain, exact, fbits)
	}
	if unit, _, _, fbits := Units(1.0/60, 8192); unit == 60000 || fbits == 0 {
		t.Errorf("Units(1/60, 8192) = %v (fbits %d): 13 + 11 bits pass 24, the doc's rule drops the units", unit, fbits)
	}
}

// TestAudit89UnitsRoundedRates: the "Other rates" paragraph: unit =
// 1000/r rounded up to m = max(24 - bits(MaxDebt), 8) significant bits,
// drain 1: never early (unit >= 1000/r exactly), the rate rounded down by
// less than 2^(1-m) of itself; every whole number of tokens up to
// MaxDebt is an exact float32 while MaxDebt <= 65535; and the doc's
// steps: 2^-12 at MaxDebt 2000, 2^-19 at 15, 2^-7 from 32768 on. Short
// fractions: exact means MaxDebt x unit <= 2^24 with whole unit and
// drain, and kept units above 2^24 hold every whole token count exactly
// in a float32.
func TestAudit89UnitsRoundedRates(t *testing.T) {
	testsize.Serial(t)
	for _, c := range []struct {
		maxDebt float64
		m       int
	}{{2000, 13}, {15, 20}, {32768, 8}, {65535, 8}, {1 << 20, 8}, {1, 23}} {
		if m := max(24-bits.Len64(uint64(math.Ceil(c.maxDebt))), 8); m != c.m {
			t.Errorf("MaxDebt %v: m = %d, want %d", c.maxDebt, m, c.m)
		}
	}
	r := rand.New(rand.NewPCG(89, 30))
	for i := range 3000 {
		rate := math.Pow(10, r.Float64()*10-5)
		if i%3 == 0 {
			rate = math.Pi * math.Pow(10, float64(r.IntN(9)-4))
		}
		maxDebt := math.Ceil(math.Pow(2, r.Float64()*17))
		if i%7 == 0 {
			maxDebt = 1 + r.Float64()*100 // a fractional MaxDebt
		}
		unit, drain, exact, fbits := Units(rate, maxDebt)
		if math.IsNaN(unit) || unit <= 0 || drain < 1 || drain != math.Trunc(drain) {
			t.Fatalf("Units(%v, %v) = %v, %v", rate, maxDebt, unit, drain)
		}
		tok := new(big.Rat).Quo(new(big.Rat).SetFloat64(unit), new(big.Rat).SetFloat64(drain)) // ms per token
		ideal := new(big.Rat).Quo(big.NewRat(1000, 1), new(big.Rat).SetFloat64(rate))
		if fbits == 0 {
			p, q, ok := Fraction(rate)
			if !ok {
				t.Fatalf("Units(%v, %v): whole units without a short fraction", rate, maxDebt)
			}
			frac := new(big.Rat).Quo(new(big.Rat).Mul(big.NewRat(1000, 1), new(big.Rat).SetInt(q)), new(big.Rat).SetInt(p))
			if tok.Cmp(frac) != 0 {
				t.Fatalf("Units(%v, %v): token %v ms, the fraction's %v", rate, maxDebt, tok, frac)
			}
			if unit != math.Trunc(unit) {
				t.Fatalf("Units(%v, %v): short fraction's unit %v not whole", rate, maxDebt, unit)
			}
			if exact != (maxDebt*unit <= MaxExactUnits) {
				t.Fatalf("Units(%v, %v): exact %v for MaxDebt x unit = %v", rate, maxDebt, exact, maxDebt*unit)
			}
			for k := 1.0; k <= maxDebt; k = math.Ceil(k * 1.37) {
				if x := k * unit; float64(float32(x)) != x {
					t.Fatalf("Units(%v, %v): %v tokens of unit %v = %v not a float32", rate, maxDebt, k, unit, x)
				}
			}
			continue
		}
		m := max(24-bits.Len64(uint64(math.Ceil(maxDebt))), 8)
		if fbits != m || drain != 1 || exact {
			t.Fatalf("Units(%v, %v) = %v, %v, %v, fbits %d; want drain 1, m = %d, not exact", rate, maxDebt, unit, drain, exact, fbits, m)
		}
		if tok.Cmp(ideal) < 0 {
			t.Fatalf("Units(%v, %v): token %v ms below 1000/r (early)", rate, maxDebt, unit)
		}
		// unit has at most m significant bits
		mant, _ := math.Frexp(unit)
		if x := math.Ldexp(mant, m); x != math.Trunc(x) {
			t.Fatalf("Units(%v, %v): unit %v has more than %d significant bits", rate, maxDebt, unit, m)
		}
		// the rate rounded down by less than 2^(1-m) of itself
		rel := new(big.Rat).Quo(tok, ideal)
		rel.Sub(rel, big.NewRat(1, 1))
		if f, _ := rel.Float64(); f >= math.Ldexp(1, 1-m) {
			t.Fatalf("Units(%v, %v): token %v ms is %v above 1000/r, the doc bounds it below 2^(1-%d)", rate, maxDebt, unit, f, m)
		}
		if maxDebt <= 65535 {
			for k := 1.0; k <= maxDebt; k = math.Ceil(k * 1.37) {
				if x := k * unit; float64(float32(x)) != x {
					t.Fatalf("Units(%v, %v): %v tokens of unit %v = %v not a float32 (adds not exact)", rate, maxDebt, k, unit, x)
				}
			}
			if x := math.Ceil(maxDebt) * unit; float64(float32(x)) != x {
				t.Fatalf("Units(%v, %v): MaxDebt tokens %v not a float32", rate, maxDebt, x)
			}
		}
	}
}

// TestAudit89UnitsDrainBounds: the constants' comments: maxExactDrain's
// drop 1000 x drain x dt stays below 2^53 for every age below 2^31 ms;
// maxDrain keeps 1000 x (2^24 + drain) below 2^53; MaxExactUnits is 2^24,
// the last integer run a float32 holds.
func TestAudit89UnitsDrainBounds(t *testing.T) {
	if 1000*maxExactDrain*(1<<31-1) >= 1<<53 {
		t.Errorf("1000 x maxExactDrain x (2^31 - 1) = %d reaches 2^53", 1000*maxExactDrain*(1<<31-1))
	}
	if 1000*(1<<24+maxDrain) >= 1<<53 {
		t.Errorf("1000 x (2^24 + maxDrain) reaches 2^53")
	}
	above, below := float64(MaxExactUnits+1), float64(MaxExactUnits-1)
	if float64(float32(above)) == above || float64(float32(below)) != below {
		t.Errorf("MaxExactUnits %d is not the float32 integer limit", MaxExactUnits)
	}
}

// TestAudit89UnitsFractionFirstConvergent: the Units comment says "the
// first convergent of the float64 r's continued fraction within 4 ulps of
// r" (audit 89: it said "the simplest fraction", which is not what
// Fraction returns). Fraction(1.1921383606222644) = 66815005/56046351,
// a convergent within 4 ulps, while the semiconvergent 65552633/54987437,
// with a smaller denominator, is also within them. (Harmless for
// decisions: below a denominator of about 2^25/sqrt(r) a fraction within
// 4 ulps is a convergent (Legendre), so the short fractions that give
// exact units are found.)
func TestAudit89UnitsFractionFirstConvergent(t *testing.T) {
	r := 1.1921383606222644
	p, q, ok := Fraction(r)
	if !ok {
		t.Fatalf("Fraction(%v) found nothing", r)
	}
	x := new(big.Rat).SetFloat64(r)
	tol := new(big.Rat).SetFloat64(4 * (math.Nextafter(r, math.Inf(1)) - r))
	within := func(f *big.Rat) bool {
		d := new(big.Rat).Sub(f, x)
		return d.Abs(d).Cmp(tol) <= 0
	}
	got := new(big.Rat).SetFrac(p, q)
	if !within(got) {
		t.Fatalf("Fraction(%v) = %v/%v: not within 4 ulps", r, p, q)
	}
	if want := big.NewRat(66815005, 56046351); got.Cmp(want) != 0 {
		t.Errorf("Fraction(%v) = %v/%v, want the first convergent within 4 ulps, %v", r, p, q, want)
	}
	if simpler := big.NewRat(65552633, 54987437); !within(simpler) {
		t.Errorf("the test's premise: %v is not within 4 ulps of %v", simpler, r)
	}
}
