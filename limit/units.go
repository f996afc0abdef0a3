package limit

import (
	"math"
	"math/big"
)

// maxRate is the largest finite limit New accepts: above it one token
// would be under 1e-19 ms of drain, below the precision a float32 cell
// keeps next to the millisecond steps of the clock.
const maxRate = 1e22

// maxExactUnits is the most units a float32 cell holds exactly: every
// integer up to 2^24.
const maxExactUnits = 1 << 24

// maxExactDrain bounds the drain per millisecond of the exact units: the
// law's drop over dt ms is (1000 x drain) x dt / 1000 in float64, exact
// while 1000 x drain x dt < 2^53 for every age dt < 2^31 ms the sketch
// computes.
const maxExactDrain = 4096

/*
Units. A cell holds a key's debt, and the sketch does its arithmetic in
float32 cells and float64 registers. A token bucket decides at whole
milliseconds (the clock's resolution), so the limiter counts debt in a
unit chosen so that everything it does at those instants is exact:

  - the debt drains by `drain` units per millisecond, an integer (the
    law is decay.Linear(1000 x drain) per second, whose drop over dt ms,
    (1000 x drain) x dt / 1000, is the integer drain x dt in float64);
  - one token is `unit` units.

Exact units: when the rate r is a fraction p/q (the simplest fraction
within 4 ulps of the float64 r, found from its continued fraction: 3 for
Limit(3), 1/3 for Every(3*time.Second), 1000/7 for Every(7*time.Millisecond)),
a token lasts 1000q/p ms = unit/drain in lowest terms. If MaxDebt x unit
<= 2^24 and drain <= 4096, every debt the limiter stores is an integer
number of units below 2^24, which a float32 holds exactly, and every
decision, drain and RetryAfter is exactly that of the rational token
bucket of rate p/q at millisecond resolution (TestExactBucket). For
example 10/s: unit 100, drain 1 (a token is 100 ms); 3/s: unit 1000,
drain 3; 1/60 per second: unit 60000, drain 1; 1000/h: unit 3600,
drain 1 (MaxDebt up to 4660 tokens).

Otherwise (a rate whose token is not a short fraction of a millisecond,
or a MaxDebt that drains for more than 2^24 units): unit = 1000/r ms
rounded up, drain = 1. Drains are still exact (whole milliseconds off a
float32 value), adds round up to float32, so a key's debt is never below
the exact bucket's (never early) and RetryAfter still predicts exactly
the limiter's own next decision; against the exact bucket a decision can
be late by the float32 rounding of the adds (a few parts in 10^8 of the
debt per add).
*/
func units(rate, maxDebt float64) (unit, drain float64, exact bool) {
	if p, q, ok := fraction(rate); ok {
		num := new(big.Int).Mul(q, big.NewInt(1000))
		g := new(big.Int).GCD(nil, nil, num, p)
		c := num.Quo(num, g)
		k := new(big.Int).Quo(p, g)
		if c.IsInt64() && k.IsInt64() && k.Int64() <= maxExactDrain && c.Int64() <= maxExactUnits &&
			maxDebt*float64(c.Int64()) <= maxExactUnits {
			return float64(c.Int64()), float64(k.Int64()), true
		}
	}
	// Milliseconds of drain per token, rounded up so that a token never
	// costs less than 1000/rate.
	unit = 1000 / rate
	if new(big.Rat).SetFloat64(unit).Cmp(new(big.Rat).Quo(big.NewRat(1000, 1), new(big.Rat).SetFloat64(rate))) < 0 {
		unit = math.Nextafter(unit, math.Inf(1))
	}
	return unit, 1, false
}

// fraction returns the first convergent p/q of r's continued fraction
// that lies within 4 ulps of r (r > 0, finite), or ok = false if none
// has q <= 2^32. A rate written as a ratio of small integers or as
// Every(d) comes back as that ratio: the float64 r is its rounding,
// after at most a couple of roundings.
func fraction(r float64) (p, q *big.Int, ok bool) {
	x := new(big.Rat).SetFloat64(r)
	tol := new(big.Rat).SetFloat64(4 * (math.Nextafter(r, math.Inf(1)) - r))
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

// Exact reports whether the limiter is exact: whether every decision,
// RetryAfter, ResetAfter and Remaining it gives for a key alone in its
// cells is that of the rational token bucket at millisecond resolution
// (see the package documentation, "Exactness"). Inf is exact.
func (l *Limiter) Exact() bool { return l.inf || l.exact }
