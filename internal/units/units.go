// Package units chooses the unit a token-bucket limiter counts debt in,
// so that its float32 cells and millisecond clock decide exactly as the
// rational token bucket does (package limit and the Redis module's
// Limiter share it).
package units

import (
	"math"
	"math/big"
	"math/bits"
)

// MaxExactUnits is the most units a float32 cell holds exactly: every
// integer up to 2^24.
const MaxExactUnits = 1 << 24

// maxExactDrain bounds the drain per millisecond of a short fraction's
// units where MaxDebt of them exceeds 2^24 (the odd-part rule below): the
// law's drop over dt ms is (1000 x drain) x dt / 1000 in float64, exact
// while 1000 x drain x dt < 2^53 for every age dt < 2^31 ms the sketch
// computes, so a drop never rounds up past the debt's exact drain.
const maxExactDrain = 4096

// maxDrain bounds the drain per millisecond of exact units (MaxDebt of
// them at most 2^24): a drop matters only while it is below the debt, so
// over dt < 2^24 / drain ms, where 1000 x drain x dt < 1000 x 2^24 is
// exact; a longer age drops at least 2^24 units (rounding is monotone),
// which leaves 0 as the exact drop does. So no bound is needed below the
// float64 products' 2^53; this one keeps 1000 x (2^24 + drain) far below.
const maxDrain = 1 << 40

/*
Units. A cell holds a key's debt, and the sketch does its arithmetic in
float32 cells and float64 registers. A token bucket decides at whole
milliseconds (the clock's resolution), so the limiter counts debt in a
unit chosen so that what it does at those instants is exact:

  - the debt drains by `drain` units per millisecond, an integer (the
    law is decay.Linear(1000 x drain) per second, whose drop over dt ms,
    (1000 x drain) x dt / 1000, is the integer drain x dt in float64),
    so a drained value is exact and RetryAfter, computed from it, is
    the sketch's own next decision to the millisecond;
  - one token is `unit` units.

Short fractions. When the rate r is a fraction p/q (the first convergent of
the float64 r's continued fraction within 4 ulps of r: 3 for
Limit(3), 1/3 for Every(3*time.Second), 1000/7 for Every(7*time.Millisecond)),
a token lasts 1000q/p ms = unit/drain in lowest terms. If also
MaxDebt x unit <= 2^24, every debt the limiter
stores is an integer number of units below 2^24, which a float32 holds
exactly, and every decision, drain and duration is exactly that of the
rational token bucket of rate p/q at millisecond resolution (Exact;
TestExactBucket). For example 10/s: unit 100, drain 1 (a token is
100 ms); 3/s: unit 1000, drain 3; 1/60 per second: unit 60000, drain 1;
1000/h: unit 3600, drain 1; 5001/s: unit 1000, drain 5001. Above 2^24
units the same units are kept (for drain <= 4096) while MaxDebt tokens
of them still fit 24 bits (the unit's odd part
times MaxDebt: 60000 = 2^5 x 1875 takes 11 bits, so up to 8191 tokens),
so adds stay exact; a drained value that is not representable is
rounded up when stored (late by the rounding, never early).

Other rates. unit = 1000/r ms rounded up to m significant bits, m = 24 -
bits(MaxDebt) but at least 8, drain = 1: a token of m bits times up to
MaxDebt tokens fits the 24 bits of a float32, so adds are exact (a full
burst from an empty key is admitted), drains are exact, and the rate is
rounded down (never early) by less than 2^(1-m) of itself, one step of
m bits on a value just above a power of two (2^-12 = 0.024% at MaxDebt
2000, 2^-19 at MaxDebt 15, 2^-7 = 0.78% from MaxDebt 32768 on; audit 67
measured 0.0233% and 0.726%).
Beyond MaxDebt 65535 tokens adds may round up: a decision late by the
rounding, never early. (24 bits hold MaxDebt tokens of a given
precision, whatever the unit: this is the price of exact adds.)
*/
//
// Units returns the unit (units per token) and the drain (units per ms,
// an integer) a limiter of rate tokens per second and maxDebt tokens
// counts in, whether every decision is then exactly the rational token
// bucket's (exact), and fbits: 0 for a short fraction's units (whole
// units), else the m of the rounding (limit's Tier costs round the same
// way).
func Units(rate, maxDebt float64) (unit, drain float64, exact bool, fbits int) {
	if p, q, ok := Fraction(rate); ok {
		num := new(big.Int).Mul(q, big.NewInt(1000))
		g := new(big.Int).GCD(nil, nil, num, p)
		c := num.Quo(num, g)
		k := new(big.Int).Quo(p, g)
		// Keep the fraction's units while MaxDebt tokens of them fit a
		// float32's 24 bits (the unit's odd part, times MaxDebt).
		if c.IsInt64() && k.IsInt64() && k.Int64() <= maxDrain && c.Int64() <= 1<<53 {
			unit, drain = float64(c.Int64()), float64(k.Int64())
			odd := uint64(c.Int64()) >> bits.TrailingZeros64(uint64(c.Int64()))
			if exact = maxDebt*unit <= MaxExactUnits; exact || k.Int64() <= maxExactDrain && bits.Len64(odd)+bits.Len64(uint64(math.Ceil(maxDebt))) <= 24 {
				return unit, drain, exact, 0
			}
		}
	}
	m := max(24-bits.Len64(uint64(math.Ceil(maxDebt))), 8)
	if ms := 1000 / rate; math.IsInf(ms, 1) {
		// A token of more ms than a float64 holds (rate below about
		// 5.6e-306 per second): +Inf units, which every caller's bound
		// on MaxDebt's drain refuses (audit 69: a nil big.Rat panicked).
		return ms, 1, false, m
	}
	return RoundUpBits(1000/rate, m, new(big.Rat).Quo(big.NewRat(1000, 1), new(big.Rat).SetFloat64(rate))), 1, false, m
}

// RoundUpBits returns the least float64 with at most m significant bits
// that is >= both x and exact, or +Inf where that passes MaxFloat64 (a
// value within a step of it: audit 71's rate of 5.57e-306 per second,
// whose finite token rounded up past MaxFloat64, panicked on a nil
// big.Rat).
func RoundUpBits(x float64, m int, exact *big.Rat) float64 {
	frac, exp := math.Frexp(x) // x = frac x 2^exp, frac in [0.5, 1)
	step := math.Ldexp(1, exp-m)
	v := math.Ldexp(math.Ceil(math.Ldexp(frac, m)), exp-m)
	for !math.IsInf(v, 1) && new(big.Rat).SetFloat64(v).Cmp(exact) < 0 {
		v += step
	}
	return v
}

// Fraction returns the first convergent p/q of r's continued fraction
// that lies within 4 ulps of r (r > 0, finite), or ok = false if none
// has q <= 2^32. A rate written as a ratio of small integers or as
// Every(d) comes back as that ratio: the float64 r is its rounding,
// after at most a couple of roundings.
func Fraction(r float64) (p, q *big.Int, ok bool) {
	x := new(big.Rat).SetFloat64(r)
	ulp := math.Nextafter(r, math.Inf(1)) - r
	if math.IsInf(ulp, 1) { // r = MaxFloat64: the ulp below it (audit 69)
		ulp = r - math.Nextafter(r, 0)
	}
	tol := new(big.Rat).SetFloat64(4 * ulp)
	// h/k are the convergents: h(-1)/k(-1) = 1/0, h(-2)/k(-2) = 0/1.
	h0, h1 := big.NewInt(0), big.NewInt(1)
	k0, k1 := big.NewInt(1), big.NewInt(0)
	rest := new(big.Rat).Set(x)
	limit := new(big.Int).Lsh(big.NewInt(1), 32)
	for range 64 {
		a := new(big.Int).Quo(rest.Num(), rest.Denom()) // floor: rest > 0
		h0, h1 = h1, new(big.Int).Add(new(big.Int).Mul(a, h1), h0)
		k0, k1 = k1, new(big.Int).Add(new(big.Int).Mul(a, k1), k0)
		if k1.Cmp(limit) > 0 {
			return nil, nil, false
		}
		d := new(big.Rat).Sub(new(big.Rat).SetFrac(h1, k1), x)
		if d.Abs(d).Cmp(tol) <= 0 {
			return h1, k1, h1.Sign() > 0
		}
		frac := new(big.Rat).Sub(rest, new(big.Rat).SetInt(a))
		if frac.Sign() == 0 {
			return nil, nil, false // r itself, not within tol: cannot happen
		}
		rest = frac.Inv(frac)
	}
	return nil, nil, false
}
