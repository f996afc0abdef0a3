package limit_test

// Audit 3: the semantics of golang.org/x/time/rate's own test cases
// (rate_test.go, v0.15.0), rewritten for package limit's API on one key
// and run on both engines. Each case runs x/time/rate too, so that the
// table is checked against it; where package limit documents a deviation,
// the case states it and cites the doc, and both answers are checked.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"golang.org/x/time/rate"
)

// a3d is x/time/rate's test step, d.
const a3d = 100 * time.Millisecond

// a3T0 is the fake clock's start: far in the real future, so that
// context deadlines placed on the fake clock never expire in real time.
var a3T0 = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

func a3tn(i int) time.Time { return a3T0.Add(time.Duration(i) * a3d) }

// a3peer is a Limiter on a fake clock at a3T0 and one key.
type a3peer struct {
	t   *testing.T
	l   *limit.Limiter
	clk *limittest.FakeClock
}

func a3newPeer(t *testing.T, lim limit.Limit, burst int, opts ...limit.Option) *a3peer {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.SetTime(a3T0)
	l, err := limit.New(lim, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(7)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &a3peer{t: t, l: l, clk: clk}
}

// at moves the clock forward to t (never back), as time passes for a
// caller that passes t.
func (p *a3peer) at(t time.Time) time.Time {
	if t.After(p.clk.Now()) {
		p.clk.SetTime(t)
	}
	return t
}

type a3allow struct {
	t    time.Time
	toks float64
	n    int
	ok   bool
}

// run is x/time/rate's run: TokensAt, then AllowN, at each step.
func (p *a3peer) run(allows []a3allow) {
	p.t.Helper()
	for i, a := range allows {
		t := p.at(a.t)
		if toks := p.l.TokensAt(t, "k"); toks != a.toks {
			p.t.Errorf("step %d: TokensAt(t%d) = %v, want %v", i, a.t.Sub(a3T0)/a3d, toks, a.toks)
		}
		if ok := p.l.AllowN(t, "k", a.n); ok != a.ok {
			p.t.Errorf("step %d: AllowN(t%d, %d) = %v, want %v", i, a.t.Sub(a3T0)/a3d, a.n, ok, a.ok)
		}
	}
}

// runRate runs the same table on x/time/rate (to check the table).
func a3runRate(t *testing.T, lim *rate.Limiter, allows []a3allow) {
	t.Helper()
	for i, a := range allows {
		if toks := lim.TokensAt(a.t); math.Abs(toks-a.toks) > 1e-9 {
			t.Errorf("x/time/rate step %d: TokensAt = %v, want %v", i, toks, a.toks)
		}
		if ok := lim.AllowN(a.t, a.n); ok != a.ok {
			t.Errorf("x/time/rate step %d: AllowN(%d) = %v, want %v", i, a.n, ok, a.ok)
		}
	}
}

// reserve is x/time/rate's runReserve: ReserveN at t, checking OK and the
// time to act (DelayFrom(t) measured from t).
func (p *a3peer) reserve(t time.Time, n int, act time.Time, ok bool) *limit.Reservation {
	p.t.Helper()
	at := p.at(t)
	r := p.l.ReserveN(at, "k", n)
	if r.OK() != ok {
		p.t.Errorf("ReserveN(t%d, %d).OK() = %v, want %v", t.Sub(a3T0)/a3d, n, r.OK(), ok)
		return r
	}
	if ok {
		if got := t.Add(r.DelayFrom(t)); !got.Equal(act) {
			p.t.Errorf("ReserveN(t%d, %d) acts at t0+%v, want t%d", t.Sub(a3T0)/a3d, n, got.Sub(a3T0), act.Sub(a3T0)/a3d)
		}
	}
	return r
}

func a3rateReserve(t *testing.T, lim *rate.Limiter, at time.Time, n int, act time.Time, ok bool) *rate.Reservation {
	t.Helper()
	r := lim.ReserveN(at, n)
	if r.OK() != ok || ok && !at.Add(r.DelayFrom(at)).Equal(act) {
		t.Errorf("x/time/rate ReserveN(t%d, %d) = (t0+%v, %v), want (t%d, %v)", at.Sub(a3T0)/a3d, n, at.Add(r.DelayFrom(at)).Sub(a3T0), r.OK(), act.Sub(a3T0)/a3d, ok)
	}
	return r
}

func a3forEngines(t *testing.T, f func(t *testing.T, eng limit.Option)) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) { f(t, limit.WithEngine(e)) })
	}
}

// TestAudit3PeerEvery: x/time/rate's TestEvery. limit.Every is
// "a minimum interval between events to a Limit; a zero or negative
// interval means Inf", as rate.Every.
func TestAudit3PeerEvery(t *testing.T) {
	for _, d := range []time.Duration{0, -1, -time.Hour, time.Nanosecond, time.Microsecond, time.Millisecond,
		10 * time.Millisecond, 100 * time.Millisecond, time.Second, 2 * time.Second, 2500 * time.Millisecond,
		4 * time.Second, 10 * time.Second, 3 * time.Second, 7 * time.Millisecond, time.Hour, time.Duration(math.MaxInt64)} {
		got, want := limit.Every(d), rate.Every(d)
		if want == rate.Inf {
			if got != limit.Inf {
				t.Errorf("Every(%v) = %v, want Inf", d, got)
			}
			continue
		}
		if math.Abs(float64(got)/float64(want)-1) > 1e-15 {
			t.Errorf("Every(%v) = %v, x/time/rate %v", d, got, want)
		}
	}
	if limit.Limit(10) == limit.Inf || float64(limit.Inf) != float64(rate.Inf) {
		t.Error("Inf")
	}
	if limit.InfDuration != rate.InfDuration {
		t.Error("InfDuration")
	}
}

// TestAudit3PeerBurst1And3: x/time/rate's TestLimiterBurst1 and
// TestLimiterBurst3 (TokensAt then AllowN at each step), on both engines.
// The one row not ported is AllowN(t9, 0), which x/time/rate admits:
// here "n <= 0 panics" (limit doc, "Input"), checked in
// TestAudit3PeerNonPositiveN.
func TestAudit3PeerBurst1And3(t *testing.T) {
	t0, t1, t2, t3, t4, t9 := a3tn(0), a3tn(1), a3tn(2), a3tn(3), a3tn(4), a3tn(9)
	burst1 := []a3allow{
		{t0, 1, 1, true}, {t0, 0, 1, false}, {t0, 0, 1, false},
		{t1, 1, 1, true}, {t1, 0, 1, false}, {t1, 0, 1, false},
		{t2, 1, 2, false}, {t2, 1, 1, true}, {t2, 0, 1, false},
	}
	burst3 := []a3allow{
		{t0, 3, 2, true}, {t0, 1, 2, false}, {t0, 1, 1, true}, {t0, 0, 1, false},
		{t1, 1, 4, false}, {t2, 2, 1, true}, {t3, 2, 1, true}, {t4, 2, 1, true},
		{t4, 1, 1, true}, {t4, 0, 1, false}, {t4, 0, 1, false}, {t9, 3, 3, true},
	}
	a3runRate(t, rate.NewLimiter(10, 1), burst1)
	a3runRate(t, rate.NewLimiter(10, 3), burst3)
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		a3newPeer(t, 10, 1, eng).run(burst1)
		a3newPeer(t, 10, 3, eng).run(burst3)
	})
}

// TestAudit3PeerJumpBackwards: x/time/rate's TestLimiterJumpBackwards,
// under the documented deviation (docs/readings.md, parity table, AllowN:
// "A t before a time already used counts as that time, as x/time/rate
// counts it (no elapsed time), but x/time/rate then also moves its last
// back and re-credits the interval later; here time never runs
// backwards"). x/time/rate gets a token back at t1 after the jump to t0;
// here t0 counted as t1, so the next token comes at t2.
func TestAudit3PeerJumpBackwards(t *testing.T) {
	t0, t1, t2 := a3tn(0), a3tn(1), a3tn(2)
	common := []a3allow{
		{t1, 3, 1, true}, {t0, 2, 1, true}, {t0, 1, 1, true}, {t0, 0, 1, false}, {t0, 0, 1, false},
	}
	theirs := append(append([]a3allow{}, common...),
		a3allow{t1, 1, 1, true}, a3allow{t1, 0, 1, false}, a3allow{t1, 0, 1, false},
		a3allow{t2, 1, 1, true}, a3allow{t2, 0, 1, false})
	ours := append(append([]a3allow{}, common...),
		a3allow{t1, 0, 1, false}, a3allow{t1, 0, 1, false},
		a3allow{t2, 1, 1, true}, a3allow{t2, 0, 1, false})
	a3runRate(t, rate.NewLimiter(10, 3), theirs)
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		p := a3newPeer(t, 10, 3, eng)
		p.run(ours)
	})
}

// TestAudit3PeerNoTruncation: x/time/rate's
// TestLimiter_noTruncationErrors (golang/go#34861), and TestTinyLimit
// (golang/go#71154: a tiny rate must neither overflow a duration nor
// admit past the burst). Here: "a full burst is admitted at once from an
// empty key" whatever the rate, and a duration too long for a
// time.Duration saturates instead of wrapping negative.
func TestAudit3PeerNoTruncation(t *testing.T) {
	for _, lim := range []limit.Limit{0.7692307692307693, 1e-10, 1e-15, limit.Every(time.Duration(math.MaxInt64)), limit.Every(24 * time.Hour), limit.Every(365 * 24 * time.Hour)} {
		for _, e := range []limit.Engine{limit.Auto, limit.CountMin} {
			name := fmt.Sprintf("%v/%v", lim, e)
			p := a3newPeer(t, lim, 1, limit.WithEngine(e))
			if !p.l.Allow("k") {
				t.Errorf("%s: first request denied", name)
			}
			d := p.l.Decide("k")
			if d.Allowed || d.Never {
				t.Errorf("%s: second request %+v", name, d)
			}
			if d.RetryAfter <= 0 || d.ResetAfter <= 0 || d.NextAfter <= 0 {
				t.Errorf("%s: durations not positive %+v", name, d)
			}
			// Never early: at least a token's time (x/time/rate's
			// durationFromTokens, capped at InfDuration).
			tok := 1 / float64(lim) * float64(time.Second)
			if tok < float64(math.MaxInt64) && float64(d.RetryAfter) < tok-float64(time.Millisecond) {
				t.Errorf("%s: RetryAfter %v is before a token's %v", name, d.RetryAfter, time.Duration(tok))
			}
			r := p.l.Reserve("k")
			if r.OK() && r.Delay() <= 0 {
				t.Errorf("%s: a reservation behind a spent token acts at once (%v)", name, r.Delay())
			}
		}
	}
	// x/time/rate's own answers for the two cases.
	if !rate.NewLimiter(0.7692307692307693, 1).Allow() {
		t.Error("x/time/rate #34861")
	}
	xr := rate.NewLimiter(1e-10, 1)
	if !xr.Allow() || xr.Allow() {
		t.Error("x/time/rate #71154")
	}
}

// TestAudit3PeerLongRunningQPS: x/time/rate's TestLongRunningQPS (100/s,
// burst 100, a request every 2 ms for 5 s of fake time): at most
// ideal+1 and at least 0.999 x ideal admitted, and here, the exact
// bucket at the millisecond, exactly x/time/rate's count.
func TestAudit3PeerLongRunningQPS(t *testing.T) {
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		p := a3newPeer(t, 100, 100, eng)
		x := rate.NewLimiter(100, 100)
		var ours, theirs int
		for at := a3T0; at.Before(a3T0.Add(5 * time.Second)); at = at.Add(2 * time.Millisecond) {
			p.at(at)
			if p.l.AllowN(at, "k", 1) {
				ours++
			}
			if x.AllowN(at, 1) {
				theirs++
			}
		}
		ideal := 100 + 100*5.0
		if ours > int(ideal+1) || ours < int(0.999*ideal) {
			t.Errorf("admitted %d, ideal %v", ours, ideal)
		}
		if ours != theirs {
			t.Errorf("admitted %d, x/time/rate %d", ours, theirs)
		}
	})
}

// TestAudit3PeerReserve: x/time/rate's TestSimpleReserve, TestMix,
// TestCancelInvalid and TestCancelLast, where package limit answers as
// x/time/rate does (MaxDebt 2 x burst is enough for them).
func TestAudit3PeerReserve(t *testing.T) {
	t0, t1, t2, t3, t4 := a3tn(0), a3tn(1), a3tn(2), a3tn(3), a3tn(4)
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		t.Run("Simple", func(t *testing.T) {
			p, x := a3newPeer(t, 10, 2, eng), rate.NewLimiter(10, 2)
			for _, c := range []struct {
				at, act time.Time
				n       int
			}{{t0, t0, 2}, {t0, t2, 2}, {t3, t4, 2}} {
				p.reserve(c.at, c.n, c.act, true)
				a3rateReserve(t, x, c.at, c.n, c.act, true)
			}
		})
		t.Run("Mix", func(t *testing.T) {
			p := a3newPeer(t, 10, 2, eng)
			p.reserve(t0, 3, time.Time{}, false) // n > burst
			p.reserve(t0, 2, t0, true)
			p.run([]a3allow{{t1, 1, 2, false}})
			p.reserve(t1, 2, t2, true)
			p.run([]a3allow{{t1, -1, 1, false}}) // negative tokens
			p.run([]a3allow{{t3, 1, 1, true}})
		})
		t.Run("CancelInvalid", func(t *testing.T) {
			p := a3newPeer(t, 10, 2, eng)
			p.reserve(t0, 2, t0, true)
			r := p.reserve(t0, 3, t3, false)
			r.Cancel() // no effect
			if d := r.DelayFrom(t0); d != limit.InfDuration {
				t.Errorf("DelayFrom of a reservation not OK = %v", d)
			}
			p.reserve(t0, 2, t2, true) // no extra tokens
		})
		t.Run("CancelLast", func(t *testing.T) {
			// MaxDebt 10: with the default 4 the cancelled reservation
			// would have filled the key to MaxDebt, and "A reservation
			// that filled the key to MaxDebt is never given back"
			// (TestAudit3PeerCancelDeviations, "AtMaxDebt").
			p, x := a3newPeer(t, 10, 2, eng, limit.WithMaxDebt(10)), rate.NewLimiter(10, 2)
			p.reserve(t0, 2, t0, true)
			a3rateReserve(t, x, t0, 2, t0, true)
			r := p.reserve(t0, 2, t2, true)
			xr := a3rateReserve(t, x, t0, 2, t2, true)
			p.at(t1)
			r.Cancel() // 2 tokens back
			xr.CancelAt(t1)
			p.reserve(t1, 2, t2, true)
			a3rateReserve(t, x, t1, 2, t2, true)
		})
	})
}

// TestAudit3PeerCancelDeviations: x/time/rate's TestCancelTooLate,
// TestCancel0Tokens, TestCancel1Token and TestCancelMulti, under package
// limit's documented Cancel: "all or nothing per cell ... a cell of the
// key that no other request has written since the reservation gets its
// previous value back (the key reads as if the reservation had never
// been taken, the part drained since included) ... any other cell keeps
// the debit" (Reservation.Cancel), and docs/readings.md: "x/time/rate
// restores the tokens no later reservation has used, at t ... here it is
// exact or nothing ... No CancelAt: the exact undo does not depend on t".
// MaxDebt is raised where x/time/rate queues past 2 x burst ("not OK
// beyond MaxDebt (x/time/rate queues without bound)").
func TestAudit3PeerCancelDeviations(t *testing.T) {
	t0, t1, t2, t3, t4, t5 := a3tn(0), a3tn(1), a3tn(2), a3tn(3), a3tn(4), a3tn(5)
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		t.Run("TooLate", func(t *testing.T) {
			// x/time/rate: a CancelAt after the time to act does nothing,
			// so the next reservation at t3 acts at t4. Here Cancel does
			// not depend on t: nothing wrote the key since, so it reads as
			// if the reservation had never been taken, and at t3 the key
			// is full (the first reservation has drained by t2).
			p, x := a3newPeer(t, 10, 2, eng, limit.WithMaxDebt(10)), rate.NewLimiter(10, 2)
			p.reserve(t0, 2, t0, true)
			a3rateReserve(t, x, t0, 2, t0, true)
			r := p.reserve(t0, 2, t2, true)
			xr := a3rateReserve(t, x, t0, 2, t2, true)
			p.at(t3)
			r.Cancel()
			xr.CancelAt(t3)
			p.reserve(t3, 2, t3, true)
			a3rateReserve(t, x, t3, 2, t4, true)
		})
		t.Run("AtMaxDebt", func(t *testing.T) {
			// x/time/rate's TestCancelLast with the default MaxDebt (2 x
			// burst): the cancelled reservation took the key to MaxDebt,
			// so it is kept ("A reservation that filled the key to MaxDebt
			// is never given back (either engine)"), and the next
			// reservation of 2 at t1 would take the key past MaxDebt: not
			// OK, where x/time/rate, with its 2 tokens back, acts at t2.
			p, x := a3newPeer(t, 10, 2, eng), rate.NewLimiter(10, 2)
			p.reserve(t0, 2, t0, true)
			a3rateReserve(t, x, t0, 2, t0, true)
			r := p.reserve(t0, 2, t2, true)
			xr := a3rateReserve(t, x, t0, 2, t2, true)
			p.at(t1)
			r.Cancel()
			xr.CancelAt(t1)
			if got := p.l.TokensAt(t1, "k"); got != -1 {
				t.Errorf("after the Cancel of a reservation that filled MaxDebt: %v tokens, want -1 (kept)", got)
			}
			p.reserve(t1, 2, time.Time{}, false)
			a3rateReserve(t, x, t1, 2, t2, true)
			p.reserve(t1, 1, t3, true) // debt 3 + 1, back to 2 by t3
		})
		t.Run("ZeroTokens", func(t *testing.T) {
			// x/time/rate gives nothing back (a later reservation queued
			// behind); Buckets neither (written over since); the count-min
			// gives it back whole (written since only within the same
			// millisecond, below MaxDebt), so the next acts at t2.
			p, x := a3newPeer(t, 10, 2, eng, limit.WithMaxDebt(10)), rate.NewLimiter(10, 2)
			p.reserve(t0, 2, t0, true)
			a3rateReserve(t, x, t0, 2, t0, true)
			r := p.reserve(t0, 1, t1, true)
			xr := a3rateReserve(t, x, t0, 1, t1, true)
			p.reserve(t0, 1, t2, true)
			a3rateReserve(t, x, t0, 1, t2, true)
			r.Cancel()
			xr.CancelAt(t0)
			want := t3
			if p.l.Engine() == limit.CountMin {
				want = t2
			}
			p.reserve(t0, 1, want, true)
			a3rateReserve(t, x, t0, 1, t3, true)
		})
		t.Run("OneToken", func(t *testing.T) {
			// x/time/rate gives back the 1 token no later reservation
			// used (next 2 at t2 act at t4); here the later reservation,
			// at t0, wrote the key's cells since: Buckets keeps the whole
			// debit (t5); the count-min gives it back whole, "written
			// since only within the same millisecond, below MaxDebt" (t3).
			p, x := a3newPeer(t, 10, 2, eng, limit.WithMaxDebt(10)), rate.NewLimiter(10, 2)
			p.reserve(t0, 2, t0, true)
			a3rateReserve(t, x, t0, 2, t0, true)
			r := p.reserve(t0, 2, t2, true)
			xr := a3rateReserve(t, x, t0, 2, t2, true)
			p.reserve(t0, 1, t3, true)
			a3rateReserve(t, x, t0, 1, t3, true)
			p.at(t2)
			r.Cancel()
			xr.CancelAt(t2)
			want := t5
			if p.l.Engine() == limit.CountMin {
				want = t3
			}
			p.reserve(t2, 2, want, true)
			a3rateReserve(t, x, t2, 2, t4, true)
		})
		t.Run("Multi", func(t *testing.T) {
			// x/time/rate: C back whole, A back 2 of 3 (t5). Here C, the
			// last, reads as never taken; A was written over since by a
			// reservation at t0 that still stands: Buckets keeps A (t7),
			// the count-min gives A back whole (same millisecond, t4).
			t7 := a3tn(7)
			p, x := a3newPeer(t, 10, 4, eng, limit.WithMaxDebt(12)), rate.NewLimiter(10, 4)
			p.reserve(t0, 4, t0, true)
			a3rateReserve(t, x, t0, 4, t0, true)
			rA := p.reserve(t0, 3, t3, true)
			xA := a3rateReserve(t, x, t0, 3, t3, true)
			p.reserve(t0, 1, t4, true)
			a3rateReserve(t, x, t0, 1, t4, true)
			rC := p.reserve(t0, 1, t5, true)
			xC := a3rateReserve(t, x, t0, 1, t5, true)
			p.at(t1)
			rC.Cancel()
			rA.Cancel()
			xC.CancelAt(t1)
			xA.CancelAt(t1)
			want := t7
			if p.l.Engine() == limit.CountMin {
				want = t4
			}
			p.reserve(t1, 3, want, true)
			a3rateReserve(t, x, t1, 3, t5, true)
		})
	})
}

// TestAudit3PeerReserveJumpBack: x/time/rate's TestReserveJumpBack and
// TestReserveJumpBackCancel under the documented deviation (ReserveN:
// "The time to act is measured from the time the limiter decided at: t,
// or later for a stale t ..., never earlier, so a stale t never makes
// the requests act early"). x/time/rate's own comments say its answers
// there "violate Limit, Burst"; here they do not.
func TestAudit3PeerReserveJumpBack(t *testing.T) {
	t0, t1, t2, t3, t4, t5, t6 := a3tn(0), a3tn(1), a3tn(2), a3tn(3), a3tn(4), a3tn(5), a3tn(6)
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		p, x := a3newPeer(t, 10, 2, eng, limit.WithMaxDebt(10)), rate.NewLimiter(10, 2)
		p.reserve(t1, 2, t1, true)
		a3rateReserve(t, x, t1, 2, t1, true)
		p.reserve(t0, 1, t2, true) // decided at t1: debt 3, acts at t2
		a3rateReserve(t, x, t0, 1, t1, true)
		p.reserve(t2, 2, t4, true)
		a3rateReserve(t, x, t2, 2, t3, true)
		p.reserve(t0, 3, time.Time{}, false)
		a3rateReserve(t, x, t0, 3, time.Time{}, false)
		p.reserve(t2, 1, t5, true)
		a3rateReserve(t, x, t2, 1, t4, true)
		// No bucket ever held more than burst tokens at an act time:
		// from t2 the debt is 5, so 2 tokens by t5 and 1 more by t6.
		p.reserve(t2, 1, t6, true)

		// JumpBackCancel: a cancel at (or of a reservation decided at) a
		// stale time gives back the reservation as never taken.
		q := a3newPeer(t, 10, 2, eng, limit.WithMaxDebt(10))
		q.reserve(t1, 2, t1, true)
		r := q.reserve(t1, 2, t3, true)
		r.Cancel()
		q.reserve(t0, 2, t3, true) // decided at t1: as if r had never been
	})
}

// TestAudit3PeerWait: x/time/rate's TestWaitSimple, TestWaitCancel,
// TestWaitTimeout and TestReserveMax (its maxFutureReserve is WaitN's
// context deadline), on the fake clock (WithClock: "a fake one makes
// waiting deterministic").
func TestAudit3PeerWait(t *testing.T) {
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		t.Run("Simple", func(t *testing.T) {
			p := a3newPeer(t, 10, 3, eng)
			done, cancel := context.WithCancel(context.Background())
			cancel()
			if err := p.l.WaitN(done, "k", 1); !errors.Is(err, context.Canceled) {
				t.Errorf("already cancelled: %v", err)
			}
			if err := p.l.WaitN(context.Background(), "k", 4); !errors.Is(err, limit.ErrAboveBurst) {
				t.Errorf("exceed burst: %v", err)
			}
			if err := p.l.WaitN(context.Background(), "k", 2); err != nil {
				t.Errorf("act now: %v", err)
			}
			p.waitFor(context.Background(), 3, 2*a3d, nil)
		})
		t.Run("Cancel", func(t *testing.T) {
			p := a3newPeer(t, 10, 3, eng)
			ctx, cancel := context.WithCancel(context.Background())
			if err := p.l.WaitN(ctx, "k", 2); err != nil {
				t.Fatal(err)
			}
			ch := make(chan error, 1)
			go func() { ch <- p.l.WaitN(ctx, "k", 3) }()
			p.clk.BlockUntilTimers(1)
			p.clk.Advance(a3d)
			cancel()
			if err := <-ch; !errors.Is(err, context.Canceled) {
				t.Fatalf("will-cancel: %v", err)
			}
			// 3 tokens back: at t1 the key owes 1, so 2 fit at once.
			if err := p.l.WaitN(context.Background(), "k", 2); err != nil || p.clk.Timers() != 0 {
				t.Fatalf("act now after cancel: %v", err)
			}
		})
		t.Run("Timeout", func(t *testing.T) {
			p := a3newPeer(t, 10, 3, eng)
			ctx, cancel := context.WithDeadline(context.Background(), a3T0.Add(a3d))
			defer cancel()
			if err := p.l.WaitN(ctx, "k", 2); err != nil {
				t.Fatal(err)
			}
			before := p.l.Tokens("k")
			err := p.l.WaitN(ctx, "k", 3)
			if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("wait past the deadline: %v", err)
			}
			if after := p.l.Tokens("k"); after != before {
				t.Fatalf("a refused wait debited: %v -> %v", before, after)
			}
		})
		t.Run("ReserveMax", func(t *testing.T) {
			// maxFutureReserve d: 2 now, 1 at t1 (exactly at the deadline
			// is in time), 1 more would act at t2: refused, nothing taken.
			p := a3newPeer(t, 10, 2, eng)
			ctx, cancel := context.WithDeadline(context.Background(), a3T0.Add(a3d))
			defer cancel()
			if err := p.l.WaitN(ctx, "k", 2); err != nil {
				t.Fatal(err)
			}
			ch := make(chan error, 1)
			go func() { ch <- p.l.WaitN(ctx, "k", 1) }()
			p.clk.BlockUntilTimers(1)
			if err := p.l.WaitN(ctx, "k", 1); !errors.Is(err, limit.ErrPastDeadline) {
				t.Errorf("reservation past the deadline: %v", err)
			}
			p.clk.Advance(a3d - time.Millisecond)
			if p.clk.Timers() != 1 {
				t.Fatal("the wait ended early")
			}
			p.clk.Advance(time.Millisecond)
			if err := <-ch; err != nil {
				t.Fatalf("wait up to the deadline: %v", err)
			}
			// The refused one took nothing: at t1 the key is at its burst.
			if d := p.l.PeekN(p.clk.Now(), "k", 1); d.Allowed || d.RetryAfter != a3d {
				t.Fatalf("after the waits %+v", d)
			}
		})
	})
}

// waitFor runs WaitN(n) and checks that it waits exactly want on the fake
// clock and returns wantErr.
func (p *a3peer) waitFor(ctx context.Context, n int, want time.Duration, wantErr error) {
	p.t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- p.l.WaitN(ctx, "k", n) }()
	p.clk.BlockUntilTimers(1)
	p.clk.Advance(want - time.Millisecond)
	if p.clk.Timers() != 1 {
		p.t.Fatalf("WaitN(%d) ended before %v", n, want)
	}
	p.clk.Advance(time.Millisecond)
	if err := <-ch; !errors.Is(err, wantErr) {
		p.t.Fatalf("WaitN(%d) = %v, want %v", n, err, wantErr)
	}
}

// TestAudit3PeerInf: x/time/rate's TestWaitInf: "The burst limit is
// ignored if the rate limit is Inf" there; here "Inf ... admits every
// request and keeps no state" (limit doc, Inf), so n above the burst is
// admitted too, by every method, at once.
func TestAudit3PeerInf(t *testing.T) {
	p := a3newPeer(t, limit.Inf, 1)
	x := rate.NewLimiter(rate.Inf, 1)
	now := p.clk.Now()
	if !p.l.AllowN(now, "k", 3) || !x.AllowN(now, 3) {
		t.Error("AllowN(3) on Inf")
	}
	if d := p.l.DecideN(now, "k", 1000); !d.Allowed || d.Never || d.RetryAfter != 0 {
		t.Errorf("DecideN(1000) on Inf %+v", d)
	}
	r := p.l.ReserveN(now, "k", 3)
	if !r.OK() || r.DelayFrom(now) != 0 || r.Delay() != 0 {
		t.Errorf("ReserveN(3) on Inf: ok %v delay %v", r.OK(), r.DelayFrom(now))
	}
	if xr := x.ReserveN(now, 3); !xr.OK() || xr.DelayFrom(now) != 0 {
		t.Error("x/time/rate ReserveN(3) on Inf")
	}
	if err := p.l.WaitN(context.Background(), "k", 3); err != nil {
		t.Errorf("WaitN(3) on Inf: %v", err)
	}
	if err := x.WaitN(context.Background(), 3); err != nil {
		t.Errorf("x/time/rate WaitN(3) on Inf: %v", err)
	}
	for range 1000 {
		if !p.l.AllowN(now, "k", 1) {
			t.Fatal("Inf denied")
		}
	}
}

// TestAudit3PeerRefusedConfigs: x/time/rate's TestZeroLimit,
// TestSetAfterZeroLimit and TestWaitInf build NewLimiter(0, 1) and
// NewLimiter(Inf, 0); here "New returns a *sketch.ConfigError ... for a
// NaN, zero, negative or too large limit, a burst < 1" (limit doc,
// "Input"; docs/readings.md: "r <= 0 and b < 1 are errors").
func TestAudit3PeerRefusedConfigs(t *testing.T) {
	for _, c := range []struct {
		lim   limit.Limit
		burst int
	}{{0, 1}, {-1, 1}, {limit.Limit(math.NaN()), 1}, {10, 0}, {10, -1}, {limit.Inf, 0}, {limit.Limit(math.Inf(-1)), 1}, {2e22, 1}} {
		l, err := limit.New(c.lim, c.burst)
		var ce *sketch.ConfigError
		if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) || l != nil || !strings.HasPrefix(err.Error(), "limit: ") {
			t.Errorf("New(%v, %d) = %v, %v; want a *sketch.ConfigError", c.lim, c.burst, l, err)
		}
	}
}

// TestAudit3PeerNonPositiveN: x/time/rate admits AllowN(t, 0) (and
// reserves n = 0 at once); here "n <= 0 panics ("limit: AllowN: n must
// be > 0; got 0")" (limit doc, "Input"; docs/readings.md: "a request of
// nothing is a programmer error here"), on every full form, and on Inf.
func TestAudit3PeerNonPositiveN(t *testing.T) {
	if !rate.NewLimiter(10, 1).AllowN(a3T0, 0) {
		t.Error("x/time/rate AllowN(0)")
	}
	for _, lim := range []limit.Limit{10, limit.Inf} {
		p := a3newPeer(t, lim, 3)
		now := p.clk.Now()
		for _, n := range []int{0, -1, math.MinInt} {
			for name, f := range map[string]func(){
				"AllowN":  func() { p.l.AllowN(now, "k", n) },
				"DecideN": func() { p.l.DecideN(now, "k", n) },
				"PeekN":   func() { p.l.PeekN(now, "k", n) },
				"ReserveN": func() {
					p.l.ReserveN(now, "k", n)
				},
				"WaitN": func() { _ = p.l.WaitN(context.Background(), "k", n) },
				"DecideContext": func() {
					_, _ = p.l.DecideContext(context.Background(), "k", n)
				},
			} {
				msg := a3panicMsg(f)
				if !strings.HasPrefix(msg, "limit: ") || !strings.Contains(msg, fmt.Sprintf("n must be > 0; got %d", n)) {
					t.Errorf("%v %s(n=%d): panic %q", lim, name, n, msg)
				}
			}
		}
		if got := p.l.Tokens("k"); got != 3 {
			t.Errorf("%v: the panics debited: %v tokens", lim, got)
		}
	}
}

func a3panicMsg(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return "no panic"
}

// TestAudit3PeerLongIdle: after a full burst and an idle of hours or
// years (and whole 2^16-tick wraps of the Buckets engine's 16-bit drain
// residues), the key is full again, exactly: the burst is admitted and
// one more token is not, as x/time/rate.
func TestAudit3PeerLongIdle(t *testing.T) {
	for _, lim := range []limit.Limit{10, 1000, limit.Every(3 * time.Second), limit.Every(7 * time.Millisecond)} {
		for _, idle := range []time.Duration{65536 * time.Millisecond, 65535 * time.Millisecond, 131072 * time.Millisecond, 3 * time.Hour, 5 * 365 * 24 * time.Hour} {
			a3forEngines(t, func(t *testing.T, eng limit.Option) {
				p := a3newPeer(t, lim, 5, eng)
				x := rate.NewLimiter(rate.Limit(lim), 5)
				now := p.clk.Now()
				if !p.l.AllowN(now, "k", 5) || !x.AllowN(now, 5) {
					t.Fatal("burst")
				}
				r := p.l.ReserveN(now, "k", 3) // debt 8 <= MaxDebt 10
				if !r.OK() {
					t.Fatal("reserve")
				}
				x.ReserveN(now, 3)
				p.clk.Advance(idle)
				now = p.clk.Now()
				if got := p.l.TokensAt(now, "k"); got != 5 || x.TokensAt(now) != 5 {
					t.Fatalf("%v after %v idle: %v tokens (x/time/rate %v)", lim, idle, got, x.TokensAt(now))
				}
				if !p.l.AllowN(now, "k", 5) || p.l.AllowN(now, "k", 1) {
					t.Fatalf("%v after %v idle: not exactly a full burst", lim, idle)
				}
				r.Cancel() // written over since: nothing back
				if p.l.Allow("k") {
					t.Fatalf("%v after %v idle: an old reservation's Cancel gave back a later debit", lim, idle)
				}
			})
		}
	}
}
