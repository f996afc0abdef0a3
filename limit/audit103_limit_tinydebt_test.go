package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/internal/testchild"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

const a103ChildEnv = "GRUDGE_A103_LIMIT_CHILD"

// a103Child runs body in a child process of this test binary (killed
// after 30 s), since these decisions read the tiny debt that hung
// decisions before 3094000 (a fix that searched for a next token that
// never comes would hang again); in the child it runs body itself. The
// child's failures are the test's.
func a103Child(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	testchild.Isolate(t, a103ChildEnv, body)
}

// a103Tiny builds the commit's own repro: New(math.Pi, 10) (count-min:
// pi is no short fraction) whose key "k" holds the debt of one token of
// a 1e22/s policy (a Tier, or the limiter itself after SetLimit(1e22)
// and back), and a Multi holding the limiter k times.
func a103Tiny(t *testing.T, viaSetLimit bool, k int) (*limit.Limiter, *limit.Multi, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(1 << 30)
	l := limit.MustNew(math.Pi, 10, limit.WithClock(clk), limit.WithCapacity(16, 0.01))
	now := clk.Now()
	if viaSetLimit {
		if err := l.SetLimit(1e22); err != nil {
			t.Fatal(err)
		}
		if !l.AllowN(now, "k", 1) {
			t.Fatal("setup: denied a fresh key")
		}
		if err := l.SetLimit(math.Pi); err != nil {
			t.Fatal(err)
		}
	} else {
		fast, err := l.Tier("fast", 1e22, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !fast.AllowN(now, "k", 1) {
			t.Fatal("setup: the fast tier denied a fresh key")
		}
	}
	ws := make([]*limit.Limiter, k)
	for i := range ws {
		ws[i] = l
	}
	m, err := limit.NewMulti(ws...)
	if err != nil {
		t.Fatal(err)
	}
	return l, m, clk
}

// TestAudit103LimitFixedTinyDebtRemainingOverCounts (fixed at stop 60, the text below
// says what was wrong; audit 103, review of
// 3094000): the fix decides that a debt too small to cost a whole token
// leaves "Remaining at Burst: the bucket is full, and there is no next
// token to wait for" (decision.go, fillK), and answers Remaining =
// Burst, NextAfter 0. The key cannot make Burst one-token requests: it
// makes Burst - 1, and the last waits for the next millisecond.
//
// Doc says (limit/decision.go, Decision): Remaining "is how many
// one-token requests the key could make right after this decision:
// floor(burst - debt), at least 0"; NextAfter "is the time until
// Remaining grows by one (the next whole token); 0 when the bucket is
// full"; params.remaining: "the most one-token requests that fit a debt
// of debt units, as TryUpdate adds them". Multi.DecideKeys: windows that
// are one limiter with one key count together, "its Remaining counts
// requests of that many tokens".
//
// Code does: remainingK takes floor((burstU - debt)/unit) in float64 and
// checks debt + cost(r*k) <= burstU, a rounded add: for a debt d0 below
// half a float64 step of burstU both say r = Burst/k. But the count-min
// stores every take rounded up to a float32 (RoundUp(d0 + cost)): the
// first one-token take leaves d0 + unit rounded up by a float32 step of
// unit, ~2^-22 of it, not the 1e-19 it was, and the Burst-th take no
// longer fits: 9 one-token requests are admitted at New(math.Pi, 10),
// and 4 of the Multi(l, l)'s. The rational bucket agrees with the
// engine: the debt is pi x 1e-19 tokens > 0, floor(10 - that) = 9. So
// Remaining is one too many, NextAfter 0 says there is nothing to wait
// for while the 10th (the 5th of the Multi) waits 1 ms, and ResetAfter
// (1 ms) contradicts it: a full bucket that fills again in 1 ms.
//
// Repro: l := New(math.Pi, 10); l.Tier("fast", 1e22, 1).AllowN(now,
// "k", 1); l.PeekN(now, "k", 11) = {Never, Remaining 10, NextAfter 0,
// ResetAfter 1ms}; then only 9 of l.AllowN(now, "k", 1) are admitted
// (Multi(l, l): Remaining 5, 4 admitted). Same after SetLimit(1e22),
// AllowN, SetLimit(math.Pi).
//
// Suggested fix: count Remaining with an exact comparison, burstU -
// cost(r*k) >= debt (both terms are multiples of the policy's unit, so
// the difference is exact), rather than the rounded debt + cost(r*k) <=
// burstU: a positive debt then never leaves the whole burst, and
// NextAfter waits for the same predicate (msUntilBelow(debt, burstU -
// cost(next)): 1 ms here) instead of msUntilFits' rounded add (which
// answers 0 for that 10th token as well).
func TestAudit103LimitFixedTinyDebtRemainingOverCounts(t *testing.T) { a103Child(t, a103TinyRemaining) }

func a103TinyRemaining(t *testing.T) {
	for _, viaSetLimit := range []bool{false, true} {
		for _, k := range []int{1, 2} {
			l, m, clk := a103Tiny(t, viaSetLimit, k)
			now := clk.Now()
			var d limit.Decision
			if k == 1 {
				d = l.PeekN(now, "k", 11)
			} else {
				d = m.DecideKeys(now, 11, "k")
			}
			if !d.Never {
				t.Fatalf("setup: n = 11 is not Never: %+v", d)
			}
			// A fresh identical setup: how many one-token requests
			// (through the Multi: requests of k tokens) are admitted now.
			_, m2, clk2 := a103Tiny(t, viaSetLimit, k)
			got := 0
			for got <= 10 && m2.DecideKeys(clk2.Now(), 1, "k").Allowed {
				got++
			}
			if d.Remaining != got {
				t.Errorf("SetLimit route %v, %d window(s) of New(pi, 10) after one 1e22/s token: Remaining %d (NextAfter %v, ResetAfter %v), but %d requests of %d token(s) are admitted right after it (the rational bucket: floor(10 - pi x 1e-19) = 9 tokens)",
					viaSetLimit, k, d.Remaining, d.NextAfter, d.ResetAfter, got, k)
			}
			// The last of them is admitted 1 ms later: NextAfter should
			// say so.
			if d.Remaining != got && d.NextAfter == 0 {
				clk2.Advance(1e6)
				if m2.DecideKeys(clk2.Now(), 1, "k").Allowed {
					t.Errorf("SetLimit route %v, k %d: NextAfter 0 (\"the bucket is full\"), yet request %d waits 1 ms (admitted then)", viaSetLimit, k, got+1)
				}
			}
		}
	}
}
