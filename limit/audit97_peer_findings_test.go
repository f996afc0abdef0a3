package limit_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit97PeerDocumentedStaleTAfterLaterCall (audit 97; documented at
// stop 59, the text below says what was wrong; readings.md now says a
// stale t is credited up to any key's later call, and the test asserts
// it). docs/readings.md:567 (the
// AllowN row of the x/time/rate parity table) says "A t before a time
// already used counts as that time, as x/time/rate counts it (no elapsed
// time)". x/time/rate counts no elapsed time only for a t before its own
// last (the t of the bucket's last admitted request); here "a time
// already used" is the latest t of any call on any key (doc.go:173-176:
// "all keys share one time scale"), a read or a denial included. So a t
// between the key's last request and a later call elsewhere is credited
// the drain up to that later call, which x/time/rate does not credit:
// the limiter admits more than x/time/rate at that t. New(10, 20): the
// key spends its burst at T; a call on another key at T+2 s; then
// AllowN(T+1 s, key, 20). x/time/rate (one bucket per key, last = T)
// has 10 tokens at T+1 s and denies 20; the limiter counts T+1 s as
// T+2 s, reads 20 tokens and admits 20: 40 requests of the key at t's 1 s
// apart, where the bucket (10/s, burst 20) holds 30. Same with a PeekN or
// a TokensAt of the key itself at T+2 s (x/time/rate's TokensAt does not
// move last). Fails on both engines: the parity sentence is false for
// such t's (the doc.go wording, which lists the stale-t rule under the
// shared time scale, is accurate; readings.md calls the future t "the
// one deviation" and this one parity).
func TestAudit97PeerDocumentedStaleTAfterLaterCall(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		for _, later := range []string{"other key", "PeekN", "TokensAt"} {
			l, clk := a97Port(t, eng, 10, 20)
			t0 := clk.Now()
			if !l.AllowN(t0, "k", 20) {
				t.Fatal("a full burst from an empty key denied")
			}
			t2 := t0.Add(2 * time.Second)
			clk.SetTime(t2)
			switch later {
			case "other key":
				l.AllowN(t2, "other", 1)
			case "PeekN":
				l.PeekN(t2, "k", 1)
			default:
				l.TokensAt(t2, "k")
			}
			t1 := t0.Add(time.Second)
			// x/time/rate at t1, its last at t0: 10 tokens.
			// Counted at T+2s, the limiter's time (readings.md): 20
			// tokens, where x/time/rate counts 10.
			if tk := l.TokensAt(t1, "k"); tk != 20 {
				t.Errorf("after %s at T+2s: TokensAt(T+1s) = %v; readings.md: counted at T+2s, 20", later, tk)
			}
			if !l.AllowN(t1, "k", 20) {
				t.Errorf("after %s at T+2s: AllowN(T+1s, 20) denied; readings.md: counted at T+2s, admitted", later)
			}
		}
	})
}

// TestAudit97PeerDocumentedCappedPeriodAmnesty (audit 97; documented at
// stop 59, the text below says what was wrong; doc.go now states the
// capped Period and the amnesty after two of them, and the test asserts
// that none comes sooner). doc.go:193-196 (Rotation
// and amnesty): "a key that went silent at MaxDebt is never amnestied
// when (G-1) x Period x rate >= MaxDebt (...). New refuses a shorter
// Period"; doc.go:99-100 "Otherwise decisions are never earlier than the
// exact bucket's". The count-min's Period is a time.Duration, at most
// about 292 years (periodFor caps it there), and New compares an explicit
// Period with a minimum capped the same way, and does not check the
// default at all: where MaxDebt takes longer than 292 years to drain
// (x/time/rate's TestTinyLimit rate 1e-10/s with burst 1: MaxDebt 2, 634
// years; Every(24h) with WithMaxDebt(300000), 821 years), New accepts
// the capped Period, (G-1) x Period x rate < MaxDebt, and the generation
// that missed the key's debt is read while the debt still stands: a key
// that reserved up to MaxDebt at T reads a full bucket, and is admitted,
// 2 Periods (584 years) later, where the exact bucket (and x/time/rate)
// still owe 0.155 tokens (1e-10/s) and deny. The documented behaviour:
// New refuses the limiter, or the debt is never amnestied.
func TestAudit97PeerDocumentedCappedPeriodAmnesty(t *testing.T) {
	for _, c := range []struct {
		r    limit.Limit
		b    int
		opts []limit.Option
	}{
		{1e-10, 1, nil},
		{limit.Every(24 * time.Hour), 30, []limit.Option{limit.WithMaxDebt(300_000)}},
	} {
		clk := limittest.NewFakeClock()
		clk.Set(a97Base)
		l, err := limit.New(c.r, c.b, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1)}, c.opts...)...)
		if err != nil {
			t.Fatalf("New(%v, %d): %v", c.r, c.b, err)
		}
		rate := float64(c.r) / 1000 // tokens per ms
		p := l.Period().Milliseconds()
		if maxP := int64(math.MaxInt64 / int64(time.Millisecond)); p != maxP {
			t.Fatalf("New(%v, %d): Period %v, want the longest Duration in ms (doc.go: capped there)", c.r, c.b, l.Period())
		}
		// Fill the key to MaxDebt at T; one Period + 1 ms later the
		// generation read has seen the debt: no amnesty before two.
		for l.ReserveN(clk.Now(), "k", c.b).OK() {
		}
		clk.Set(a97Base + p + 1)
		want := float64(c.b) - max(l.MaxDebt()-float64(p+1)*rate, 0) // the exact bucket's tokens, about
		if got := l.Tokens("k"); got > want+1e-6*float64(c.b) {
			t.Errorf("New(%v, %d): silent at MaxDebt %v since T, at T+1 Period (%v) Tokens %v, the exact bucket %.6f: amnestied before two Periods",
				c.r, c.b, l.MaxDebt(), l.Period(), got, want)
		}
	}
}

// TestAudit97PeerDocumentedDefaultPeriodCapped (audit 97; documented at
// stop 59, the text below says what was wrong; doc.go now says the
// default is capped at the longest Duration, a smaller factor, and the
// test asserts it). doc.go:199-201:
// "the default Period is PeriodFactor (16) times the minimum, which
// bounds that gain to 1/16 of the rate in the worst case"; PeriodFactor
// (limit.go): "K in the default rotation Period, K x MaxDebt / (rate x
// (Generations-1))". Where 16 x MaxDebt/rate exceeds about 292 years (a
// MaxDebt that drains in more than 18.3 years), the default is the cap
// instead, a smaller multiple of the minimum: Every(24h) with burst
// 10,000 (default MaxDebt 20,000 days, 54.8 years) gets a Period of 292
// years, 5.3 times the minimum, so a client hammering at the limit gains
// up to 1/5.3 of the rate, not 1/16. The documented behaviour: the
// default Period is 16 times the minimum, or New refuses.
func TestAudit97PeerDocumentedDefaultPeriodCapped(t *testing.T) {
	l, err := limit.New(limit.Every(24*time.Hour), 10_000, limit.WithEngine(limit.CountMin))
	if err != nil {
		t.Fatal(err)
	}
	minDays := l.MaxDebt() // MaxDebt / rate, in days, with G = 2
	if l.Period() != time.Duration(math.MaxInt64/int64(time.Millisecond))*time.Millisecond {
		t.Errorf("Every(24h), burst 10000: Period %v; doc.go: capped at the longest Duration", l.Period())
	}
	if got := l.Period().Hours() / 24 / minDays; got < 5.3 || got > 5.4 {
		t.Errorf("Every(24h), burst 10000: Period %v is %.2f x the minimum (%v days); doc.go: 1/5.3 for that one", l.Period(), got, minDays)
	}
}
