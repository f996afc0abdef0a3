package httplimit_test

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit67WindowAtMaxDebtCap: package doc, "Answers": w is "the time to
// refill it from empty as the limiter holds it". Audit 66's window check
// left out a full burst that fills a count-min key to MaxDebt (its
// ResetAfter was early there); since stop 47 such a read counts as the
// float32 clamp. Here exactly those: MaxDebt = burst > 65536, inexact and
// short-fraction rates, on the count-min; w must be max(ceil(ResetAfter),
// 1), after SetLimit too.
func TestAudit67WindowAtMaxDebtCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(67, 1))
	checked := 0
	for i := 0; i < 300; i++ {
		var r limit.Limit
		switch rng.IntN(3) {
		case 0:
			r = limit.Limit(float64(1+rng.IntN(50)) / float64(1+rng.IntN(50)))
		case 1:
			r = limit.Limit(math.Exp(rng.Float64()*12 - 8))
		default:
			r = limit.Limit(float64(1+rng.IntN(1000)) / 7)
		}
		b := 65537 + rng.IntN(1<<23)
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l, err := limit.New(r, b, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(float64(b)), limit.WithEngine(limit.CountMin), limit.WithSize(2, 256))
		if err != nil {
			continue
		}
		if rng.IntN(3) == 0 {
			if err := l.SetLimit(r * limit.Limit(1+rng.IntN(3))); err != nil {
				continue
			}
		}
		m, err := httplimit.New(l)
		if err != nil {
			t.Fatal(err)
		}
		d := l.DecideN(l.Now(), "k", l.Burst())
		if !d.Allowed {
			t.Fatalf("full burst denied: New(%v, %d)", float64(r), b)
		}
		h := http.Header{}
		m.SetHeaders(h, d)
		mm := a66W.FindStringSubmatch(h.Get("RateLimit-Policy"))
		if mm == nil {
			t.Fatalf("no w in %q", h.Get("RateLimit-Policy"))
		}
		w, _ := strconv.ParseInt(mm[1], 10, 64)
		if d.ResetAfter == math.MaxInt64 {
			continue // saturated Duration (292 years): w is computed in float64 seconds
		}
		want := max(int64(math.Ceil(d.ResetAfter.Seconds())), 1)
		checked++
		if w != want {
			t.Errorf("New(%v, %d, MaxDebt %d) limit now %v: w=%d, a full burst reads ResetAfter %v (want w=%d)", float64(r), b, b, float64(l.Limit()), w, d.ResetAfter, want)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d checked", checked)
	}
}
