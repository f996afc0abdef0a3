package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

const a101ChildEnv = "GRUDGE_A101_MULTI_CHILD"

// a101Child runs body in a child process of this test binary (its own
// -test.timeout of 60 s, and killed by the parent after testchild.Bound), so that a
// decision that never returns fails the test instead of hanging the run;
// in the child it runs body itself.
func a101Child(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	testchild.Isolate(t, a101ChildEnv, body)
}

// TestAudit101MultiFixedTinyDebtDecideHangs (audit 101; fixed at stop 60,
// the text below says what was wrong; fill asks for the next token only
// below Burst, and msUntilFits returns +Inf for a cost above the burst): a decision that never returns.
// limit/decision.go, fill sets NextAfter from msUntilFits(p, debt,
// p.cost(Remaining+1)) whenever debt > 0; msUntilFits requires "nU <=
// burstU" (its doc), and settle loops `for !ok(x) { x++ }`. When a key's
// debt is positive but below half an ulp of burstU in float64,
// remaining() returns the whole burst (burstU - debt rounds to burstU),
// so the cost asked for is burst+1 tokens, which never fits: settle
// spins for ever (x climbs by 1 up to 2^53 before the loop could even
// stall). Such a debt is valid input: a policy on the same engine whose
// token costs that little, a Tier (or a SetLimit) at a rate ~2^52 times
// the limiter's, both within the documented range (limit <= 1e22).
// Package doc: "n > burst is never admitted and its Decision says Never"
// (an answer, not a hang); Tier: "Its methods are the Limiter's".
//
// Repro: l := New(math.Pi, 10) (count-min: pi is no short fraction);
// fast, _ := l.Tier("fast", 1e22, 1); fast.AllowN(now, "k", 1);
// l.DecideN(now, "k", 11) never returns (nor does any DecideN, PeekN or
// Multi state of "k" that reads that debt without adding to it, until
// the next millisecond drains it).
func TestAudit101MultiFixedTinyDebtDecideHangs(t *testing.T) {
	a101Child(t, func(t *testing.T) {
		clk := limittest.NewFakeClock()
		clk.Set(1 << 30)
		l := limit.MustNew(math.Pi, 10, limit.WithClock(clk))
		fast, err := l.Tier("fast", 1e22, 1)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		if !fast.AllowN(now, "k", 1) {
			t.Fatal("setup: the fast tier denied a fresh key")
		}
		d := l.DecideN(now, "k", 11) // hangs on the current code
		if !d.Never || d.Allowed {
			t.Errorf("n > burst: %+v, want Never", d)
		}
	})
}

// TestAudit101MultiFixedTinyDebtMultiHangs (audit 101; fixed at stop 60,
// as above): the same spin reached through a
// Multi and SetLimit. multi.go reads every window's state after the
// decision (Limiter.state -> fill); a window whose key holds such a tiny
// debt never returns. SetLimit is documented to keep each key's debt and
// accept any finite limit up to 1e22 ("Decisions racing SetLimit use
// the old policy or the new one"); here it runs alone.
//
// Repro: l := New(math.Pi, 10); o := New(1, 1); l.SetLimit(1e22);
// l.AllowN(now, "k", 1); l.SetLimit(math.Pi); o.AllowN(now, "k", 1);
// NewMulti(l, o).DecideKeys(now, 1, "k") (denied by o) never returns.
func TestAudit101MultiFixedTinyDebtMultiHangs(t *testing.T) {
	a101Child(t, func(t *testing.T) {
		clk := limittest.NewFakeClock()
		clk.Set(1 << 30)
		l := limit.MustNew(math.Pi, 10, limit.WithClock(clk), limit.WithName("l"))
		o := limit.MustNew(1, 1, limit.WithClock(clk), limit.WithName("o"))
		now := clk.Now()
		if err := l.SetLimit(1e22); err != nil {
			t.Fatal(err)
		}
		if !l.AllowN(now, "k", 1) {
			t.Fatal("setup: denied a fresh key")
		}
		if err := l.SetLimit(math.Pi); err != nil {
			t.Fatal(err)
		}
		o.AllowN(now, "k", 1)
		m, err := limit.NewMulti(l, o)
		if err != nil {
			t.Fatal(err)
		}
		d := m.DecideKeys(now, 1, "k") // hangs on the current code
		if d.Allowed || d.Policy != "o" {
			t.Errorf("want a denial by o: %+v", d)
		}
	})
}
