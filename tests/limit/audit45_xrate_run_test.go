package limit_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

type a45Allow struct {
	i    int // t_i
	toks float64
	n    int
	ok   bool
}

// a45Run is x/time/rate's run helper: TokensAt then AllowN at each step,
// exact float equality as its tests use.
func a45Run(t *testing.T, r limit.Limit, b int, steps []a45Allow) {
	t.Helper()
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, r, b, eng)
		for k, s := range steps {
			tm := e.at(a45Ti(s.i))
			if got := e.l.TokensAt(tm, "k"); got != s.toks {
				t.Errorf("step %d: TokensAt(t%d) = %v, want %v", k, s.i, got, s.toks)
			}
			if got := e.l.AllowN(tm, "k", s.n); got != s.ok {
				t.Errorf("step %d: AllowN(t%d, %d) = %v, want %v", k, s.i, s.n, got, s.ok)
			}
		}
	})
}

func TestAudit45XRateRunBurst1(t *testing.T) {
	a45Run(t, 10, 1, []a45Allow{
		{0, 1, 1, true}, {0, 0, 1, false}, {0, 0, 1, false},
		{1, 1, 1, true}, {1, 0, 1, false}, {1, 0, 1, false},
		{2, 1, 2, false}, {2, 1, 1, true}, {2, 0, 1, false},
	})
}

func TestAudit45XRateRunBurst3(t *testing.T) {
	a45Run(t, 10, 3, []a45Allow{
		{0, 3, 2, true}, {0, 1, 2, false}, {0, 1, 1, true}, {0, 0, 1, false},
		{1, 1, 4, false}, {2, 2, 1, true}, {3, 2, 1, true}, {4, 2, 1, true},
		{4, 1, 1, true}, {4, 0, 1, false}, {4, 0, 1, false}, {9, 3, 3, true},
	})
}

// TestAudit45XRateRunJumpBackwardsDocumented: the stale t0 counts as t1
// (docs/readings.md AllowN row), TokensAt too ("t is taken as AllowN
// takes it"); x/time/rate's rows 6 and 9 ({t1, 1, 1, true}, {t2, 1, 1,
// true}) become {t1, 0, false} and {t2, 1, true}.
func TestAudit45XRateRunJumpBackwardsDocumented(t *testing.T) {
	a45Run(t, 10, 3, []a45Allow{
		{1, 3, 1, true}, {0, 2, 1, true}, {0, 1, 1, true}, {0, 0, 1, false}, {0, 0, 1, false},
		{1, 0, 1, false}, {1, 0, 1, false}, {1, 0, 1, false},
		{2, 1, 1, true}, {2, 0, 1, false}, {2, 0, 1, false},
	})
}

func TestAudit45XRateEveryTable(t *testing.T) {
	for _, d := range []time.Duration{0, -1, time.Nanosecond, time.Microsecond, time.Millisecond, 10 * time.Millisecond,
		100 * time.Millisecond, time.Second, 2 * time.Second, 2500 * time.Millisecond, 4 * time.Second, 10 * time.Second, math.MaxInt64} {
		if got, want := limit.Every(d), rate.Every(d); float64(got) != float64(want) {
			t.Errorf("Every(%v) = %v, x/time/rate %v", d, got, want)
		}
	}
}

func TestAudit45XRateNoTruncationAndTiny(t *testing.T) {
	for _, r := range []limit.Limit{0.7692307692307693, 1e-10} {
		clk := limittest.NewFakeClock()
		clk.SetTime(a45T0)
		l, err := limit.New(r, 1, limit.WithClock(clk))
		if err != nil {
			t.Fatalf("New(%v, 1): %v", r, err)
		}
		if !l.Allow("k") {
			t.Errorf("New(%v, 1): first Allow false", r)
		}
		if l.Allow("k") {
			t.Errorf("New(%v, 1): second Allow true", r)
		}
	}
}

// TestAudit45SetBurstDebtFormDocumented: x/time/rate's SetBurst keeps the
// token count (a full bucket of 10 raised to 20 still holds 10, refilling
// to 20 later); here the debt is kept (tier.go: "a key's debt is
// unchanged, so a lower burst leaves a key in debt further from
// admission, a higher one closer"): the key that spent 5 of 10 has 15.
func TestAudit45SetBurstDebtFormDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 10, eng, limit.WithMaxDebt(40))
		x := rate.NewLimiter(10, 10)
		now := e.clk.Now()
		e.l.AllowN(now, "k", 5)
		x.AllowN(now, 5)
		if err := e.l.SetBurst(20); err != nil {
			t.Fatal(err)
		}
		x.SetBurstAt(now, 20)
		if got, xg := e.l.TokensAt(now, "k"), x.TokensAt(now); got != 15 || xg != 5 {
			t.Errorf("after SetBurst(20): tokens %v (want 15, debt form), x/time/rate %v", got, xg)
		}
		if got := e.l.TokensAt(now, "fresh"); got != 20 {
			t.Errorf("fresh key after SetBurst(20): %v, want 20", got)
		}
	})
}

// TestAudit45XRateFutureTDocumented: "t after the clock's reading counts
// as that reading" (docs/readings.md, AllowN row: the one deviation).
// x/time/rate drains to a future t; here AllowN, TokensAt and ReserveN at
// clock + 1 s decide at the clock's reading, and the reservation's delay
// is measured from the reading.
func TestAudit45XRateFutureTDocumented(t *testing.T) {
	a45Each(t, func(t *testing.T, eng limit.Engine) {
		e := a45New(t, 10, 1, eng)
		x := rate.NewLimiter(10, 1)
		now := e.clk.Now()
		later := now.Add(time.Second)
		e.l.AllowN(now, "k", 1)
		x.AllowN(now, 1)
		if got, xg := e.l.TokensAt(later, "k"), x.TokensAt(later); got != 0 || xg != 1 {
			t.Errorf("TokensAt(now+1s) = %v (want 0), x/time/rate %v (1)", got, xg)
		}
		if e.l.AllowN(later, "k", 1) {
			t.Error("AllowN(now+1s) admitted: the future t drained the key")
		}
		r := e.l.ReserveN(later, "k", 1)
		if !r.OK() || r.DelayFrom(now) != 100*time.Millisecond {
			t.Errorf("ReserveN(now+1s): ok %v, DelayFrom(now) %v, want 100ms", r.OK(), r.DelayFrom(now))
		}
		var zero limit.Reservation
		zero.Cancel()
		if zero.OK() || zero.Delay() != limit.InfDuration || zero.DelayFrom(now) != limit.InfDuration {
			t.Errorf("zero Reservation: ok %v delay %v", zero.OK(), zero.Delay())
		}
	})
}
