package limit_test

// FINDING (audit18): these tests FAIL on the current code. The limiter's
// short forms (Allow, Decide, Peek, Reserve, Tier's, Multi.Allow,
// DecideContext and so httplimit's headers) take t = Limiter.Now(),
// which reads the clock through the high-water mark (Timebase.Now), not
// the clock's own reading. When the clock (WithClock) stepped back
// behind a time already used, every wait they return counts from the
// high-water time instead of from the clock, so it is early by the lag:
// the same request retried when the clock has moved RetryAfter is denied
// again, Reservation.Delay is short, and WaitN returns with the key in
// debt. The full forms given the clock's reading (DecideN(clk.Now(), ...))
// are right: gap adds the lag. It is the bug just fixed in the Redis
// module (e95cc53, redis/clockback_test.go), in-process.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/httplimit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

const (
	a18Take = 3_610_000 // the burst is taken here
	a18Back = 10_000    // then the clock steps back here: an hour behind
	a18Lag  = time.Duration(a18Take-a18Back) * time.Millisecond
)

// a18Stepped returns a 10/s burst-10 limiter whose key "k" took its
// burst at a18Take, with the clock then stepped back to a18Back.
func a18Stepped(t *testing.T, eng limit.Engine) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	clk := limittest.NewFakeClock()
	clk.Set(a18Back)
	l, err := limit.New(10, 10, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(1), limit.WithName("w"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(a18Take)
	if !l.AllowN(clk.Now(), "k", 10) {
		t.Fatal("burst denied")
	}
	clk.Set(a18Back)
	return l, clk
}

var a18Engines = []limit.Engine{limit.Buckets, limit.CountMin}

// The reference: the full form at the clock's reading counts from the
// clock (this holds on the current code).
func TestAudit18ClockBackFullForm(t *testing.T) {
	for _, eng := range a18Engines {
		l, clk := a18Stepped(t, eng)
		d := l.DecideN(clk.Now(), "k", 1)
		if d.Allowed || d.RetryAfter != a18Lag+100*time.Millisecond || d.ResetAfter != a18Lag+time.Second || d.NextAfter != a18Lag+100*time.Millisecond {
			t.Fatalf("%v: DecideN(clock) = %+v; want RetryAfter %v, ResetAfter %v", eng, d, a18Lag+100*time.Millisecond, a18Lag+time.Second)
		}
	}
}

// FINDING: Decide's RetryAfter counts from the high-water time.
func TestAudit18ClockBackDecide(t *testing.T) {
	for _, eng := range a18Engines {
		l, clk := a18Stepped(t, eng)
		d := l.Decide("k")
		if d.Allowed || d.Never {
			t.Fatalf("%v: Decide = %+v; want denied", eng, d)
		}
		clk.Advance(d.RetryAfter)
		if !l.Allow("k") {
			t.Errorf("%v: clock stepped back %v; Decide's RetryAfter %v (ResetAfter %v), yet Allow when the clock has moved by it is denied (Limiter.Now %d ms, clock %d ms): want RetryAfter %v",
				eng, a18Lag, d.RetryAfter, d.ResetAfter, l.Now().UnixMilli(), clk.NowMillis(), a18Lag+100*time.Millisecond)
		}
	}
}

// FINDING: Limiter.Now is documented as "the limiter clock's current
// reading"; it returns the high-water time.
func TestAudit18ClockBackNow(t *testing.T) {
	l, clk := a18Stepped(t, limit.Buckets)
	if got := l.Now().UnixMilli(); got != clk.NowMillis() {
		t.Errorf("Limiter.Now() = %d ms, the clock reads %d ms", got, clk.NowMillis())
	}
}

// FINDING: Reservation.Delay is short by the lag.
func TestAudit18ClockBackReserve(t *testing.T) {
	for _, eng := range a18Engines {
		l, _ := a18Stepped(t, eng)
		r := l.Reserve("k")
		if !r.OK() {
			t.Fatalf("%v: Reserve not OK", eng)
		}
		if want := a18Lag + 100*time.Millisecond; r.Delay() != want {
			t.Errorf("%v: Reserve after the clock stepped back %v: Delay %v, want %v", eng, a18Lag, r.Delay(), want)
		}
	}
}

// FINDING: WaitN returns while the key is still in debt (an hour early).
func TestAudit18ClockBackWait(t *testing.T) {
	for _, eng := range a18Engines {
		l, clk := a18Stepped(t, eng)
		done := make(chan error, 1)
		go func() { done <- l.Wait(context.Background(), "k") }()
		clk.BlockUntilTimers(1)
		clk.Advance(100 * time.Millisecond)
		if clk.Timers() == 0 { // the timer fired: Wait returns now
			err := <-done
			t.Errorf("%v: Wait returned (%v) when the clock had moved 100 ms, an hour before the limiter's time reaches the token (tokens now %v)", eng, err, l.TokensAt(clk.Now(), "k"))
			continue
		}
		clk.Advance(a18Lag) // the right wait: release it
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// FINDING: Tier's short forms and Multi.Allow's RetryAfter, and the
// Retry-After header, count from the high-water time.
func TestAudit18ClockBackTierMultiHTTP(t *testing.T) {
	want := a18Lag + 100*time.Millisecond
	l, clk := a18Stepped(t, limit.Buckets)
	if d, _ := l.DecideContext(context.Background(), "k", 1); d.RetryAfter != want {
		t.Errorf("DecideContext: RetryAfter %v, want %v", d.RetryAfter, want)
	}
	tier, err := l.Tier("t", 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if d := tier.Decide("k"); d.RetryAfter != want {
		t.Errorf("Tier.Decide: RetryAfter %v, want %v", d.RetryAfter, want)
	}
	m, err := limit.NewMulti(l)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.DecideKeys(l.Now(), 1, "k"); d.RetryAfter != want {
		t.Errorf("Multi.DecideKeys(first window's Now): RetryAfter %v, want %v", d.RetryAfter, want)
	}
	h := httplimit.Wrap(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Header().Get("Retry-After"); rec.Code != 429 || got != "3601" {
		t.Errorf("httplimit: %d Retry-After %q, want 429 and 3601 (the clock is %v behind the take)", rec.Code, got, a18Lag)
	}
	_ = clk
}
