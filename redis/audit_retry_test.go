package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditRetryAfterRandom: Decision.RetryAfter is "the exact wait,
// rounded up to the ms, after which the same request fits if nothing else
// is admitted meanwhile (never early)": at random rates, bursts, debts and
// request sizes (fractional rates included), on a fake clock, the request
// is admitted at RetryAfter (never early), with and without the deny
// cache (exactness, denial 1 ms before, is TestAuditRetryAfterNotLate). ResetAfter
// is the time until the debt drains to 0: after it the whole burst fits.
func TestAuditRetryAfterRandom(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	rates := []float64{3, 7, 0.3, 13.7, 1000.0 / 3, 0.7, 17, 2.9, 1e4 / 7}
	for _, cache := range []uint32{0, 1 << 10} {
		for trial := range 150 {
			rate := rates[rng.IntN(len(rates))]
			burst := float64(1 + rng.IntN(50))
			if rng.IntN(3) == 0 {
				burst += float64(rng.IntN(8)) / 8
			}
			take := burst * (0.5 + rng.Float64()/2)
			take = math.Round(take*8) / 8 // float32-exact
			n := float64(1+rng.IntN(int(burst))) * 0.25
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000 + int64(rng.IntN(1000)))
			name := fmt.Sprintf("auditretry:%d:%d", cache, trial)
			l := e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(rate, burst), Levels: 2, CellsPerLevel: 64,
				DenyCacheCells: cache, PreCheck: cache > 0, Clock: clk, ServerCheck: CheckSkip})
			if d, err := l.AllowN(ctx, "k", take); err != nil || !d.Allowed {
				t.Fatalf("%s: take %v of burst %v: %+v, %v", name, take, burst, d, err)
			}
			// A few ms pass, so the debt is not a whole number any more.
			clk.Advance(time.Duration(rng.IntN(5)) * time.Millisecond)
			d, err := l.AllowN(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				continue
			}
			if d.RetryAfter <= 0 {
				t.Fatalf("%s: denied with RetryAfter %v", name, d.RetryAfter)
			}
			clk.Advance(d.RetryAfter)
			d2, err := l.AllowN(ctx, "k", n)
			if err != nil || !d2.Allowed {
				t.Errorf("%s (rate %v burst %v take %v n %v cache %d): denied at RetryAfter %v: %+v, %v", name, rate, burst, take, n, cache, d.RetryAfter, d2, err)
				continue
			}
			// ResetAfter of an admission: the debt is 0 after it.
			if d2.ResetAfter <= 0 {
				t.Errorf("%s: admitted with debt, ResetAfter %v", name, d2.ResetAfter)
			}
			clk.Advance(d2.ResetAfter)
			if q, err := l.Sketch().Query(ctx, "k"); err != nil || q != 0 {
				t.Errorf("%s (rate %v): debt %v (%v) at ResetAfter %v", name, rate, q, err, d2.ResetAfter)
			}
		}
	}
}

// TestAuditRetryAfterNotLate: RetryAfter is "the exact wait, rounded up to
// the ms" (Decision), "the smallest whole ms r with debt - Rate*r/1000 + n
// <= Burst" (docs/distributed.md; TestRetryAfterExact checks a denial 1 ms
// before it). Rate 10/s, Burst 21: take 21, 2 ms later ask for 2. The
// debt is 20.98, so r = (20.98 + 2 - 21) / 10 s = 198 ms, and the server
// does admit at 198 ms; it answers RetryAfter 199 ms, because it divides
// the already-decayed debt (1.98 / 10 * 1000 = 198.00000000000003) and
// takes the ceiling, and never steps down.
func TestAuditRetryAfterNotLate(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "auditlate", Limit: PerSecond(10, 21), Clock: clk, ServerCheck: CheckSkip})
	if d, err := l.AllowN(ctx, "k", 21); err != nil || !d.Allowed {
		t.Fatalf("AllowN(21) = %+v, %v", d, err)
	}
	clk.Advance(2 * time.Millisecond)
	d, err := l.AllowN(ctx, "k", 2)
	if err != nil || d.Allowed {
		t.Fatalf("AllowN(2) = %+v, %v; want denied", d, err)
	}
	clk.Advance(198 * time.Millisecond)
	admitted, _ := l.AllowN(ctx, "k", 2)
	if d.RetryAfter != 198*time.Millisecond {
		t.Errorf("RetryAfter = %v, want 198ms (the server admits the same request at 198ms: %v)", d.RetryAfter, admitted.Allowed)
	}
}
