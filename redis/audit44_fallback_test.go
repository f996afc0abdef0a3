package redis

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit44FallbackGlobalRate: policy.go, LocalFallback: "N instances
// that all fall back admit at most the global rate between them". N
// instances (server down from the start, one fake clock) x 3 goroutines
// race Allow (and AllowN of 0.5) on one key in saturated rounds, the
// clock moving 37 ms between rounds, 40 rounds: after every round the
// tokens admitted by all N together never pass Burst + Rate x T (a
// rational bound), and each instance's lie within 1 request of
// floor(Burst/N + Rate/N x T) (no under-admission beyond one request
// either). Rates 7.3/s burst 11.5 with N 3, 10/s burst 25 with N 4;
// GOMAXPROCS 1, 2, 4.
func TestAudit44FallbackGlobalRate(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, tc := range []struct {
			lim Limit
			n   int
			req float64
		}{{PerSecond(7.3, 11.5), 3, 1}, {PerSecond(10, 25), 4, 1}, {PerSecond(10, 25), 4, 0.5}} {
			t.Run(fmt.Sprint(tc.lim.Rate, "/", tc.n, "/", tc.req), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				var ls []*Limiter
				for range tc.n {
					ls = append(ls, a28FallbackLimiter(t, tc.lim, uint32(tc.n), clk))
				}
				ctx := context.Background()
				adm := make([]atomic.Int64, tc.n) // admitted requests per instance
				rat := func(f float64) *big.Rat { return new(big.Rat).SetFloat64(f) }
				for round := 0; round < 40; round++ {
					T := int64(round * 37)
					var wg sync.WaitGroup
					for i, l := range ls {
						for range 3 {
							wg.Add(1)
							go func() {
								defer wg.Done()
								for {
									d, err := l.AllowN(ctx, "hot", tc.req)
									if !errors.Is(err, ErrDegraded) {
										t.Errorf("AllowN: %v", err)
										return
									}
									if !d.Allowed {
										return
									}
									adm[i].Add(1)
								}
							}()
						}
					}
					wg.Wait()
					// Global: sum x req <= Burst + Rate*T/1000.
					glob := rat(tc.lim.Rate)
					glob.Mul(glob, big.NewRat(T, 1000))
					glob.Add(glob, rat(tc.lim.Burst))
					var sum int64
					for i := range ls {
						sum += adm[i].Load()
						// Per instance: (Burst + Rate*T/1000)/N in requests.
						per := new(big.Rat).Quo(glob, big.NewRat(int64(tc.n), 1))
						per.Quo(per, rat(tc.req))
						fl := new(big.Int).Quo(per.Num(), per.Denom()).Int64()
						if a := adm[i].Load(); a > fl || a < fl-1 {
							t.Fatalf("round %d (T=%d ms) instance %d: %d requests of %v admitted; want %d..%d ((Burst+Rate*T)/N = %s tokens)", round, T, i, a, tc.req, fl-1, fl, new(big.Rat).Quo(glob, big.NewRat(int64(tc.n), 1)).FloatString(4))
						}
					}
					got := new(big.Rat).Mul(big.NewRat(sum, 1), rat(tc.req))
					if got.Cmp(glob) > 0 {
						t.Fatalf("round %d (T=%d ms): %s tokens admitted by %d falling-back instances; the global bound is %s", round, T, got.FloatString(2), tc.n, glob.FloatString(4))
					}
					clk.Advance(37 * time.Millisecond)
				}
			})
		}
	})
}

// TestAudit44FallbackNoWaitCases: limiter.go, Decision.RetryAfter: "-1
// also when n > Burst (it never fits), and on a denial made without the
// server that has no wait to give: FailClosed's, and LocalFallback's for
// an n above the fallback's Burst/N but within Burst ... Limit is then
// the limiter's, not the fallback's". Server down from the start, Burst
// 12, N 4 (fallback Burst 3): n 5 (within Burst) and n 13 (above Burst)
// get RetryAfter -1, not Allowed, an ErrDegraded error; n 5 carries the
// limiter's Limit; a fallback denial of n 1 after 3 admissions carries a
// positive wait (Rate/N = 1/s: 1 s) and the fallback's Limit.
func TestAudit44FallbackNoWaitCases(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	lim := PerSecond(4, 12)
	l := a28FallbackLimiter(t, lim, 4, clk)
	ctx := context.Background()
	for _, n := range []float64{5, 13} {
		d, err := l.AllowN(ctx, "k", n)
		if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != -1 {
			t.Errorf("AllowN(n=%v) = %+v, %v; want a denial with RetryAfter -1 and ErrDegraded", n, d, err)
		}
		if n == 5 && d.Limit != lim {
			t.Errorf("AllowN(n=5).Limit = %+v; want the limiter's %+v", d.Limit, lim)
		}
	}
	for i := range 3 {
		if d, _ := l.Allow(ctx, "k"); !d.Allowed {
			t.Fatalf("fallback request %d denied: %+v", i, d)
		}
	}
	d, err := l.Allow(ctx, "k")
	if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != time.Second || d.Limit != (Limit{Rate: 1, Burst: 3}) {
		t.Errorf("fallback denial = %+v, %v; want RetryAfter 1s, Limit {1 3}", d, err)
	}
	if st := l.Stats(); st.PolicyAdmits != 3 || st.PolicyDenials != 3 || st.ServerErrors != 6 || st.Timeouts != 0 || st.DegradedPeriod != 1 {
		t.Errorf("stats %+v; want 3 admits, 3 denials, 6 errors, no timeouts, 1 degraded period", st)
	}
}
