package httplimit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66ExactFieldsAfterSetLimit: package doc, "Answers": for a
// token bucket "w (window, seconds) the time to refill it from empty as
// the limiter holds it (ceil(burst/rate) for an exact policy ...)", "r
// (remaining) is the Decision's Remaining", "t ... its NextAfter (the
// next whole token) rounded up, left out when the bucket is full", and a
// denial is "429 with Retry-After in whole seconds, RetryAfter rounded
// up"; RateLimit-Policy follows SetLimit and SetBurst ("SetLimit and
// SetBurst show in the next answer"). Exact policies at rates that are
// not exact in float64 (1/3, 0.3, 7/13 per ms), on both engines, with
// SetLimit/SetBurst mid-sequence; every answer is checked against the
// Decision the hook saw and w against ceil(b/r) computed in big.Rat.
func TestAudit66ExactFieldsAfterSetLimit(t *testing.T) {
	type pol struct {
		num, den int64
		b        int
	}
	cases := []struct {
		name string
		p    pol
		max  float64
		opts []limit.Option
		alts []pol
	}{
		{"third/buckets", pol{1, 3, 4}, 16, nil, []pol{{1, 6, 4}, {1, 3, 8}, {2, 3, 3}}},
		{"0.3/cm", pol{3, 10, 5}, 40, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 64)}, []pol{{3, 20, 5}, {3, 10, 20}, {3, 5, 7}}},
		{"7/13ms/buckets", pol{7000, 13, 30}, 120, nil, []pol{{3500, 13, 30}, {7000, 13, 100}, {7000, 26, 9}, {1000, 1, 40}}},
		{"1/7/cm", pol{1, 7, 3}, 12, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(2, 64)}, []pol{{1, 14, 3}, {1, 7, 12}, {2, 7, 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(66, 66))
			clk := sketchtest.NewFakeClock()
			now := int64(7_000_000)
			clk.Set(now)
			l, err := limit.New(limit.Limit(float64(c.p.num)/float64(c.p.den)), c.p.b,
				append([]limit.Option{limit.WithClock(clk), limit.WithSeed(2), limit.WithMaxDebt(c.max), limit.WithName("api")}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			cur := c.p
			var seen limit.Decision
			h := httplimit.Wrap(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
				httplimit.WithHook(func(_ *http.Request, _ string, d limit.Decision) { seen = d }))
			for step := 0; step < 400; step++ {
				if rng.IntN(15) == 0 {
					a := c.alts[rng.IntN(len(c.alts))]
					if rng.IntN(2) == 0 {
						if l.SetLimit(limit.Limit(float64(a.num)/float64(a.den))) == nil {
							cur.num, cur.den = a.num, a.den
						}
					} else if l.SetBurst(a.b) == nil {
						cur.b = a.b
					}
				}
				if !l.Exact() {
					t.Fatalf("policy %v not exact", cur)
				}
				if rng.IntN(2) == 0 {
					now += int64(rng.IntN(4000))
					clk.Set(now)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				d := seen
				// w = ceil(b / r) = ceil(b * den / num)
				w := new(big.Int).Mul(big.NewInt(int64(cur.b)), big.NewInt(cur.den))
				q, m := new(big.Int).QuoRem(w, big.NewInt(cur.num), new(big.Int))
				if m.Sign() > 0 {
					q.Add(q, big.NewInt(1))
				}
				wsec := max(q.Int64(), 1)
				wantPol := fmt.Sprintf("\"api\";q=%d;w=%d", cur.b, wsec)
				if got := rec.Header().Get("RateLimit-Policy"); got != wantPol {
					t.Fatalf("step %d policy %v: RateLimit-Policy %q, want %q", step, cur, got, wantPol)
				}
				wantRL := fmt.Sprintf("\"api\";r=%d", d.Remaining)
				if d.NextAfter > 0 {
					wantRL += ";t=" + strconv.FormatInt(int64(math.Ceil(d.NextAfter.Seconds())), 10)
				}
				if got := rec.Header().Get("RateLimit"); got != wantRL {
					t.Fatalf("step %d: RateLimit %q, want %q (decision %+v)", step, got, wantRL, d)
				}
				if d.Allowed {
					if rec.Code != 200 || rec.Header().Get("Retry-After") != "" {
						t.Fatalf("step %d: admitted answered %d Retry-After %q", step, rec.Code, rec.Header().Get("Retry-After"))
					}
					continue
				}
				ra := max(int64(math.Ceil(d.RetryAfter.Seconds())), 1)
				if rec.Code != 429 || rec.Header().Get("Retry-After") != strconv.FormatInt(ra, 10) {
					t.Fatalf("step %d: denial answered %d Retry-After %q, want 429 %d (decision %+v)", step, rec.Code, rec.Header().Get("Retry-After"), ra, d)
				}
			}
		})
	}
}
