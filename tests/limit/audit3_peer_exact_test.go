package limit_test

// Audit 3: two places where a key alone in its cells is not the exact
// token bucket (x/time/rate's answers) although the package doc says it
// is.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"golang.org/x/time/rate"
)

// TestAudit3PeerExactHighDrain: limit/doc.go, "Exactness": "The
// count-min is exact when the rate is a short fraction (p/q per second,
// ...) and MaxDebt drains within 2^24 units, a unit being the largest
// that divides both a token and a millisecond's drain"; and "Engines":
// the Buckets engine "holds a limiter only where it is exact: MaxDebt must
// drain within 61,438 ticks of at most a millisecond, a token being a
// whole number of ticks". A whole rate of r per second with r/gcd(r,
// 1000) > 4096 (4097/s, 4113/s, 5001/s, 18387/s) is such a short
// fraction: a token is 1000 units, a millisecond drains r units (both
// whole), and MaxDebt 2 x burst x 1000 units is within 2^24 for bursts up
// to 8388 and within 61,438 ticks for bursts up to 30. New made these
// limiters inexact on the count-min (limit/units.go capped exact units
// at 4096 drained per ms, a bound only the odd-part rule needs), which
// then denied a full burst one second after a full burst, as the exact
// bucket and x/time/rate do not; and refused WithEngine(Buckets) above
// 16384 ticks per ms (internal/bucket/law.go: maxTicksPerMs), which the
// doc did not state and now does.
func TestAudit3PeerExactHighDrain(t *testing.T) {
	for _, r := range []int{4097, 4113, 5001, 18387} {
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			// Buckets: a millisecond of r ticks of a 1/r ms token, exact
			// up to 16,384 ticks to the millisecond (limit's doc,
			// "Engines"), refused beyond.
			_, err := limit.New(limit.Limit(r), 1, limit.WithEngine(limit.Buckets))
			if r <= 16384 && err != nil {
				t.Errorf("New(%d, 1, WithEngine(Buckets)) (MaxDebt 2 tokens = 2000 ticks of 1/%d ms): %v", r, r, err)
			}
			if r > 16384 && !errors.Is(err, sketch.ErrInvalidConfig) {
				t.Errorf("New(%d, 1, WithEngine(Buckets)) (%d ticks to the ms): %v, want the documented refusal", r, r, err)
			}
			burst := min(r, 8388)
			p := a3newPeer(t, limit.Limit(r), burst, limit.WithEngine(limit.CountMin))
			if !p.l.Exact() {
				t.Errorf("New(%d, %d) on the count-min (MaxDebt %d x 1000 units <= 2^24): Exact() = false", r, burst, 2*burst)
			}
			x := rate.NewLimiter(rate.Limit(r), burst)
			now := p.clk.Now()
			if !p.l.AllowN(now, "k", burst) || !x.AllowN(now, burst) {
				t.Fatal("burst from an empty key")
			}
			p.clk.Advance(time.Second)
			now = p.clk.Now()
			want := x.AllowN(now, burst) // x/time/rate: exactly r tokens back in 1 s
			if d := p.l.DecideN(now, "k", burst); d.Allowed != want {
				t.Errorf("New(%d, %d): a full burst 1 s after a full burst: allowed %v, x/time/rate %v (%+v)", r, burst, d.Allowed, want, d)
			}
		})
	}
}

// TestAudit3PeerRotationLag: Decision: "Its durations are whole
// milliseconds, measured from the request's t (from the clock's reading
// when t is ahead of it, as the decision is); for a key alone in its
// cells they are exact"; limit/doc.go, "Exactness": "every decision, and
// every RetryAfter, ResetAfter, NextAfter and Remaining, is that of the
// rational bucket". A request whose t lies before the clock's reading but
// after every time used (not stale: it is decided at t, as x/time/rate
// decides it) is answered with durations measured from the clock's
// reading instead whenever the count-min's rotation falls due at it: the
// rotation reads the clock for its next deadline, which raises the
// high-water mark the lag is measured from. Here, 10/s with burst 1: a
// request at t = T0 + Period, decided with the clock 500 ms later, owes 1
// token that drains in 100 ms, and its ResetAfter (and a denial's
// RetryAfter, and a reservation's time to act) comes out 600 ms. The
// Buckets engine, and the count-min at a t that does not fall on a
// rotation, give 100 ms.
func TestAudit3PeerRotationLag(t *testing.T) {
	a3forEngines(t, func(t *testing.T, eng limit.Option) {
		p := a3newPeer(t, 10, 1, eng)
		x := rate.NewLimiter(10, 1)
		t0 := p.clk.Now()
		if !p.l.AllowN(t0, "k", 1) || !x.AllowN(t0, 1) {
			t.Fatal("first request")
		}
		at := t0.Add(3200 * time.Millisecond) // the count-min's Period: 16 x 2 / 10 s
		if per := p.l.Period(); per != 0 && per != 3200*time.Millisecond {
			t.Fatalf("Period %v", per)
		}
		p.clk.SetTime(at.Add(500 * time.Millisecond))
		d := p.l.DecideN(at, "k", 1)
		if !d.Allowed || !x.AllowN(at, 1) {
			t.Fatalf("request at t %+v", d)
		}
		if d.ResetAfter != 100*time.Millisecond || d.NextAfter != 100*time.Millisecond {
			t.Errorf("%v: ResetAfter %v, NextAfter %v, want 100ms from t (x/time/rate: the token is back at t+100ms)", p.l.Engine(), d.ResetAfter, d.NextAfter)
		}
		// The same t again: denied, and the retry is 100 ms after t.
		d2 := p.l.DecideN(at, "k", 1)
		xr := x.ReserveN(at, 1)
		if d2.Allowed || d2.RetryAfter != xr.DelayFrom(at) {
			t.Errorf("%v: second request at t: allowed %v RetryAfter %v, x/time/rate waits %v", p.l.Engine(), d2.Allowed, d2.RetryAfter, xr.DelayFrom(at))
		}
	})
}
