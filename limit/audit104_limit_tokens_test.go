package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit104LimitFixedTinyDebtTokensSayBurst (audit 104; fixed at stop 60, the text
// below says what was wrong): after 08eacd6 a debt far below a token (one token of a fast
// Tier, or of the limiter itself after SetLimit and back) costs the
// burst's last one-token request, and Decide's Remaining says so (9 at
// New(pi, 10)), but TokensAt still reads the whole burst (10.0): the two
// readings of the same key at the same instant disagree, and
// floor(TokensAt) promises a tenth one-token request that is denied.
//
// Doc says (limit/decision.go): Remaining "is how many one-token
// requests the key could make right after this decision: floor(burst -
// debt), at least 0 (a debt of any size above 0 costs the burst's last
// token)"; TokensAt: "the tokens key has at t, as x/time/rate's
// TokensAt: burst - debt, fractional". Both are burst - debt, so
// floor(TokensAt) should be Remaining (and TokensAt < burst whenever the
// debt is above 0).
//
// Code does: tokensAt returns p.burstF - debt/p.unit in float64, where
// debt/unit (about 1e-22 tokens) vanishes in the subtraction: exactly
// burstF. remainingK now compares exactly (burstU - cost(r) >= debt) and
// answers burst - 1.
//
// Minimal repro: l := New(math.Pi, 10, WithEngine(CountMin));
// l.Tier("fast", 1e22, 1).AllowN(now, "k", 1); l.PeekN(now, "k", 11)
// = {Never, Remaining 9}; l.TokensAt(now, "k") = 10; nine
// l.AllowN(now, "k", 1) are admitted, the tenth denied.
//
// Suggested fix: in tokensAt, return a value strictly below burstF when
// the debt is above 0 and the subtraction rounded to burstF
// (math.Nextafter(burstF, -Inf)), or more generally round burst - debt
// downward, so that floor(TokensAt) agrees with remainingK.
func TestAudit104LimitFixedTinyDebtTokensSayBurst(t *testing.T) { a104Child(t, a104TokensBurst) }

func a104TokensBurst(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(1 << 30)
		l := limit.MustNew(math.Pi, 10, limit.WithClock(clk), limit.WithEngine(eng), limit.WithCapacity(16, 0.01))
		fast, err := l.Tier("fast", 1e22, 1)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		if !fast.AllowN(now, "k", 1) {
			t.Fatal("setup: the fast tier denied a fresh key")
		}
		d := l.PeekN(now, "k", 11)
		tok := l.TokensAt(now, "k")
		got := 0
		for got <= 10 && l.AllowN(now, "k", 1) {
			got++
		}
		if d.Remaining != got {
			t.Fatalf("setup: Remaining %d, %d admitted", d.Remaining, got)
		}
		if int(math.Floor(tok)) != d.Remaining {
			t.Errorf("%v: after one 1e22/s token, Remaining %d (%d one-token requests admitted), but TokensAt = %v (floor %v): burst - debt read two ways", eng, d.Remaining, got, tok, math.Floor(tok))
		}
	}
}
