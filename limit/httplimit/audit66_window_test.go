package httplimit_test

import (
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var a66W = regexp.MustCompile(`;w=(\d+)`)

// TestAudit66WindowIsRefillAsHeld: package doc, "Answers": "w (window,
// seconds) the time to refill it from empty as the limiter holds it
// (ceil(burst/rate) for an exact policy, a little more for an inexact
// one of package limit ...)". As the limiter holds it: a full burst
// spent from an empty key reads a ResetAfter of exactly that refill, so
// w must be max(ceil(ResetAfter), 1) s. Swept over random rates (short
// fractions and not), bursts, both engines, and after SetLimit (a full
// burst that fills a count-min key to MaxDebt is left out: see limit's
// TestAudit66FindingEarlyAtMaxDebtCap).
func TestAudit66WindowIsRefillAsHeld(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 3))
	checked := 0
	for i := 0; i < 3000; i++ {
		var r limit.Limit
		switch rng.IntN(4) {
		case 0:
			r = limit.Limit(float64(1+rng.IntN(50)) / float64(1+rng.IntN(50)))
		case 1:
			r = limit.Every(time.Duration(1+rng.IntN(5000)) * time.Millisecond)
		case 2:
			r = limit.Limit(math.Exp(rng.Float64()*16 - 8))
		default:
			r = limit.Limit(float64(1+rng.IntN(1000)) / 7)
		}
		b := 1 + rng.IntN(2000)
		if rng.IntN(4) == 0 {
			b = 1 + rng.IntN(1<<20)
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(1), limit.WithCapacity(5, 0.5)}
		if rng.IntN(2) == 0 {
			opts = append(opts, limit.WithMaxDebt(float64(min(4*b, 1<<24))))
		}
		l, err := limit.New(r, b, opts...)
		if err != nil {
			continue
		}
		if rng.IntN(3) == 0 {
			if err := l.SetLimit(r / limit.Limit(1+rng.IntN(3))); err != nil {
				continue
			}
		}
		if float64(l.Burst())*float64(r)/float64(l.Limit()) >= l.MaxDebt()*(1-1e-9) && l.Engine() == limit.CountMin {
			// A full burst at MaxDebt on the count-min: its ResetAfter is
			// early there (limit's TestAudit66FindingEarlyAtMaxDebtCap).
			continue
		}
		m, err := httplimit.New(l)
		if err != nil {
			t.Fatal(err)
		}
		d := l.DecideN(l.Now(), "k", l.Burst())
		if !d.Allowed {
			t.Fatalf("a full burst from an empty key denied: New(%v, %d)", float64(r), b)
		}
		h := http.Header{}
		m.SetHeaders(h, d)
		mm := a66W.FindStringSubmatch(h.Get("RateLimit-Policy"))
		if mm == nil {
			t.Fatalf("no w in %q", h.Get("RateLimit-Policy"))
		}
		w, _ := strconv.ParseInt(mm[1], 10, 64)
		want := max(int64(math.Ceil(d.ResetAfter.Seconds())), 1)
		checked++
		if w != want {
			t.Errorf("New(%v, %d) on %v (exact %v; limit now %v): w=%d, but a full burst reads ResetAfter %v (want w=%d)",
				float64(r), b, l.Engine(), l.Exact(), float64(l.Limit()), w, d.ResetAfter, want)
		}
	}
	t.Logf("%d checked", checked)
}
