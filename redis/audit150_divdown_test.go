package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// a150Prod is q x n as an exact rational.
func a150Prod(q float64, n uint32) *big.Rat {
	r := new(big.Rat).SetFloat64(q)
	return r.Mul(r, new(big.Rat).SetInt64(int64(n)))
}

// a150CheckDivDown checks that divDown(x, n) is the largest float64 q
// with q x n <= x exactly.
func a150CheckDivDown(t *testing.T, x float64, n uint32) {
	t.Helper()
	q := divDown(x, n)
	X := new(big.Rat).SetFloat64(x)
	if a150Prod(q, n).Cmp(X) > 0 {
		t.Errorf("divDown(%v, %d) = %v: times n exceeds x", x, n, q)
	}
	if up := math.Nextafter(q, math.Inf(1)); !math.IsInf(up, 1) && a150Prod(up, n).Cmp(X) <= 0 {
		t.Errorf("divDown(%v, %d) = %v: not the largest (%v x n <= x too)", x, n, q, up)
	}
	if e := x / float64(n); q != e && q != math.Nextafter(e, 0) {
		t.Errorf("divDown(%v, %d) = %v: more than an ulp below x/n = %v", x, n, q, e)
	}
}

// TestAudit150DivDownEdges: divDown at n that divides exactly, n = 1,
// n = 2^32-1, quotients that are subnormal or at the float32 normal
// floor, the largest float64, and quotients that round up (10/3) or are
// exact; and a sample of random x and n. Each is the largest q with q x n
// <= x (checked with exact rationals), never more than an ulp below x/n.
func TestAudit150DivDownEdges(t *testing.T) {
	xs := []float64{10, 20, 1, 3, 0x100000000000020, 1 << 53, 1<<53 - 1, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 3 * math.SmallestNonzeroFloat64, 0x1p-1022, 0x1p-126, 3 * 0x1p-126,
		math.Nextafter(3*0x1p-126, 0), 0.1, 1e300, 1e-300, math.Pi, 100.0 / 3, 4294967295, 4294967295 * 3}
	ns := []uint32{1, 2, 3, 7, 10, 1000, 1 << 31, math.MaxUint32 - 1, math.MaxUint32}
	for _, x := range xs {
		for _, n := range ns {
			a150CheckDivDown(t, x, n)
		}
	}
	rng := rand.New(rand.NewPCG(150, 150))
	for range 5000 {
		x := math.Ldexp(1+rng.Float64(), rng.IntN(2000)-1074)
		n := rng.Uint32N(math.MaxUint32) + 1
		if rng.IntN(2) == 0 {
			n = rng.Uint32N(20) + 1
		}
		a150CheckDivDown(t, x, n)
	}
	// Exact quotients are kept as they are.
	for _, c := range [][3]float64{{10, 2, 5}, {20, 2, 10}, {3, 3, 1}, {0x1p-126 * 3, 3, 0x1p-126}, {4294967295, 4294967295, 1}} {
		if q := divDown(c[0], uint32(c[1])); q != c[2] {
			t.Errorf("divDown(%v, %v) = %v, want %v", c[0], c[1], q, c[2])
		}
	}
	if q := divDown(10, 3); q != math.Nextafter(10.0/3, 0) {
		t.Errorf("divDown(10, 3) = %v, want fl(10/3) less an ulp", q)
	}
}

// TestAudit150FallbackBurstFloor: LimiterConfig.Instances' "Burst/N
// must be at least 2^-126" holds for the rounded-down quotient exactly:
// a Burst of 3 x 2^-126 over 3 is accepted (Burst/N is 2^-126 exactly),
// one ulp less is refused; a Rate and Burst divided by 2^32-1 are
// accepted.
func TestAudit150FallbackBurstFloor(t *testing.T) {
	lookTool(t, "redis-server")
	e := newEnv(t, "rueidis", "standalone")
	try := func(r, b float64, n uint32) error {
		_, err := e.newLimiter(t, LimiterConfig{Name: "a150f", Limit: PerSecond(r, b),
			Policy: LocalFallback, Instances: n, ServerCheck: CheckSkip, Timeout: time.Second})
		return err
	}
	if err := try(1, 3*0x1p-126, 3); err != nil {
		t.Errorf("Burst 3 x 2^-126 over 3: %v, want accepted (Burst/N = 2^-126)", err)
	}
	if err := try(1, math.Nextafter(3*0x1p-126, 0), 3); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Burst 3 x 2^-126 less an ulp over 3: %v, want ErrInvalidConfig", err)
	}
	if err := try(1e-3, 1e6, math.MaxUint32); err != nil {
		t.Errorf("1e-3/s x 1e6 over 2^32-1: %v, want accepted", err)
	}
}

// a150Model is the exact token bucket at Rate/N and Burst/N (rationals).
type a150Model struct {
	rate, burst, tokens *big.Rat // per ms, tokens, tokens
}

// wait is the exact wait in whole ms (rounded up) until n tokens fit.
func (m *a150Model) wait(n *big.Rat) int64 {
	need := new(big.Rat).Sub(n, m.tokens)
	if need.Sign() <= 0 {
		return 0
	}
	q := need.Quo(need, m.rate)
	w := new(big.Int).Quo(q.Num(), q.Denom())
	if new(big.Rat).SetInt(w).Cmp(q) < 0 {
		w.Add(w, big.NewInt(1))
	}
	return w.Int64()
}

func (m *a150Model) advance(ms int64) {
	m.tokens.Add(m.tokens, new(big.Rat).Mul(m.rate, new(big.Rat).SetInt64(ms)))
	if m.tokens.Cmp(m.burst) > 0 {
		m.tokens.Set(m.burst)
	}
}

// TestAudit150FallbackWaitsAgainstExactBucket: docs/distributed.md,
// Failure policies: "against the exact bucket at Rate/N and Burst/N its
// waits are up to 1 ms late ... never early, and never an admission that
// bucket denies". With Rate/N and Burst/N now rounded down (4352f06), at
// limits whose quotients are inexact (10/s x 20 over 3, 1/s x 1 over 3,
// 7/s x 7 over 3, 1000/s x 1000 over 7, 0.3/s x 1 over 3) and exact ones
// (10/s x 20 over 2): a fresh key drained at a frozen clock, then the
// RetryAfter of each of 5 denials (the clock moved to each) is at least
// the exact bucket's wait and at most 1 ms more, the request fits at it,
// the fallback never admits what that bucket denies, and each decision's
// Limit is the rounded-down Rate/N and Burst/N.
func TestAudit150FallbackWaitsAgainstExactBucket(t *testing.T) {
	lookTool(t, "redis-server")
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	cases := []struct {
		r, b float64
		n    uint32
	}{{10, 20, 3}, {10, 20, 2}, {1, 1, 3}, {7, 7, 3}, {1000, 1000, 7}, {0.3, 1, 3}, {10, 10, 3}, {100, 100.0 / 3, 3},
		{10, 20, 4}, {1, 2, 2}, {3, 3, 3}, {1, 1, 10}, {10, 10, 7}, {1, 1, 49}, {0.1, 0.3, 3}}
	var rigs []fallbackRig
	for i, c := range cases {
		rigs = append(rigs, newFallbackRig(t, e, fmt.Sprintf("a150w%d", i), PerSecond(c.r, c.b), c.n, nil))
	}
	e.srv.kill()
	for i, r := range rigs {
		c := cases[i]
		for k, req := range []float64{1, 0.5, 0.25, 0.1} {
			if req > divDown(c.b, c.n) {
				continue // above the fallback's Burst: no decision
			}
			key := fmt.Sprintf("k%d", k)
			N := new(big.Rat).SetInt64(int64(c.n))
			m := &a150Model{
				rate:  new(big.Rat).Quo(new(big.Rat).SetFloat64(c.r), new(big.Rat).Mul(N, big.NewRat(1000, 1))),
				burst: new(big.Rat).Quo(new(big.Rat).SetFloat64(c.b), N),
			}
			m.tokens = new(big.Rat).Set(m.burst)
			R := new(big.Rat).SetFloat64(req)
			cycles := 0
			for step := 0; step < 200; step++ {
				d, err := r.l.AllowN(ctx, key, req)
				if !errors.Is(err, ErrDegraded) {
					t.Fatalf("%v/%d: %v, want the fallback's decision", c, c.n, err)
				}
				// The decision's Limit is the fallback's, rounded down: Rate/N
				// and Burst/N where they are exact (10/s x 20 over 2: 5 and 10).
				if wl := (Limit{Rate: divDown(c.r, c.n), Burst: divDown(c.b, c.n)}); d.Limit != wl {
					t.Errorf("%v over %d: the fallback decision's Limit %+v, want %+v", c, c.n, d.Limit, wl)
				}
				if c.n == 2 && d.Limit != (Limit{Rate: c.r / 2, Burst: c.b / 2}) {
					t.Errorf("%v over 2: Limit %+v, want the exact halves", c, d.Limit)
				}
				if d.Allowed {
					if m.tokens.Cmp(R) < 0 {
						t.Errorf("%v: fallback admitted %v at step %d where the exact bucket (%s tokens) denies", c, req, step, m.tokens.FloatString(20))
					}
					m.tokens.Sub(m.tokens, R)
					continue
				}
				w := m.wait(R)
				got := d.RetryAfter.Milliseconds()
				if d.RetryAfter%time.Millisecond != 0 || got < w || got > w+1 {
					t.Errorf("%v over %d, request %v, step %d: RetryAfter %v, exact bucket's wait %d ms (want it or 1 ms more)", c, c.n, req, step, d.RetryAfter, w)
				}
				r.clk.Advance(d.RetryAfter)
				m.advance(got)
				if d2, _ := r.l.AllowN(ctx, key, req); !d2.Allowed {
					t.Errorf("%v over %d, request %v: denied again at its RetryAfter %v", c, c.n, req, d.RetryAfter)
				}
				m.tokens.Sub(m.tokens, R)
				if cycles++; cycles == 5 {
					break
				}
			}
		}
	}
}
