package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// Audit 32: the count-min engine outside the exact domain, with debts that
// take days to drain, across the stamp horizon's sweep (internal/core
// horizon.go: at floor + 2^30 ms every cell older than 2^29 ms is decayed,
// rounded up to a float32 and re-stamped, back-dated by whole ms of drain).

const (
	a32SweepDue = int64(1) << 30 // internal/core/horizon.go's sweepDue

	a32Day    = 24 * time.Hour
	a32Start  = int64(1_700_000_000_000) // the fake clock's reading at New (ms)
	a32Offset = 64                       // sweep instants tried: the traffic's ms offset 0..63
)

// a32Decider is what the sweep scenario drives: a Limiter or a Tier.
type a32Decider interface {
	DecideN(t time.Time, key string, n int) limit.Decision
	PeekN(t time.Time, key string, n int) limit.Decision
	AllowN(t time.Time, key string, n int) bool
	TokensAt(t time.Time, key string) float64
}

// a32Case is one configuration of the sweep scenario: build returns a
// fresh limiter (and the decider to drive) on clk; fill puts key "k" in
// debt at w; then DecideN(w, "k", n) must be a denial.
type a32Case struct {
	name  string
	build func(clk *limittest.FakeClock) (*limit.Limiter, a32Decider)
	fill  func(l *limit.Limiter, d a32Decider, w time.Time) error
	n     int
	w     time.Duration // w's offset after New
	every time.Duration // other keys' traffic every (0: 6 h)
	offs  []int64       // the traffic's ms offsets to try (nil: 0..a32Offset-1)
	busy  bool          // 32 calls at each traffic instant (the default size's 25 sweep chunks), else 1
}

// a32Run runs the scenario once, with other keys' traffic (1 call, or 32
// with busy) every c.every (6 h) at the ms offset off, so that the horizon
// sweep happens at a chosen instant as it would on a busy limiter, and
// returns every broken promise it saw:
//
//   - a retry of the denied request at w+RetryAfter is admitted, and one
//     1 ms earlier is not (Decision.RetryAfter);
//   - at w+ResetAfter the key holds its whole burst (Decision.ResetAfter:
//     "the time until the key's debt drains to zero");
//   - and, when the retry was denied, how many ms late it is admitted.
func a32Run(c a32Case, off int64) []string {
	clk := limittest.NewFakeClock()
	clk.Set(a32Start)
	l, d := c.build(clk)
	w := time.UnixMilli(a32Start).Add(c.w)
	clk.SetTime(w)
	if err := c.fill(l, d, w); err != nil {
		return []string{"setup: " + err.Error()}
	}
	dec := d.DecideN(w, "k", c.n)
	if dec.Allowed || dec.Never {
		return []string{fmt.Sprintf("setup: DecideN(w, k, %d) = %+v, want a denial", c.n, dec)}
	}
	retry, reset := w.Add(dec.RetryAfter), w.Add(dec.ResetAfter)
	end := retry
	if reset.After(end) {
		end = reset
	}
	// Other keys' traffic: every c.every from w, at ms offset off, up to
	// the last instant checked.
	every := c.every
	if every == 0 {
		every = 6 * time.Hour
	}
	traffic := func(upTo time.Time) {
		for ts := w.Add(every).Add(time.Duration(off) * time.Millisecond); ts.Before(upTo); ts = ts.Add(every) {
			if ts.Before(clk.Now()) {
				continue
			}
			clk.SetTime(ts)
			// With busy, enough calls to finish a sweep of the default
			// size (25 chunks of 16,384 cells a generation).
			calls := 1
			if c.busy {
				calls = 32
			}
			for i := range calls {
				l.AllowN(ts, fmt.Sprint("other", i), 1)
			}
		}
	}
	var bad []string
	traffic(retry.Add(-time.Millisecond))
	clk.SetTime(retry.Add(-time.Millisecond))
	if p := d.PeekN(clk.Now(), "k", c.n); p.Allowed {
		bad = append(bad, fmt.Sprintf("PeekN(w+RetryAfter-1ms, k, %d) admitted (RetryAfter %v)", c.n, dec.RetryAfter))
	}
	clk.SetTime(retry)
	deniedAtRetry := false
	if p := d.PeekN(retry, "k", c.n); !p.Allowed {
		deniedAtRetry = true
		bad = append(bad, fmt.Sprintf("PeekN(w+RetryAfter, k, %d) denied: RetryAfter %v given at w, re-asked at w+RetryAfter it says %v more (debt %v tokens left)",
			c.n, dec.RetryAfter, p.RetryAfter, float64(p.Burst)-d.TokensAt(retry, "k")))
	}
	traffic(reset)
	clk.SetTime(reset)
	if tok := d.TokensAt(reset, "k"); tok != float64(dec.Burst) {
		bad = append(bad, fmt.Sprintf("TokensAt(w+ResetAfter) = %v, want the whole burst %d (ResetAfter %v)", tok, dec.Burst, dec.ResetAfter))
	}
	if deniedAtRetry && !reset.After(retry) {
		// How late: the first ms the request fits.
		late := time.Millisecond
		for ; late < 100*time.Millisecond; late += time.Millisecond {
			clk.SetTime(retry.Add(late))
			if d.PeekN(clk.Now(), "k", c.n).Allowed {
				break
			}
		}
		bad = append(bad, fmt.Sprintf("first admitted %v after w+RetryAfter", late))
	}
	return bad
}

// a32Cases are inexact count-min limiters (Exact false) whose units are a
// short fraction's beyond 2^24 (internal/units: drain > 1 unit per ms),
// with debts that last longer than the sweep's 2^29 ms (6.2 days).
func a32Cases() []a32Case {
	mk := func(r limit.Limit, burst int, opts ...limit.Option) func(*limittest.FakeClock) (*limit.Limiter, a32Decider) {
		return func(clk *limittest.FakeClock) (*limit.Limiter, a32Decider) {
			l, err := limit.New(r, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(32)}, opts...)...)
			if err != nil {
				panic(err)
			}
			return l, l
		}
	}
	allow := func(n int) func(*limit.Limiter, a32Decider, time.Time) error {
		return func(_ *limit.Limiter, d a32Decider, w time.Time) error {
			if !d.AllowN(w, "k", n) {
				return fmt.Errorf("a burst of %d from an empty key denied", n)
			}
			return nil
		}
	}
	threePer64s, err := limit.ParseLimit("3/64s")
	if err != nil {
		panic(err)
	}
	return []a32Case{
		{
			// limit.New(3/2^20 per second, 2): Auto puts it on the
			// count-min (MaxDebt drains in 16 days); unit 2^23 x 125, drain 3.
			// The default size: a few offsets only (its sweeps are slow
			// under -race).
			name: "3/2^20,burst2,Auto", build: mk(3.0/(1<<20), 2), fill: allow(2), n: 2, w: 5 * a32Day,
			offs: []int64{0, 6, 22}, busy: true,
		},
		{
			name: "3/2^20,burst2,CountMinSmall", build: mk(3.0/(1<<20), 2, limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)),
			fill: allow(2), n: 2, w: 5 * a32Day,
		},
		{
			// A debt of 32 tokens (MaxDebt, 129 days: about 20
			// sweeps) by a reservation: each sweep keeps up to 2 units
			// (2/3 ms) of its rounding, and they add up.
			name: "3/2^20,burst16,129days", build: mk(3.0/(1<<20), 16, limit.WithSize(4, 1024)),
			fill: func(l *limit.Limiter, d a32Decider, w time.Time) error {
				if !d.AllowN(w, "k", 16) {
					return fmt.Errorf("burst denied")
				}
				if r := l.ReserveN(w, "k", 16); !r.OK() {
					return fmt.Errorf("reservation refused")
				}
				return nil
			},
			n: 16, w: 5 * a32Day,
		},
		{
			// An idle limiter: one call of other keys 20 days after w,
			// past floor + 2^31 ms, re-bases every cell at once
			// (horizon.go's urgent path). 3/2^20, burst 4, debt 8
			// tokens (32 days) by a reservation.
			name: "3/2^20,burst4,idle20days", build: mk(3.0/(1<<20), 4, limit.WithSize(4, 1024)),
			fill: func(l *limit.Limiter, d a32Decider, w time.Time) error {
				if !d.AllowN(w, "k", 4) {
					return fmt.Errorf("burst denied")
				}
				if r := l.ReserveN(w, "k", 4); !r.OK() {
					return fmt.Errorf("reservation refused")
				}
				return nil
			},
			n: 4, w: 13 * a32Day, every: 20*a32Day + 90*time.Millisecond,
		},
		{
			// A Tier at half New's rate (an exact ratio: a token costs
			// 2 of New's): limit.New(3/2^20, 2, WithMaxDebt(6)), Tier
			// (3/2^21, 3), its burst of 3 taken at w (24 days of drain).
			name: "3/2^20,Tier3/2^21burst3",
			build: func(clk *limittest.FakeClock) (*limit.Limiter, a32Decider) {
				l, err := limit.New(3.0/(1<<20), 2, limit.WithClock(clk), limit.WithSeed(32), limit.WithMaxDebt(6), limit.WithSize(4, 1024))
				if err != nil {
					panic(err)
				}
				tr, err := l.Tier("half", 3.0/(1<<21), 3)
				if err != nil {
					panic(err)
				}
				return l, tr
			},
			fill: allow(3), n: 3, w: 5 * a32Day,
		},
		{
			// "3/64s" (ParseLimit), burst 20000, RejectCost 19999
			// (MaxDebt 40000: 9.9 days): unit 64000, drain 3. A debt
			// of 39999 tokens is a multiple of 3 units: every boundary
			// falls on a whole ms, so any rounding the sweep keeps is a
			// ms late.
			name: "3/64s,burst20000,reject", build: mk(threePer64s, 20000, limit.WithRejectCost(19999), limit.WithSize(4, 1024)),
			fill: allow(20000), n: 20000, w: 5 * a32Day,
		},
		{
			// "3/64s", burst 20000, the debt queued by ReserveN (MaxDebt
			// 40000, the default 2 x burst), n = burst: RetryAfter ==
			// ResetAfter.
			name: "3/64s,burst20000,reserve", build: mk(threePer64s, 20000, limit.WithSize(4, 1024)),
			fill: func(l *limit.Limiter, d a32Decider, w time.Time) error {
				if !d.AllowN(w, "k", 20000) {
					return fmt.Errorf("burst denied")
				}
				if r := l.ReserveN(w, "k", 19999); !r.OK() {
					return fmt.Errorf("reservation refused")
				}
				return nil
			},
			n: 20000, w: 5 * a32Day,
		},
	}
}

// TestAudit32FixedRetryAfterEarlyAcrossSweep: on the count-min with
// units beyond 2^24 of a short fraction whose drain is more than one unit
// per ms (limit.New(3/2^20, 2); "3/h" with burst 255 and a RejectCost or a
// reservation), a RetryAfter given before the horizon sweep is 1 ms early
// after it: the retry at t+RetryAfter is denied. The package documentation
// ("Exactness") promises for the inexact case: "Either way ... RetryAfter
// predicts the limiter's own next decision to the millisecond: a retry at
// t+RetryAfter is admitted and one 1 ms earlier is not"; Decision.RetryAfter:
// "a retry at t+RetryAfter is admitted and one 1 ms earlier is not";
// Decision.ResetAfter: "the time until the key's debt drains to zero".
func TestAudit32FixedRetryAfterEarlyAcrossSweep(t *testing.T) {
	testsize.Serial(t)
	for _, c := range a32Cases() {
		t.Run(c.name, func(t *testing.T) {
			offs := c.offs
			if offs == nil {
				for off := range int64(a32Offset) {
					offs = append(offs, off)
				}
			}
			fails := 0
			var first []string
			var firstOff int64
			for _, off := range offs {
				if bad := a32Run(c, off); len(bad) > 0 {
					if fails == 0 {
						first, firstOff = bad, off
					}
					fails++
				}
			}
			if fails > 0 {
				t.Errorf("%d of %d sweep instants break the promise (first, traffic at ms offset %d): %v\n"+
					"want: a retry at t+RetryAfter is admitted and one 1 ms earlier is not (limit/doc.go \"Exactness\", Decision.RetryAfter), "+
					"and the debt drained to zero at t+ResetAfter (Decision.ResetAfter)", fails, len(offs), firstOff, first)
			}
		})
	}
}

// TestAudit32FixedRetryAfterEarlyAcrossSweepMinimal is the smallest
// reproduction: limit.New(3/2^20 per second, 2) on a count-min of 4 x
// 1024 cells; a key takes its burst at w (5 days after New), is denied
// a second burst with RetryAfter 194h10m50.667s (the exact bucket's); one
// call on another key at New + 2^30 ms + 6 ms (the horizon sweep's due
// time) re-stamps the key's cells; at w+RetryAfter the key is still
// denied, 1 ms more. limit/doc.go ("Exactness"): "Either way ...
// RetryAfter predicts the limiter's own next decision to the
// millisecond: a retry at t+RetryAfter is admitted and one 1 ms earlier
// is not".
func TestAudit32FixedRetryAfterEarlyAcrossSweepMinimal(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(a32Start)
	l, err := limit.New(3.0/(1<<20), 2, limit.WithClock(clk), limit.WithSize(4, 1024), limit.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	w := time.UnixMilli(a32Start).Add(5 * a32Day)
	clk.SetTime(w)
	if !l.AllowN(w, "k", 2) {
		t.Fatal("a burst from an empty key denied")
	}
	d := l.DecideN(w, "k", 2)
	if d.Allowed {
		t.Fatal("a second burst admitted at once")
	}
	sweep := time.UnixMilli(a32Start + a32SweepDue + 6)
	clk.SetTime(sweep)
	l.AllowN(sweep, "other", 1)
	retry := w.Add(d.RetryAfter)
	clk.SetTime(retry)
	if p := l.PeekN(retry, "k", 2); !p.Allowed {
		t.Errorf("RetryAfter %v at w; at w+RetryAfter (after a horizon sweep at w+%v) PeekN is denied with RetryAfter %v; "+
			"want admitted (limit/doc.go: \"a retry at t+RetryAfter is admitted and one 1 ms earlier is not\")",
			d.RetryAfter, sweep.Sub(w), p.RetryAfter)
	}
}
