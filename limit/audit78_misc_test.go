package limit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Small promises of the less-travelled surface, each with its sentence:
//   - "The zero Reservation is not OK" (reserve.go); a Reservation that
//     is not OK "has Delay InfDuration and Cancel does nothing".
//   - Stats.Rotations: "a clock jump over k periods counts k", and
//     "Stats is such an access, so the count ... is up to date with the
//     clock"; 0 on Buckets.
//   - "Limit, Burst, Policies and Exact read the current policy; MaxDebt
//     stays New's, in New's tokens" (doc.go); Tier.MaxDebt is "the
//     limiter's MaxDebt priced at the tier's cost".
//   - ReserveN/DecideN at a t after the clock's reading count it as that
//     reading, durations measured from it (doc.go, "Keys and time").
//   - WaitError: Burst is the policy's burst, Wait the time left to the
//     deadline for ErrPastDeadline (reserve.go).
func TestAudit78Misc(t *testing.T) {
	var z limit.Reservation
	if z.OK() || z.Delay() != limit.InfDuration || z.DelayFrom(time.Now()) != limit.InfDuration {
		t.Errorf("zero Reservation: OK %v Delay %v", z.OK(), z.Delay())
	}
	z.Cancel()

	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(a78Start)
		l := limit.MustNew(10, 20, a78Opts(clk, e, 1, limit.WithMaxDebt(80))...)
		// Not OK: above the burst, and beyond MaxDebt.
		if r := l.ReserveN(clk.Now(), "x", 21); r.OK() || r.Delay() != limit.InfDuration {
			t.Errorf("%v: ReserveN(21) OK %v Delay %v", e, r.OK(), r.Delay())
		} else {
			r.Cancel()
		}
		l.ReserveN(clk.Now(), "x", 20)
		l.ReserveN(clk.Now(), "x", 20)
		l.ReserveN(clk.Now(), "x", 20)
		r := l.ReserveN(clk.Now(), "x", 20)
		if !r.OK() || r.Delay() != 6*time.Second {
			t.Errorf("%v: 4th ReserveN(20) OK %v Delay %v; want true 6s", e, r.OK(), r.Delay())
		}
		if r2 := l.ReserveN(clk.Now(), "x", 1); r2.OK() {
			t.Errorf("%v: ReserveN past MaxDebt OK", e)
		} else {
			r2.Cancel()
			if got := l.TokensAt(clk.Now(), "x"); got != -60 {
				t.Errorf("%v: tokens %v after a not-OK Cancel; want -60", e, got)
			}
		}

		// SetLimit: Limit/Burst/Exact/Policies current; MaxDebt New's.
		if err := l.SetLimit(5); err != nil {
			t.Fatal(err)
		}
		if err := l.SetBurst(10); err != nil {
			t.Fatal(err)
		}
		if l.Limit() != 5 || l.Burst() != 10 || !l.Exact() || l.MaxDebt() != 80 {
			t.Errorf("%v: after SetLimit(5), SetBurst(10): Limit %v Burst %d Exact %v MaxDebt %v", e, l.Limit(), l.Burst(), l.Exact(), l.MaxDebt())
		}
		if p := l.Policies(); len(p) != 1 || p[0].Limit != 5 || p[0].Burst != 10 {
			t.Errorf("%v: Policies %+v", e, p)
		}
		tr, err := l.Tier("q", 2.5, 4)
		if err != nil {
			t.Fatal(err)
		}
		if tr.MaxDebt() != 20 {
			t.Errorf("%v: Tier(2.5).MaxDebt %v; want 20 (80 of New's 10/s tokens)", e, tr.MaxDebt())
		}

		// A future t counts as the clock's reading.
		now := clk.Now()
		fut := now.Add(5 * time.Second)
		d := l.DecideN(fut, "f", 10) // 5/s, burst 10: admitted, debt 2 s
		if !d.Allowed || d.ResetAfter != 2*time.Second || d.Remaining != 0 {
			t.Errorf("%v: DecideN(future t, 10): %+v; want admitted, ResetAfter 2s, Remaining 0", e, d)
		}
		rf := l.ReserveN(fut, "f", 3)
		if rf.DelayFrom(now) != 600*time.Millisecond {
			t.Errorf("%v: ReserveN(future t, 3).DelayFrom(reading) %v; want 600ms (the future t counts as the reading)", e, rf.DelayFrom(now))
		}

		// A stale t: decided at the latest time used, durations from t
		// with the lag included (never early).
		stale := now.Add(-700 * time.Millisecond)
		l.AllowN(now, "s", 10) // 5/s, burst 10: full
		rs := l.ReserveN(stale, "s", 2)
		if rs.DelayFrom(stale) != 1100*time.Millisecond || rs.DelayFrom(now) != 400*time.Millisecond {
			t.Errorf("%v: ReserveN(stale t, 2): DelayFrom(t) %v DelayFrom(now) %v; want 1.1s and 400ms", e, rs.DelayFrom(stale), rs.DelayFrom(now))
		}
		if ds := l.DecideN(stale, "s", 1); ds.Allowed || ds.RetryAfter != 1300*time.Millisecond || ds.ResetAfter != 3100*time.Millisecond {
			t.Errorf("%v: DecideN(stale t, 1): %+v; want denied, RetryAfter 1.3s, ResetAfter 3.1s (from t, the 700 ms lag included)", e, ds)
		}

		// WaitError fields.
		ctx := a78Ctx{Context: context.Background(), dl: now.Add(100 * time.Millisecond)}
		err = tr.WaitN(ctx, "f", 1)
		var we *limit.WaitError
		if !errors.As(err, &we) || we.Err != limit.ErrPastDeadline || we.Burst != 4 || we.N != 1 || we.Wait != 100*time.Millisecond {
			t.Errorf("%v: Tier WaitN past deadline: %#v", e, we)
		}
		if err := tr.WaitN(context.Background(), "f", 5); !errors.Is(err, limit.ErrAboveBurst) {
			t.Errorf("%v: Tier WaitN(5) above its burst 4: %v", e, err)
		}

		// Rotations.
		st := l.Stats()
		if e == limit.Buckets {
			if st.Rotations != 0 || l.Period() != 0 {
				t.Errorf("buckets: Rotations %d Period %v", st.Rotations, l.Period())
			}
			continue
		}
		p := l.Period()
		if p <= 0 {
			t.Fatalf("count-min Period %v", p)
		}
		r0 := st.Rotations
		clk.Advance(5*p + p/2)
		if got := l.Stats().Rotations - r0; got != 5 {
			t.Errorf("count-min: a jump of 5.5 periods counts %d rotations in Stats; want 5", got)
		}
	}
}
