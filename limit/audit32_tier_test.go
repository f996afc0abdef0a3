package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit32FixedNewPolicyEarlyAfterTierDebt: on an inexact count-min
// limiter whose own unit is rounded up (limit.New(5e-4, 1000,
// WithMaxDebt(4000)): a token is 2,000,384 units of 1 ms, not 2,000,000),
// a Tier at a quarter of the rate whose cost needed no rounding (8,000,000
// units, exactly 8000 s) writes a debt that New's policy reads as fewer
// of its tokens than the model says: 500 Tier tokens are 2000 tokens of R
// ("a policy of rate r and burst b is a cost of n x R/r per request of n
// tokens against a burst of b x R/r, in tokens of R"), read as 1999.616.
// So New's policy admits before its own exact bucket: RetryAfter
// 2,001,616.384 s where the rational bucket (5e-4/s, burst 1000, debt
// 2000) needs 2,002,000 s, and the request is admitted there.
// limit/doc.go, "Exactness": "Otherwise decisions are never earlier than
// the exact bucket's"; "Exactness of a policy": "The rounding is never
// early ... An inexact policy is never early against its own bucket", and
// "(they add as exactly as New's own: a tier R/k costs k of them on any
// limiter, so WithMaxDebt(k x b) holds its burst b)".
func TestAudit32FixedNewPolicyEarlyAfterTierDebt(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(a32Start)
	l, err := limit.New(5e-4, 1000, limit.WithClock(clk), limit.WithMaxDebt(4000), limit.WithSeed(5))
	if err != nil {
		t.Fatal(err)
	}
	quarter, err := l.Tier("quarter", 1.25e-4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	if !quarter.AllowN(t0, "k", 500) {
		t.Fatal("500 of the Tier's burst of 1000 denied on an empty key")
	}
	// A tier R/4 costs 4 of New's tokens: 2000 of them.
	if tok := l.TokensAt(t0, "k"); tok != 1000-2000 {
		t.Errorf("after 500 tokens of the Tier R/4, New's TokensAt = %v, want %v (a tier R/k costs k of New's tokens: 2000 owed)", tok, 1000-2000)
	}
	d := l.DecideN(t0, "k", 1)
	if d.Allowed {
		t.Fatal("New's policy admitted with 2000 tokens owed")
	}
	// The exact bucket (5e-4/s, burst 1000) with 2000 owed admits 1 when
	// 1001 have drained: 1001 x 2000 s.
	want := 1001 * 2000 * time.Second
	if d.RetryAfter < want {
		t.Errorf("New's policy RetryAfter %v, shorter than the exact bucket's %v by %v (\"never earlier than the exact bucket's\")",
			d.RetryAfter, want, want-d.RetryAfter)
	}
	at := t0.Add(d.RetryAfter)
	clk.SetTime(at)
	if l.AllowN(at, "k", 1) && d.RetryAfter < want {
		t.Errorf("New's policy admitted 1 token at t0+%v, %v before the exact bucket (debt 2000 tokens at t0, 1/2000 s drain) would", d.RetryAfter, want-d.RetryAfter)
	}
}

// TestAudit32FixedNewPolicyEarlyAfterTierBurst is the same with every
// default: limit.New(5e-4, 1000) (MaxDebt 2000, a token 2,000,128 units)
// and Tier("half", 2.5e-4, 500) (b x R/r = 1000 tokens of R: the whole
// burst). After the Tier's whole burst the key owes New's policy its
// whole burst (1000 tokens of R), so New's policy must wait 2000 s (one
// token at 5e-4/s) for 1 token; it reads 0.064 tokens left, and admits
// after 1872 s.
func TestAudit32FixedNewPolicyEarlyAfterTierBurst(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(a32Start)
	l, err := limit.New(5e-4, 1000, limit.WithClock(clk), limit.WithSeed(6))
	if err != nil {
		t.Fatal(err)
	}
	half, err := l.Tier("half", 2.5e-4, 500)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	if !half.AllowN(t0, "k", 500) {
		t.Fatal("the Tier's burst denied on an empty key")
	}
	if tok := l.TokensAt(t0, "k"); tok != 0 {
		t.Errorf("after the Tier R/2's whole burst (500 = 1000 tokens of R), New's TokensAt = %v, want 0", tok)
	}
	d := l.DecideN(t0, "k", 1)
	want := 2000 * time.Second // the exact bucket (5e-4/s, 1000) owing 1000
	if d.Allowed || d.RetryAfter < want {
		t.Errorf("New's policy right after the Tier's whole burst: Allowed %v, RetryAfter %v; the exact bucket owing its whole burst waits %v "+
			"(limit/doc.go: \"Otherwise decisions are never earlier than the exact bucket's\"; \"An inexact policy is never early against its own bucket\")",
			d.Allowed, d.RetryAfter, want)
	}
}
