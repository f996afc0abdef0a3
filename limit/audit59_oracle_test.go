package limit_test

import (
	"math/big"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a59Bucket is the rational token bucket in debt form (package doc,
// "Model: debt form") for one key: debt drains at rate tokens/s, never
// below 0; a request of n is admitted iff debt + n <= burst.
type a59Bucket struct {
	rate  *big.Rat // tokens per ms
	burst *big.Rat
	debt  *big.Rat
	at    int64 // ms
}

func newA59Bucket(perSecond *big.Rat, burst int, at int64) *a59Bucket {
	return &a59Bucket{
		rate:  new(big.Rat).Quo(perSecond, big.NewRat(1000, 1)),
		burst: big.NewRat(int64(burst), 1),
		debt:  new(big.Rat),
		at:    at,
	}
}

func (b *a59Bucket) clone() *a59Bucket {
	return &a59Bucket{rate: b.rate, burst: b.burst, debt: new(big.Rat).Set(b.debt), at: b.at}
}

func (b *a59Bucket) advance(ms int64) {
	if ms <= b.at {
		return
	}
	d := new(big.Rat).Mul(b.rate, big.NewRat(ms-b.at, 1))
	b.debt.Sub(b.debt, d)
	if b.debt.Sign() < 0 {
		b.debt.SetInt64(0)
	}
	b.at = ms
}

func (b *a59Bucket) fits(n int) bool {
	x := new(big.Rat).Add(b.debt, big.NewRat(int64(n), 1))
	return x.Cmp(b.burst) <= 0
}

// msUntil returns the whole ms until the debt drains to at most target (0
// when it is already).
func (b *a59Bucket) msUntil(target *big.Rat) int64 {
	if b.debt.Cmp(target) <= 0 {
		return 0
	}
	x := new(big.Rat).Sub(b.debt, target)
	x.Quo(x, b.rate)
	return ceilRat(x)
}

func ceilRat(x *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func floorRat(x *big.Rat) int64 {
	q := new(big.Int).Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

// decision returns the Decision a limiter of this bucket answers to a
// request of n at the bucket's time, and applies it when commit.
func (b *a59Bucket) decision(n int, commit bool) limit.Decision {
	bi := b.burst.Num().Int64()
	d := limit.Decision{Burst: int(bi)}
	debt := new(big.Rat).Set(b.debt)
	switch {
	case int64(n) > bi:
		d.Never, d.RetryAfter = true, limit.InfDuration
	case b.fits(n):
		d.Allowed = true
		debt.Add(debt, big.NewRat(int64(n), 1))
		if commit {
			b.debt.Set(debt)
		}
	default:
		tgt := new(big.Rat).Sub(b.burst, big.NewRat(int64(n), 1))
		d.RetryAfter = time.Duration(max(b.msUntil(tgt), 1)) * time.Millisecond
	}
	c := &a59Bucket{rate: b.rate, burst: b.burst, debt: debt, at: b.at}
	rem := floorRat(new(big.Rat).Sub(b.burst, debt))
	d.Remaining = int(max(rem, 0))
	if debt.Sign() > 0 {
		d.ResetAfter = time.Duration(c.msUntil(new(big.Rat))) * time.Millisecond
		tgt := new(big.Rat).Sub(b.burst, big.NewRat(int64(d.Remaining+1), 1))
		d.NextAfter = time.Duration(c.msUntil(tgt)) * time.Millisecond
	}
	return d
}

// tokens returns burst - debt as a float64.
func (b *a59Bucket) tokens() float64 {
	f, _ := new(big.Rat).Sub(b.burst, b.debt).Float64()
	return f
}

// state is what a window reports inside a denied Multi decision: its
// current debt's Remaining, ResetAfter and NextAfter, and RetryAfter (0
// when n fits it alone).
func (b *a59Bucket) state(n int) limit.Decision {
	d := b.decision(n, false)
	if d.Allowed {
		c := b.decision(1, false) // fields of the current debt, not after n
		c.Allowed, c.RetryAfter, c.Never = true, 0, false
		c.Remaining = int(max(floorRat(new(big.Rat).Sub(b.burst, b.debt)), 0))
		c.ResetAfter, c.NextAfter = 0, 0
		if b.debt.Sign() > 0 {
			c.ResetAfter = time.Duration(b.msUntil(new(big.Rat))) * time.Millisecond
			tgt := new(big.Rat).Sub(b.burst, big.NewRat(int64(c.Remaining+1), 1))
			c.NextAfter = time.Duration(b.msUntil(tgt)) * time.Millisecond
		}
		return c
	}
	return d
}
