package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit103LimitFixedMultiSharedHugeNNever (fixed at stop 60, the text below
// says what was wrong; audit 103, review of 3094000):
// a Multi holding one limiter as k windows with one key says a request
// of a huge n is not Never, and asks for a retry in 1 ms.
//
// Doc says (limit/multi.go, DecideKeys): "Never if n exceeds any
// window's burst. Windows that are one limiter with one key count
// together: ... Never holds when their sum exceeds its burst";
// limit/doc.go: "n > burst is never admitted and its Decision says
// Never"; limit/decision.go, Decision.Never: "the request can never be
// admitted and must not be retried".
//
// Code does: Limiter.state tests `n*k > p.burst` in int. For n >= 2^62
// and k = 2, n*k wraps to a negative int (for k = 3, n =
// ceil(2^64/3) wraps to 2), so the test is false; nU = cost(n*k) is
// negative (or 2 tokens), `debt+nU <= burstU` holds and the window
// reports Allowed with RetryAfter 0. The request itself is denied (the
// precheck and the take test n > burst alone), so decideKeys finds a
// denial with every window "fitting" and answers Never false,
// RetryAfter 1 ms: a client told to retry in 1 ms, for ever. With
// distinct limiters (k = 1) the same n is Never.
//
// Repro: l := New(1, 2); m := NewMulti(l, l);
// m.DecideKeys(now, 1<<62, "k") = {Never: false, RetryAfter: 1ms}.
//
// Suggested fix: test n > p.burst/k (or n > p.burst || n*k > p.burst
// with n <= p.burst first, so the product cannot overflow: n <= burst
// and k <= len(windows)), before forming cost(n*k).
func TestAudit103LimitFixedMultiSharedHugeNNever(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1 << 30)
	l := limit.MustNew(1, 2, limit.WithClock(clk))
	now := clk.Now()
	for _, c := range []struct {
		k int
		n int
	}{{1, 1 << 62}, {2, 1 << 62}, {2, math.MaxInt}, {3, 6148914691236517206}, {3, math.MaxInt/3 + 1}} {
		ws := make([]*limit.Limiter, c.k)
		for i := range ws {
			ws[i] = l
		}
		m, err := limit.NewMulti(ws...)
		if err != nil {
			t.Fatal(err)
		}
		d := m.DecideKeys(now, c.n, "k")
		if d.Allowed || !d.Never || d.RetryAfter != limit.InfDuration {
			t.Errorf("Multi of %d x New(1, 2), one key, n = %d: Allowed %v Never %v RetryAfter %v; want Never, RetryAfter InfDuration (n exceeds the burst)",
				c.k, c.n, d.Allowed, d.Never, d.RetryAfter)
		}
	}
}
