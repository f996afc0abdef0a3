package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAudit46RetryResetNeitherEarlyNorLate: on the fake clock, for exact
// units (10/s, 1/min, 100/h) and token-counting rates (Rate pi, 1/7.3 per
// s), random AllowN steps; after every denial with a RetryAfter R > 0,
// the same n is denied at R - 1 ms and admitted at R (limiter.go: "the
// exact wait, rounded up to the ms ... never early"; distributed.md "so
// the answer is neither early nor late"); after every admission with a
// ResetAfter Z, an n = 0 peek at Z - 1 ms reads Remaining < Burst and at
// Z reads Remaining == Burst ("ResetAfter is the time until the key's debt
// drains to 0").
func TestAudit46RetryResetNeitherEarlyNorLate(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for ci, lim := range []Limit{PerSecond(10, 10), PerSecond(1.0/60, 3), PerSecond(100.0/3600, 100), PerSecond(math.Pi, 10), PerSecond(1/7.3, 4.5)} {
		t.Run(fmt.Sprintf("rate=%v,burst=%v", lim.Rate, lim.Burst), func(t *testing.T) {
			l, clk := a46Limiter(t, e, fmt.Sprint("a46ne", ci), lim, 0)
			rng := rand.New(rand.NewPCG(46, uint64(ci)))
			drain := time.Duration(lim.Burst / lim.Rate * float64(time.Second))
			for step := 0; step < 120; step++ {
				key := fmt.Sprint("k", step%3)
				n := float64(1 + rng.IntN(int(math.Ceil(lim.Burst))))
				if n > lim.Burst {
					n = lim.Burst
				}
				d, err := l.AllowN(ctx, key, n)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed && d.RetryAfter > 0 {
					R := d.RetryAfter
					clk.Advance(R - time.Millisecond)
					d1, _ := l.AllowN(ctx, key, n)
					if d1.Allowed {
						t.Fatalf("step %d key %s n=%v: RetryAfter %v, but admitted 1 ms earlier (RetryAfter late)", step, key, n, R)
					}
					clk.Advance(time.Millisecond)
					d2, _ := l.AllowN(ctx, key, n)
					if !d2.Allowed {
						t.Fatalf("step %d key %s n=%v: RetryAfter %v, denied at it (early): %+v", step, key, n, R, d2)
					}
					d = d2
				}
				if d.Allowed && rng.IntN(4) == 0 {
					Z := d.ResetAfter
					clk.Advance(Z - time.Millisecond)
					p1, _ := l.AllowN(ctx, key, 0)
					clk.Advance(time.Millisecond)
					p2, _ := l.AllowN(ctx, key, 0)
					if Z > 0 && !(p1.Remaining < lim.Burst) {
						t.Fatalf("step %d key %s: ResetAfter %v, but Remaining %v == Burst 1 ms before (late)", step, key, Z, p1.Remaining)
					}
					if p2.Remaining != lim.Burst || p2.ResetAfter != 0 {
						t.Fatalf("step %d key %s: ResetAfter %v, at it Remaining %v ResetAfter %v; want Burst %v and 0 (early)", step, key, Z, p2.Remaining, p2.ResetAfter, lim.Burst)
					}
				}
				clk.Advance(time.Duration(rng.Int64N(int64(drain/3) + 1)))
			}
		})
	}
}

// TestAudit46PeekDrift: an n = 0 call is a write on the server (the
// function commits delta 0, re-stamping every cell at its rounded-up
// value). For a token-counting rate, 2000 peeks 1 ms apart must not move
// the key's debt above the exact drain by more than the documented
// rounding: "late by that rounding (about Burst x 2^-23 tokens per
// write)" (limiter.go). Measured and logged.
func TestAudit46PeekDrift(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	lim := PerSecond(math.Pi/10, 1000) // drains 1000 tokens in ~3183 s
	l, clk := a46Limiter(t, e, "a46drift", lim, 0)
	if _, err := l.AllowN(ctx, "k", 777.777); err != nil {
		t.Fatal(err)
	}
	const k = 2000
	for i := 0; i < k; i++ {
		clk.Advance(time.Millisecond)
		if _, err := l.AllowN(ctx, "k", 0); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := l.AllowN(ctx, "k", 0)
	exactDebt := 777.777 - lim.Rate*float64(k)/1000
	gotDebt := lim.Burst - d.Remaining
	bound := float64(k+2) * lim.Burst * math.Ldexp(1, -23)
	t.Logf("after %d peeks: debt %.9f, exact %.9f, excess %.3g tokens (%.3g ms of drain); documented bound %d x Burst x 2^-23 = %.3g", k, gotDebt, exactDebt, gotDebt-exactDebt, (gotDebt-exactDebt)/lim.Rate*1000, k+2, bound)
	if gotDebt < exactDebt-1e-4 || gotDebt-exactDebt > bound {
		t.Errorf("debt %v vs exact %v: excess %v outside [0, %v]", gotDebt, exactDebt, gotDebt-exactDebt, bound)
	}
}
