package httplimit_test

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Tiers whose rate is not a whole fraction of the limiter's (on each
// engine some are inexact, Exact false: the cost per token rounded up to
// what the engine stores), on both engines, with a RejectCost, through the middleware: every answer
// is the tier's own decision (Retry-After = ceil(RetryAfter), t =
// ceil(NextAfter), Reset = ceil(ResetAfter)), and each is kept by the
// limiter: RetryAfter predicts the tier's next decision to the
// millisecond (limit's doc: "An inexact policy is never early against
// its own bucket, and its RetryAfter still predicts its own next
// decision to the millisecond"), so a retry at Retry-After is admitted;
// t seconds after an answer of r the tier holds at least r+1 tokens;
// Reset seconds after it, its whole burst.
func TestAudit96HTTPInexactTierPromises(t *testing.T) {
	tiers := []struct {
		name  string
		lim   limit.Limit
		burst int
	}{
		{"three", 3, 7},
		{"slow", 0.7, 3},
		{"every", limit.Every(1300 * time.Millisecond), 4},
		{"seven", 7, 5},
	}
	inexact := map[limit.Engine]int{}
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for ti, tc := range tiers {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_600_000_000_000)
			opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(5), limit.WithName("base"), limit.WithEngine(e),
				limit.WithMaxDebt(100), limit.WithRejectCost(1), limit.WithCapacity(64, 0.01)}
			if e == limit.CountMin {
				opts = append(opts, limit.WithPeriod(1000*time.Hour))
			}
			base, err := limit.New(10, 20, opts...)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := base.Tier(tc.name, tc.lim, tc.burst)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Exact() {
				inexact[e]++
			}
			g := a96NewRig(t, tr)
			rng := rand.New(rand.NewPCG(96, uint64(ti)+10*uint64(e)))
			token := time.Duration(float64(time.Second) / float64(tc.lim))
			checks := [3]int{}
			for i := range 300 {
				clk.Advance(time.Duration(rng.Int64N(int64(token/time.Millisecond)+1)) * time.Millisecond)
				n := 1 + rng.IntN(min(3, tc.burst))
				w := g.do(n)
				d := g.last
				what := e.String() + " " + tc.name + " step " + strconv.Itoa(i) + " cost " + strconv.Itoa(n)
				a96Check(t, what, w, d, true)
				r, tt := a88Item(t, w.Header().Get("RateLimit"))
				switch rng.IntN(4) {
				case 0:
					if w.Code != http.StatusTooManyRequests || d.Never {
						continue
					}
					checks[0]++
					clk.Advance(d.RetryAfter - time.Millisecond)
					if p := tr.PeekN(clk.Now(), a96Key, n); p.Allowed {
						t.Fatalf("%s: RetryAfter %v, but 1 ms before it the tier admits", what, d.RetryAfter)
					}
					clk.Advance(time.Millisecond)
					if p := tr.PeekN(clk.Now(), a96Key, n); !p.Allowed {
						t.Fatalf("%s: RetryAfter %v, but then the tier denies (%+v)", what, d.RetryAfter, p)
					}
					secs, _ := strconv.Atoi(w.Header().Get("Retry-After"))
					clk.Advance(time.Duration(secs)*time.Second - d.RetryAfter)
					if w := g.do(n); w.Code != http.StatusOK {
						t.Fatalf("%s: retried at Retry-After %d s: %d", what, secs, w.Code)
					}
				case 1:
					if tt < 0 {
						continue
					}
					checks[1]++
					clk.Advance(time.Duration(tt) * time.Second)
					if got := tr.Tokens(a96Key); got < float64(r+1)-1e-9 {
						t.Fatalf("%s: r=%d t=%d, but %d s later the tier holds %v tokens", what, r, tt, tt, got)
					}
				case 2:
					checks[2]++
					reset, _ := strconv.Atoi(w.Header().Get("X-RateLimit-Reset"))
					clk.Advance(time.Duration(reset) * time.Second)
					if got := tr.Tokens(a96Key); got < float64(tc.burst)-1e-9 {
						t.Fatalf("%s: X-RateLimit-Reset %d, but then the tier holds %v of %d", what, reset, got, tc.burst)
					}
				}
			}
			if checks[0] == 0 || checks[1] == 0 || checks[2] == 0 {
				t.Errorf("%v %s: checks %v: the walk does not test every promise", e, tc.name, checks)
			}
		}
		if inexact[e] == 0 {
			t.Errorf("%v: every tier is exact; the test wants inexact ones", e)
		}
	}
}
