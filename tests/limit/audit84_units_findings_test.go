package limit_test

// Audit 84 (units): findings at the boundaries of the unit choice.

import (
	"fmt"
	"math/big"
	"math/bits"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit84UnitsFixedDocShortFractionRounded: limit/doc.go,
// "Exactness", said the rate is rounded down only "for a rate that is not
// a short fraction or whose token a float32 cannot add exactly up to
// MaxDebt". Each rate below is a short fraction whose token a float32
// adds exactly up to MaxDebt (checked here: k x token in units is a
// float32 for every k <= MaxDebt), yet internal/units rounds its rate: it
// keeps a fraction's units past 2^24 only while bits(odd part) +
// bits(MaxDebt) <= 24 and the drain is <= 4096. Audit 84 found a full
// burst's ResetAfter late by far more than one float32 step (131 s at
// 1/minute with burst 4096, 40 s at Every(514ms) with burst 20000, 2 ms
// at 5001/s with burst 10000); the doc now states the code's rule, and
// this test asserts its bound for rounded rates: never early, late by
// less than 2^(1-m) of the drain, m = max(24 - bits(MaxDebt), 8).
func TestAudit84UnitsFixedDocShortFractionRounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		lim   limit.Limit
		p, q  int64
		burst int
	}{
		{"1/minute-burst4096", limit.Every(time.Minute), 1, 60, 4096},                   // unit 60000 = 2^5 x 1875: 1875 x 8192 < 2^24
		{"every514ms-burst20000", limit.Every(514 * time.Millisecond), 500, 257, 20000}, // unit 514 = 2 x 257: 257 x 40000 < 2^24
		{"5001/s-burst10000", 5001, 5001, 1, 10000},                                     // unit 1000, drain 5001: 125 x 20000 < 2^24
	} {
		t.Run(c.name, func(t *testing.T) {
			// The fraction's units: a token is c/k ms in lowest terms.
			tok := new(big.Rat).SetFrac64(1000*c.q, c.p)
			cu := tok.Num().Int64()
			md := int64(2 * c.burst)
			if md*cu <= 1<<24 {
				t.Fatalf("setup: %d x %d within 2^24 (exact)", md, cu)
			}
			for k := int64(1); k <= md; k++ {
				if v := float64(k * cu); float64(float32(v)) != v {
					t.Fatalf("setup: %d tokens (%v units) not a float32", k, v)
				}
			}
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(c.lim, c.burst, limit.WithClock(clk), limit.WithSeed(1))
			if err != nil {
				t.Fatal(err)
			}
			if l.Exact() {
				t.Fatalf("Exact() true with MaxDebt x unit = %d > 2^24", md*cu)
			}
			d := l.DecideN(clk.Now(), "k", c.burst)
			if !d.Allowed {
				t.Fatalf("full burst denied: %+v", d)
			}
			// The rate rounded down by less than 2^(1-m) of itself: the
			// debt's drain time at most that much longer.
			exact := new(big.Rat).Mul(tok, big.NewRat(int64(c.burst), 1))
			m := max(24-bits.Len64(uint64(md)), 8)
			bound := new(big.Rat).Mul(exact, new(big.Rat).Add(big.NewRat(1, 1), new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(m-1)))))
			ceil := func(x *big.Rat) int64 {
				q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
				if m.Sign() != 0 {
					q.Add(q, big.NewInt(1))
				}
				return q.Int64()
			}
			want := time.Duration(ceil(bound)) * time.Millisecond
			if d.ResetAfter < time.Duration(ceil(exact))*time.Millisecond {
				t.Errorf("%s: ResetAfter %v before the exact bucket's %v", c.name, d.ResetAfter, time.Duration(ceil(exact))*time.Millisecond)
			}
			if d.ResetAfter > want {
				t.Errorf("%s: ResetAfter %v after a full burst from an empty key; the exact bucket's is %v and the documented rate rounding allows %v (late by %v, %.3g of the drain)",
					c.name, d.ResetAfter, time.Duration(ceil(exact))*time.Millisecond, want,
					d.ResetAfter-time.Duration(ceil(exact))*time.Millisecond,
					float64(d.ResetAfter-time.Duration(ceil(exact))*time.Millisecond)/float64(time.Duration(ceil(exact))*time.Millisecond))
			}
			// And the next request's RetryAfter: one token's drain.
			e := l.DecideN(clk.Now(), "k", 1)
			one := new(big.Rat).Add(bound, tok)
			one.Sub(one, new(big.Rat).Mul(tok, big.NewRat(int64(c.burst), 1)))
			if w := time.Duration(ceil(one)) * time.Millisecond; e.RetryAfter > w {
				t.Errorf("%s: RetryAfter %v for one token after the burst; documented bound %v", c.name, e.RetryAfter, w)
			}
		})
	}
}

// TestAudit84UnitsFixedDocFractionalMaxDebt: a RejectCost that fills the
// key clamps its debt at MaxDebt. WithMaxDebt(20.03) at 10/s: the float
// 20.03 is 20.030000000000001136... tokens, and its product with the unit
// rounds to 2003 units, so the clamp holds 20.03 tokens exactly. Audit 84
// read that as 1 ms early against the rational bucket of the float's
// exact value (2004 ms); WithMaxDebt now documents that MaxDebt is held
// as the float64 nearest to d x unit, so a decimal d means what it says,
// and this test asserts the rational bucket of 2003/100 tokens, on both
// engines.
func TestAudit84UnitsFixedDocFractionalMaxDebt(t *testing.T) {
	const md = 20.03
	mdR := new(big.Rat).SetFloat64(md)
	if mdR.Cmp(big.NewRat(2003, 100)) <= 0 || md*100 != 2003 {
		t.Fatalf("setup: %v", mdR.FloatString(20))
	}
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(fmt.Sprint(eng), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l, err := limit.New(10, 10, limit.WithClock(clk), limit.WithMaxDebt(md), limit.WithRejectCost(5), limit.WithEngine(eng))
			if err != nil {
				t.Fatal(err)
			}
			if !l.Exact() {
				t.Fatal("not exact")
			}
			now := clk.Now()
			l.DecideN(now, "k", 10)
			var d limit.Decision
			for range 3 {
				d = l.DecideN(now, "k", 1) // each denial adds 5, clamped at MaxDebt
			}
			// Rational bucket of 20.03 tokens: 2003 ms.
			const reset = 2003
			if want := time.Duration(reset) * time.Millisecond; d.ResetAfter != want {
				t.Errorf("ResetAfter %v at MaxDebt %v tokens; the rational bucket's is %v", d.ResetAfter, md, want)
			}
			if want := time.Duration(reset-1000+100) * time.Millisecond; d.RetryAfter != want {
				t.Errorf("RetryAfter %v; the rational bucket's is %v", d.RetryAfter, want)
			}
		})
	}
}
