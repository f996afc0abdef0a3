package limit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit105FixedInfAboveBurstDocumented (audit 105; fixed at stop 61,
// the text below says what was wrong: the docs now name Inf's exception,
// and this test asserts both halves).
//
// Audit 105 (docs against the code). limit/doc.go: "n > burst is never
// admitted and its Decision says Never"; Decision.Never: "set when n >
// burst: the request can never be admitted and must not be retried";
// ReserveN's doc: "A reservation for n > burst, or beyond MaxDebt, is not
// OK"; WaitN's errors include ErrAboveBurst. None of these named an
// exception, but on a limiter of rate Inf ("admits every request") the
// code skips the check (reserve.go: `n > p.burst && !l.inf`), as
// x/time/rate's Inf does: New(Inf, 5) admits AllowN(t, k, 6).
func TestAudit105FixedInfAboveBurstDocumented(t *testing.T) {
	l := limit.MustNew(limit.Inf, 5)
	now := time.Now()
	if !l.AllowN(now, "k", 6) {
		t.Errorf("New(Inf, 5).AllowN(t, k, 6) denied; docs: Inf admits every n")
	}
	if d := l.DecideN(now, "k", 6); !d.Allowed || d.Never {
		t.Errorf("New(Inf, 5).DecideN(t, k, 6) = Allowed %v Never %v; docs: admitted, never Never", d.Allowed, d.Never)
	}
	if r := l.ReserveN(now, "k", 6); !r.OK() || r.Delay() != 0 {
		t.Errorf("New(Inf, 5).ReserveN(t, k, 6): OK %v, Delay %v; docs: every reservation OK, at once", r.OK(), r.Delay())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.WaitN(ctx, "k", 6); err != nil {
		t.Errorf("New(Inf, 5).WaitN(ctx, k, 6) = %v; docs: Inf admits every n", err)
	}
	// A finite limiter keeps the rule.
	f := limit.MustNew(10, 5)
	if f.AllowN(now, "k", 6) {
		t.Errorf("New(10, 5).AllowN(t, k, 6) admitted")
	}
	if d := f.DecideN(now, "k", 6); d.Allowed || !d.Never {
		t.Errorf("New(10, 5).DecideN(t, k, 6) = Allowed %v Never %v", d.Allowed, d.Never)
	}
	if r := f.ReserveN(now, "k", 6); r.OK() {
		t.Errorf("New(10, 5).ReserveN(t, k, 6) is OK")
	}
	if err := f.WaitN(ctx, "k", 6); !errors.Is(err, limit.ErrAboveBurst) {
		t.Errorf("New(10, 5).WaitN(ctx, k, 6) = %v, want ErrAboveBurst", err)
	}
}
