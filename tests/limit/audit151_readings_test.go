package limit_test

import (
	"context"
	"errors"
	"math"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

var a151Base = time.Unix(1_000_000, 0)

func a151New(t *testing.T, r limit.Limit, b int, opts ...limit.Option) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.SetTime(a151Base)
	l, err := limit.New(r, b, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(151)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func a151Engines(t *testing.T, f func(t *testing.T, e limit.Engine)) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		t.Run(e.String(), func(t *testing.T) { f(t, e) })
	}
}

// TestAudit151FixedCancelRowSameMillisecondOnBuckets (audit 151; fixed at
// stop 65, the text below says what was wrong; the row now says "or, on
// the count-min, only within the same millisecond"): docs/readings.md's
// Cancel row said "if no other request wrote the key's cells since (or
// only within the same millisecond, below MaxDebt), the key reads as if
// the reservation had never been taken". The same-millisecond exception
// is the count-min's only (Reservation.Cancel's godoc; Multi's too).
// Buckets is the default engine, so a migrating user who read the row got
// the wrong answer: ReserveN(T, k, 2), AllowN(T, k, 1), Cancel: Tokens 17
// on Buckets (the debit stays), 19 on the count-min.
func TestAudit151FixedCancelRowSameMillisecondOnBuckets(t *testing.T) {
	a151Engines(t, func(t *testing.T, e limit.Engine) {
		l, _ := a151New(t, 10, 20, limit.WithEngine(e))
		r := l.ReserveN(a151Base, "k", 2)
		if !r.OK() || !l.AllowN(a151Base, "k", 1) {
			t.Fatal("reservation or request within the burst refused")
		}
		r.Cancel()
		want := 17.0 // Buckets: the debit stays
		if e == limit.CountMin {
			want = 19 // as if never taken
		}
		if tk := l.Tokens("k"); tk != want {
			t.Errorf("ReserveN(T, 2), AllowN(T, 1) in the same ms, Cancel: Tokens %v; want %v", tk, want)
		}
	})
	a151DocSays(t, "(or, on the count-min, only within the same millisecond, below MaxDebt)")
}

// a151DocSays fails t unless docs/readings.md holds phrase.
func a151DocSays(t *testing.T, phrase string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/readings.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), phrase) {
		t.Errorf("docs/readings.md no longer says %q", phrase)
	}
}

// TestAudit151FixedCancelRowMaxDebtReservationKept (audit 151; fixed at
// stop 65, the text below says what was wrong; the row now says "a
// reservation that filled the key to MaxDebt is never given back (either
// engine)"): the Cancel row promised a full give-back when nothing wrote
// the key since, and said it listed every deviation from x/time/rate. A
// reservation that filled the key to MaxDebt is kept (Reservation.Cancel's
// godoc): New(10, 20), default MaxDebt 40, ReserveN(T, k, 20) twice, 50 ms
// later Cancel the second, no other request: Tokens -19.5 on both
// engines, where x/time/rate's CancelAt gives 0.5.
func TestAudit151FixedCancelRowMaxDebtReservationKept(t *testing.T) {
	a151Engines(t, func(t *testing.T, e limit.Engine) {
		l, clk := a151New(t, 10, 20, limit.WithEngine(e))
		x := rate.NewLimiter(10, 20)
		l.ReserveN(a151Base, "k", 20)
		x.ReserveN(a151Base, 20)
		r, xr := l.ReserveN(a151Base, "k", 20), x.ReserveN(a151Base, 20)
		if !r.OK() || !xr.OK() {
			t.Fatal("reservations up to MaxDebt 40 not OK")
		}
		clk.Advance(50 * time.Millisecond)
		now := clk.Now()
		r.Cancel()
		xr.CancelAt(now)
		if got, want := l.Tokens("k"), x.TokensAt(now); got != -19.5 || want != 0.5 {
			t.Errorf("Cancel of the reservation that reached MaxDebt, nothing written since: Tokens %v (want -19.5, kept), x/time/rate %v (0.5)", got, want)
		}
	})
	a151DocSays(t, "a reservation that filled the key to MaxDebt is never given back (either engine)")
}

// TestAudit151FixedTokensAtRowFutureT (audit 151; fixed at stop 65, the
// text below says what was wrong; the row now names the future-t rule):
// the TokensAt row's deviation column named only the key, but TokensAt
// takes t as AllowN takes it, and a t after the clock's reading counts as
// that reading, where x/time/rate's TokensAt(t) forecasts the refill.
// New(10, 20) spent at T, clock at T: TokensAt(T+300ms) = 0 on both
// engines; x/time/rate 3.
func TestAudit151FixedTokensAtRowFutureT(t *testing.T) {
	a151Engines(t, func(t *testing.T, e limit.Engine) {
		l, _ := a151New(t, 10, 20, limit.WithEngine(e))
		x := rate.NewLimiter(10, 20)
		l.AllowN(a151Base, "k", 20)
		x.AllowN(a151Base, 20)
		at := a151Base.Add(300 * time.Millisecond)
		if got, want := l.TokensAt(at, "k"), x.TokensAt(at); got != 0 || want != 3 {
			t.Errorf("TokensAt(T+300ms) with the clock at T: %v (want 0: the reading), x/time/rate %v (3)", got, want)
		}
	})
	a151DocSays(t, "a t after the clock's reading counts as that reading (x/time/rate forecasts the refill up to t)")
}

// docs/readings.md, Reserve row: "not OK beyond MaxDebt (x/time/rate queues
// without bound)" is the row's deviation; for n > burst both refuse, and
// "`Reservation.OK`, `DelayFrom` | same | none": a reservation that is not
// OK has DelayFrom = InfDuration in both, and Cancel of it does nothing.
func TestAudit151ReadingsReserveNotOKParity(t *testing.T) {
	a151Engines(t, func(t *testing.T, e limit.Engine) {
		l, _ := a151New(t, 10, 5, limit.WithEngine(e))
		x := rate.NewLimiter(10, 5)
		for _, n := range []int{6, 10, 11} { // above the burst, up to and past MaxDebt
			r, xr := l.ReserveN(a151Base, "k", n), x.ReserveN(a151Base, n)
			if r.OK() || xr.OK() {
				t.Errorf("ReserveN(%d > burst 5): OK %v, x/time/rate %v; both refuse", n, r.OK(), xr.OK())
			}
			if d, xd := r.DelayFrom(a151Base), xr.DelayFrom(a151Base); d != limit.InfDuration || d != xd {
				t.Errorf("ReserveN(%d) not OK: DelayFrom %v, x/time/rate %v; readings.md: same", n, d, xd)
			}
			r.Cancel()
		}
		if tk := l.Tokens("k"); tk != 5 {
			t.Errorf("refused reservations debited: Tokens %v", tk)
		}
		// the row's deviation: past MaxDebt (10) refused here, queued there
		l.ReserveN(a151Base, "k", 5)
		x.ReserveN(a151Base, 5)
		l.ReserveN(a151Base, "k", 5)
		x.ReserveN(a151Base, 5)
		r, xr := l.ReserveN(a151Base, "k", 1), x.ReserveN(a151Base, 1)
		if r.OK() || !xr.OK() || xr.DelayFrom(a151Base) != 600*time.Millisecond {
			t.Errorf("past MaxDebt: OK %v, x/time/rate OK %v (%v); readings.md: not OK here, queued there", r.OK(), xr.OK(), xr.DelayFrom(a151Base))
		}
	})
}

// docs/readings.md, Reserve row: "A stale t is decided at the later time the
// limiter is at and the act time measured from there (x/time/rate: from t,
// its own time)".
func TestAudit151ReadingsStaleReserveActTime(t *testing.T) {
	a151Engines(t, func(t *testing.T, e limit.Engine) {
		l, clk := a151New(t, 10, 5, limit.WithEngine(e))
		x := rate.NewLimiter(10, 5)
		l.AllowN(a151Base, "k", 5)
		x.AllowN(a151Base, 5)
		later := a151Base.Add(time.Second)
		clk.SetTime(later)
		l.Allow("other") // the limiter's time is now T+1s
		r, xr := l.ReserveN(a151Base, "k", 1), x.ReserveN(a151Base, 1)
		if !r.OK() || r.DelayFrom(a151Base) != time.Second || r.DelayFrom(later) != 0 {
			t.Errorf("stale ReserveN(T) with the limiter at T+1s: DelayFrom(T) %v, DelayFrom(T+1s) %v; readings.md: decided at T+1s, acts from there (1s, 0)", r.DelayFrom(a151Base), r.DelayFrom(later))
		}
		if !xr.OK() || xr.DelayFrom(a151Base) != 100*time.Millisecond {
			t.Errorf("x/time/rate: DelayFrom(T) %v; readings.md: from t, its own time (100ms)", xr.DelayFrom(a151Base))
		}
	})
}

// docs/readings.md, Wait row: "n > burst: error; ctx done: `ctx.Err()`" in
// that order as x/time/rate's, nothing debited; "x/time/rate's \"would
// exceed context deadline\" matches nothing" while ErrPastDeadline also
// matches context.DeadlineExceeded.
func TestAudit151ReadingsWaitErrorsParity(t *testing.T) {
	l, _ := a151New(t, 10, 5)
	x := rate.NewLimiter(10, 5)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	err, xerr := l.WaitN(done, "k", 6), x.WaitN(done, 6)
	if !errors.Is(err, limit.ErrAboveBurst) || xerr == nil || !strings.Contains(xerr.Error(), "exceeds limiter's burst") {
		t.Errorf("WaitN(done ctx, n > burst): %v, x/time/rate %v; readings.md: n > burst is the error", err, xerr)
	}
	err, xerr = l.WaitN(done, "k", 1), x.WaitN(done, 1)
	if err != context.Canceled || xerr != context.Canceled {
		t.Errorf("WaitN(done ctx): %v, x/time/rate %v; readings.md: ctx.Err()", err, xerr)
	}
	if tk, xt := l.Tokens("k"), x.Tokens(); tk != 5 || xt != 5 {
		t.Errorf("WaitN(done ctx) debited: Tokens %v, x/time/rate %v", tk, xt)
	}
	// Inf: every n, as x/time/rate's (ErrAboveBurst: "not on an Inf limiter")
	li, xi := limit.MustNew(limit.Inf, 5), rate.NewLimiter(rate.Inf, 5)
	if err, xerr := li.WaitN(context.Background(), "k", 50), xi.WaitN(context.Background(), 50); err != nil || xerr != nil {
		t.Errorf("Inf WaitN(50 > burst 5): %v, x/time/rate %v", err, xerr)
	}
	if r, xr := li.ReserveN(a151Base, "k", 50), xi.ReserveN(a151Base, 50); !r.OK() || !xr.OK() || r.DelayFrom(a151Base) != 0 || xr.DelayFrom(a151Base) != 0 {
		t.Errorf("Inf ReserveN(50): OK %v, x/time/rate %v", r.OK(), xr.OK())
	}
	// x/time/rate's deadline error matches nothing. A wait of an hour
	// against a deadline a minute away: x/time/rate checks ctx.Done
	// first, so a 10 ms deadline read as the context's own error after a
	// 10 ms pause (audit 155: 1 run in 3,000).
	xs := rate.NewLimiter(rate.Every(time.Hour), 1)
	xs.AllowN(time.Now(), 1)
	ctx, c2 := context.WithTimeout(context.Background(), time.Minute)
	defer c2()
	xerr = xs.Wait(ctx)
	if xerr == nil || errors.Is(xerr, context.DeadlineExceeded) || errors.Is(xerr, limit.ErrPastDeadline) {
		t.Errorf("x/time/rate Wait past the deadline: %v; readings.md: its error matches nothing", xerr)
	}
}

// docs/readings.md, NewLimiter and zero Limiter rows, x/time/rate's side:
// "x/time/rate's zero Limit admits `b` events then none, and `b = 0` admits
// nothing"; "x/time/rate's zero Limiter is valid and rejects all"; "(x/time/rate
// admits `n = 0`)"; here the zero Limiter's decision methods panic
// ("limit: zero Limiter; use New") and n <= 0 panics.
func TestAudit151ReadingsZeroAndRefusedParity(t *testing.T) {
	z := rate.NewLimiter(0, 3)
	got := 0
	for i := range 10 {
		if z.AllowN(a151Base.Add(time.Duration(i)*time.Hour), 1) {
			got++
		}
	}
	if got != 3 {
		t.Errorf("x/time/rate NewLimiter(0, 3) admitted %d over 10 h; readings.md: b then none", got)
	}
	b0 := rate.NewLimiter(10, 0)
	for i := range 10 {
		if b0.AllowN(a151Base.Add(time.Duration(i)*time.Second), 1) {
			t.Fatal("x/time/rate NewLimiter(10, 0) admitted; readings.md: nothing")
		}
	}
	var zl rate.Limiter
	if zl.Allow() || zl.Reserve().OK() || !zl.AllowN(a151Base, 0) {
		t.Error("x/time/rate zero Limiter: readings.md: valid, rejects all (admits n = 0)")
	}
	for _, c := range []struct {
		r limit.Limit
		b int
	}{{0, 3}, {10, 0}} {
		if _, err := limit.New(c.r, c.b); err == nil {
			t.Errorf("New(%v, %d) accepted; readings.md: an error", c.r, c.b)
		}
	}
	var zero limit.Limiter
	for name, f := range map[string]func(){
		"Allow":    func() { zero.Allow("k") },
		"AllowN":   func() { zero.AllowN(a151Base, "k", 1) },
		"ReserveN": func() { zero.ReserveN(a151Base, "k", 1) },
		"TokensAt": func() { zero.TokensAt(a151Base, "k") },
		"WaitN":    func() { _ = zero.WaitN(context.Background(), "k", 1) },
		"DecideN":  func() { zero.DecideN(a151Base, "k", 1) },
	} {
		msg := a151Panics(f)
		if !strings.Contains(msg, "limit: zero Limiter; use New") {
			t.Errorf("zero Limiter %s: panic %q; readings.md: panics (\"limit: zero Limiter; use New\")", name, msg)
		}
	}
	l, _ := a151New(t, 10, 5)
	if msg := a151Panics(func() { l.ReserveN(a151Base, "k", 0) }); msg == "" {
		t.Error("ReserveN(n = 0) did not panic; readings.md: n <= 0 panics")
	}
}

func a151Panics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = "panic"
			if s, ok := r.(string); ok {
				msg = s
			} else if e, ok := r.(error); ok {
				msg = e.Error()
			}
		}
	}()
	f()
	return ""
}

// docs/readings.md, "Live traffic": "Policy 10/s, burst 20: `limit.New` runs
// it on Buckets ... an abuser makes `abuser` requests a second, for 10
// simulated seconds; its own token bucket alone admits 119 of them
// (`ideal`)", for 20/s, 15/s and 200/s ("abuser admitted (of ideal 119)";
// `lru` admits "200: every request" at 20/s, "150" at 15/s). Both libraries
// on the abuser alone.
func TestAudit151ReadingsAbuserIdeal(t *testing.T) {
	for _, perSec := range []int{20, 15, 200} {
		l, clk := a151New(t, 10, 20)
		if l.Engine() != limit.Buckets {
			t.Fatalf("New(10, 20) on %v", l.Engine())
		}
		x := rate.NewLimiter(10, 20)
		got, xgot, reqs := 0, 0, 0
		for i := 0; i < 10*perSec; i++ {
			at := a151Base.Add(time.Duration(i) * time.Second / time.Duration(perSec))
			clk.SetTime(at)
			reqs++
			if l.AllowN(at, "abuser", 1) {
				got++
			}
			if x.AllowN(at, 1) {
				xgot++
			}
		}
		if got != 119 || xgot != 119 || reqs != 10*perSec {
			t.Errorf("abuser at %d/s for 10 s (%d requests): limit %d, x/time/rate %d; readings.md: ideal 119", perSec, reqs, got, xgot)
		}
	}
}

// docs/readings.md, parity table, `Multi`: "several windows all or nothing
// ... (two `rate.Limiter`s checked in turn would debit the first when the
// second denies)".
func TestAudit151ReadingsMultiVsTwoXrate(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.SetTime(a151Base)
	a := limit.MustNew(10, 5, limit.WithClock(clk))
	b := limit.MustNew(1, 1, limit.WithClock(clk))
	m, err := limit.NewMulti(a, b)
	if err != nil {
		t.Fatal(err)
	}
	xa, xb := rate.NewLimiter(10, 5), rate.NewLimiter(1, 1)
	if !m.AllowN(a151Base, "k", 1) || !(xa.AllowN(a151Base, 1) && xb.AllowN(a151Base, 1)) {
		t.Fatal("first request denied")
	}
	for range 3 {
		if m.AllowN(a151Base, "k", 1) {
			t.Fatal("Multi admitted past the second window")
		}
		if xa.AllowN(a151Base, 1) && xb.AllowN(a151Base, 1) {
			t.Fatal("two x/time/rate limiters admitted past the second")
		}
	}
	if tk, xt := a.Tokens("k"), xa.TokensAt(a151Base); tk != 4 || xt != 1 {
		t.Errorf("first window after 3 denials by the second: Multi's %v (want 4: all or nothing), x/time/rate in turn %v (want 1: debited)", tk, xt)
	}
}

// docs/readings.md, parity table: "`Limit()`, `Burst()` | same | same |
// none" and "`Every(d <= 0)` is `Inf`"'s row ("same"): the accessors return
// what x/time/rate's return for the same construction and after SetLimit /
// SetBurst, to the bit.
func TestAudit151ReadingsLimitBurstSame(t *testing.T) {
	for _, r := range []float64{0.3, 7.3, 1.0 / 3, 1e-6, 18387, math.Pi, 0.1 + 0.2, 1000} {
		l, err := limit.New(limit.Limit(r), 5, limit.WithMaxDebt(20))
		if err != nil {
			t.Fatalf("New(%v, 5): %v", r, err)
		}
		x := rate.NewLimiter(rate.Limit(r), 5)
		if float64(l.Limit()) != float64(x.Limit()) || l.Burst() != x.Burst() {
			t.Errorf("New(%v, 5): Limit %v Burst %d, x/time/rate %v %d", r, l.Limit(), l.Burst(), x.Limit(), x.Burst())
		}
		nr := r * 1.5
		if err := l.SetLimit(limit.Limit(nr)); err != nil {
			t.Fatalf("SetLimit(%v): %v", nr, err)
		}
		x.SetLimit(rate.Limit(nr))
		if err := l.SetBurst(7); err != nil {
			t.Fatalf("SetBurst(7): %v", err)
		}
		x.SetBurst(7)
		if float64(l.Limit()) != float64(x.Limit()) || l.Burst() != x.Burst() {
			t.Errorf("after SetLimit(%v), SetBurst(7): Limit %v Burst %d, x/time/rate %v %d", nr, l.Limit(), l.Burst(), x.Limit(), x.Burst())
		}
	}
	for _, d := range []time.Duration{-time.Second, 0, 1, 333 * time.Microsecond, 7 * time.Millisecond, 3 * time.Second, 24 * time.Hour} {
		if float64(limit.Every(d)) != float64(rate.Every(d)) {
			t.Errorf("Every(%v) = %v, x/time/rate %v", d, limit.Every(d), rate.Every(d))
		}
	}
	li, xi := limit.MustNew(limit.Inf, 7), rate.NewLimiter(rate.Inf, 7)
	if li.Burst() != xi.Burst() || float64(li.Limit()) != float64(xi.Limit()) {
		t.Errorf("Inf: Limit %v Burst %d, x/time/rate %v %d", li.Limit(), li.Burst(), xi.Limit(), xi.Burst())
	}
}

// docs/readings.md, "Arithmetic": "x/time/rate keeps float64 tokens and
// nanosecond times (`durationFromTokens` truncates, so a wait can be up to
// 1 ns short); here ... durations are whole milliseconds, exact against the
// rational bucket when `Exact()` and never early otherwise". A wait of b
// tokens after the burst is spent, both libraries, against big.Rat.
func TestAudit151ReadingsArithmetic(t *testing.T) {
	worst := new(big.Rat)
	checked := 0
	for num := int64(1); num <= 3000; num += 7 {
		for _, den := range []int64{1, 3, 7, 1000, 3600} {
			for _, b := range []int{1, 3, 20, 999} {
				exact := new(big.Rat).SetFrac64(int64(b)*den*int64(time.Second), num) // ns
				x := rate.NewLimiter(rate.Limit(float64(num)/float64(den)), b)
				x.AllowN(a151Base, b)
				xd := x.ReserveN(a151Base, b).DelayFrom(a151Base)
				short := new(big.Rat).Sub(exact, new(big.Rat).SetInt64(int64(xd)))
				if short.Cmp(worst) > 0 {
					worst = short
				}
				if num%70 != 1 || b == 999 { // ours on a sample: a limiter costs its memory
					continue
				}
				l, _ := a151New(t, limit.Limit(float64(num)/float64(den)), b, limit.WithSize(2, 64))
				l.AllowN(a151Base, "k", b)
				r := l.ReserveN(a151Base, "k", b)
				d := r.DelayFrom(a151Base)
				checked++
				if d%time.Millisecond != 0 {
					t.Errorf("%d/%d per s, b %d: Delay %v not whole ms", num, den, b, d)
				}
				dr := new(big.Rat).SetInt64(int64(d))
				if dr.Cmp(exact) < 0 {
					t.Errorf("%d/%d per s, b %d: Delay %v early (exact %s ns)", num, den, b, d, exact.FloatString(1))
				}
				ceil := new(big.Rat).SetInt64(int64(time.Millisecond))
				ceil.Add(ceil, exact)
				if l.Exact() && dr.Cmp(ceil) >= 0 {
					t.Errorf("%d/%d per s, b %d: Exact() but Delay %v is a whole ms late (exact %s ns)", num, den, b, d, exact.FloatString(1))
				}
			}
		}
	}
	if worst.Cmp(big.NewRat(1, 1)) > 0 {
		t.Errorf("x/time/rate: a wait %s ns short; readings.md: up to 1 ns", worst.FloatString(3))
	}
	if checked == 0 {
		t.Fatal("no limiter checked")
	}
}

// docs/readings.md, `Multi` row: "RetryAfter when every window admits".
func TestAudit151ReadingsMultiRetryAfter(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.SetTime(a151Base)
	a := limit.MustNew(10, 5, limit.WithClock(clk))
	b := limit.MustNew(1, 2, limit.WithClock(clk))
	m, err := limit.NewMulti(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if !m.AllowN(a151Base, "k", 1) {
			t.Fatal("within both bursts denied")
		}
	}
	a.AllowN(a151Base, "k", 3) // a: 0 left, 300 ms to one; b: 0 left, 1 s to one
	d := m.DecideKeys(a151Base, 1, "k")
	if d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("Multi denial: Allowed %v RetryAfter %v; readings.md: when every window admits (1s)", d.Allowed, d.RetryAfter)
	}
	at := a151Base.Add(d.RetryAfter - time.Millisecond)
	clk.SetTime(at)
	if m.AllowN(at, "k", 1) {
		t.Error("admitted 1 ms before RetryAfter")
	}
	at = a151Base.Add(d.RetryAfter)
	clk.SetTime(at)
	if !m.AllowN(at, "k", 1) {
		t.Error("denied at RetryAfter")
	}
}

// docs/readings.md: "`syncmap` | `sync.Map` of `*rate.Limiter`
// (golang.org/x/time/rate v0.15.0)", "`limit` follows golang.org/x/time/rate
// (v0.15.0, read from its source)", "hashicorp/golang-lru/v2 v2.0.7",
// "maypok86/otter/v2 v2.4.0", "sethvargo/go-limiter v0.7.1": the versions
// the parity tests (this module) and the measurements (bench/) build with.
func TestAudit151ReadingsPeerVersions(t *testing.T) {
	for file, want := range map[string][]string{
		"../go.mod":          {"golang.org/x/time v0.15.0"},
		"../../bench/go.mod": {"golang.org/x/time v0.15.0", "github.com/hashicorp/golang-lru/v2 v2.0.7", "github.com/maypok86/otter/v2 v2.4.0", "github.com/sethvargo/go-limiter v0.7.1"},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Skipf("%s: %v", file, err)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s does not require %s; readings.md names that version", file, w)
			}
		}
	}
}

// docs/readings.md, SetLimit/SetBurst row: "a key's debt is kept as **time
// to drain**, not as a token count: after `SetLimit(r')` it drains in the
// time it had left and new requests cost 1/r' each against the burst in the
// new tokens (x/time/rate keeps the tokens ...)". That is the one
// difference: from the change on, the key decides as an x/time/rate
// limiter of the new policy holding burst - (debt's time x r') tokens.
// Checked on a random run of AllowN after the change (decisions and
// TokensAt), for SetLimit and for SetBurst (whose debt, in the same
// tokens, is kept as is).
func TestAudit151ReadingsSetPolicyDifferential(t *testing.T) {
	a151Engines(t, func(t *testing.T, e limit.Engine) {
		for ci, c := range []struct {
			r, r2  float64
			b, b2  int
			spent  int
			after  time.Duration
			debtR2 int // the debt at the change, in tokens of r2
		}{
			{10, 5, 20, 20, 20, 400 * time.Millisecond, 8},   // 16 tokens = 1.6 s = 8 at 5/s
			{10, 20, 20, 20, 20, 400 * time.Millisecond, 32}, // 1.6 s = 32 at 20/s: past the burst, queued
			{10, 10, 20, 30, 20, 500 * time.Millisecond, 15}, // SetBurst(30): the debt 15 kept
			{10, 10, 20, 12, 20, 900 * time.Millisecond, 11}, // SetBurst(12): debt 11 of 12
		} {
			l, clk := a151New(t, limit.Limit(c.r), c.b, limit.WithEngine(e), limit.WithMaxDebt(80))
			l.AllowN(a151Base, "k", c.spent)
			at := a151Base.Add(c.after)
			clk.SetTime(at)
			if c.r2 != c.r {
				if err := l.SetLimit(limit.Limit(c.r2)); err != nil {
					t.Fatalf("case %d: SetLimit: %v", ci, err)
				}
			}
			if c.b2 != c.b {
				if err := l.SetBurst(c.b2); err != nil {
					t.Fatalf("case %d: SetBurst: %v", ci, err)
				}
			}
			x := rate.NewLimiter(rate.Limit(c.r2), c.b2)
			for left := c.debtR2; left > 0; left -= min(left, c.b2) {
				x.ReserveN(at, min(left, c.b2))
			}
			if got, want := l.TokensAt(at, "k"), x.TokensAt(at); math.Abs(got-want) > 1e-9 {
				t.Fatalf("case %d: at the change Tokens %v, x/time/rate holding the converted debt %v", ci, got, want)
			}
			seed := uint64(ci + 1)
			for i := range 300 {
				seed = seed*6364136223846793005 + 1442695040888963407
				at = at.Add(time.Duration(seed>>33%250) * time.Millisecond)
				n := 1 + int(seed>>20%uint64(c.b2))
				clk.SetTime(at)
				if got, want := l.AllowN(at, "k", n), x.AllowN(at, n); got != want {
					t.Fatalf("case %d step %d: AllowN(%d) %v, x/time/rate %v", ci, i, n, got, want)
				}
				if got, want := l.TokensAt(at, "k"), x.TokensAt(at); math.Abs(got-want) > 1e-6 {
					t.Fatalf("case %d step %d: Tokens %v, x/time/rate %v", ci, i, got, want)
				}
			}
		}
	})
}
