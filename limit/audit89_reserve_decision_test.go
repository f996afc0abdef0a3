package limit_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

type a89rsDecCfg struct {
	name  string
	lim   limit.Limit
	burst int
	alts  []limit.Limit // exact SetLimit targets
	opts  []limit.Option
}

func a89rsDecCfgs() []a89rsDecCfg {
	return []a89rsDecCfg{
		{"10/s-buckets-rc0.5", 10, 20, []limit.Limit{5, 20, 10}, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithRejectCost(0.5)}},
		{"10/s-countmin", 10, 20, []limit.Limit{5, 20, 10}, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"every3s-countmin-rc1", limit.Every(3 * time.Second), 4, []limit.Limit{limit.Every(6 * time.Second), 1, limit.Every(3 * time.Second)},
			[]limit.Option{limit.WithEngine(limit.CountMin), limit.WithMaxDebt(8), limit.WithRejectCost(1)}},
		{"every1500us-buckets", 2000.0 / 3, 50, []limit.Limit{1000.0 / 3, 2000, 2000.0 / 3}, []limit.Option{limit.WithEngine(limit.Buckets)}},
	}
}

// TestAudit89DecisionPredictions: the Decision's fields (decision.go) for
// a key alone in its cells on an exact limiter, read by what they
// predict rather than by an oracle's numbers, on both engines, with
// SetLimit and SetBurst in between and the clock stepping back:
//   - Allowed: RetryAfter 0; Never iff n > burst, and then RetryAfter is
//     InfDuration;
//   - RetryAfter: "a retry at t+RetryAfter is admitted and one 1 ms
//     earlier is not" (a RejectCost included, "if nothing else happened
//     to the key": read with PeekN);
//   - NextAfter: "the time until Remaining grows by one": Remaining+1
//     tokens fit at t+NextAfter and not 1 ms earlier; "0 when the bucket
//     is full (Remaining == Burst)"; on a denial at most RetryAfter;
//   - ResetAfter: "the time until the key's debt, as this decision
//     leaves it, drains to zero": a full burst fits at t+ResetAfter and
//     not 1 ms earlier; at least NextAfter;
//   - SetLimit and SetBurst: "after SetLimit it still drains what it owes
//     in the same time (ResetAfter)" (doc.go, "Tiers and changing the
//     limit"), SetBurst keeps the debt (Remaining moves with the burst).
//
// Durations are "measured from the request's t" (decision.go), "with
// the lag to the time the limiter decided at included" (doc.go, "Keys
// and time"): after a clock step back, and for a stale t (up to 200 ms
// behind the clock), the predictions hold from t.
func TestAudit89DecisionPredictions(t *testing.T) {
	for _, cfg := range a89rsDecCfgs() {
		t.Run(cfg.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 4; seed++ {
				a89rsPredict(t, cfg, seed)
			}
		})
	}
}

// a89rsUnchanged checks a refused SetLimit or SetBurst: a *MaxDebtError,
// and "nothing changes then" (tier.go).
func a89rsUnchanged(t *testing.T, l *limit.Limiter, err error, before, after limit.Decision) {
	t.Helper()
	var me *limit.MaxDebtError
	if !errors.As(err, &me) {
		t.Fatalf("refused with %v, want a *MaxDebtError", err)
	}
	if after != before || l.Limit() != before.Limit || l.Burst() != before.Burst {
		t.Fatalf("a refused change (%v) changed the policy or the key: %+v -> %+v", err, before, after)
	}
}

func a89rsPredict(t *testing.T, cfg a89rsDecCfg, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 890))
	clk := limittest.NewFakeClock()
	clk.Set(70_000_000)
	l, err := limit.New(cfg.lim, cfg.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, cfg.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Exact() {
		t.Fatalf("New(%v, %d) is not Exact", cfg.lim, cfg.burst)
	}
	const key = "k"
	// the current debt's fields: a Never peek reads them without a request
	state := func() limit.Decision { return l.PeekN(clk.Now(), key, l.Burst()+1) }
	var base int64 // the decision's t, in ms
	fits := func(at time.Duration, n int) bool {
		clk.Set(base + at.Milliseconds())
		return l.PeekN(clk.Now(), key, n).Allowed
	}
	var log []string
	for step := 0; step < 150; step++ {
		switch x := rng.IntN(10); {
		case x == 0:
			clk.Advance(-time.Duration(1+rng.IntN(300)) * time.Millisecond)
		case x < 3:
		default:
			clk.Advance(time.Duration(rng.IntN(int(1000*float64(cfg.burst)/float64(l.Limit()))/3+1)) * time.Millisecond)
		}
		if rng.IntN(8) == 0 {
			before := state()
			var what string
			if rng.IntN(2) == 0 {
				to := cfg.alts[rng.IntN(len(cfg.alts))]
				if err := l.SetLimit(to); err != nil {
					a89rsUnchanged(t, l, err, before, state())
					continue // the burst does not fit MaxDebt at this rate
				}
				what = fmt.Sprintf("SetLimit(%v)", to)
			} else {
				to := max(1, cfg.burst/2+rng.IntN(cfg.burst))
				if err := l.SetBurst(to); err != nil {
					a89rsUnchanged(t, l, err, before, state())
					continue // beyond MaxDebt at this rate
				}
				what = fmt.Sprintf("SetBurst(%d)", to)
			}
			log = append(log, what)
			if !l.Exact() {
				t.Fatalf("%s: not Exact", what)
			}
			if after := state(); after.ResetAfter != before.ResetAfter {
				t.Fatalf("seed %d: %s moved the key's ResetAfter %v -> %v\n%q", seed, what, before.ResetAfter, after.ResetAfter, log)
			}
		}
		b := l.Burst()
		n := 1 + rng.IntN(b+1)
		if rng.IntN(3) == 0 {
			n = 1
		}
		// a stale t now and then: durations are measured from it
		base = clk.NowMillis() - int64(max(0, rng.IntN(600)-400))
		d := l.DecideN(time.UnixMilli(base), key, n)
		log = append(log, fmt.Sprintf("%d (clock %d): DecideN(%d) %+v", base, clk.NowMillis(), n, d))
		if len(log) > 12 {
			log = log[1:]
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d on %v: "+format+"\n%q", append([]any{seed, l.Engine()}, append(args, log)...)...)
		}
		switch {
		case d.Never != (n > b):
			fail("Never %v for n %d, burst %d", d.Never, n, b)
		case d.Never && (d.Allowed || d.RetryAfter != limit.InfDuration):
			fail("Never with Allowed %v RetryAfter %v", d.Allowed, d.RetryAfter)
		case d.Allowed && d.RetryAfter != 0:
			fail("admitted with RetryAfter %v", d.RetryAfter)
		case d.Remaining < 0 || d.Remaining > b:
			fail("Remaining %d outside [0, %d]", d.Remaining, b)
		case (d.NextAfter == 0) != (d.Remaining == b):
			fail("NextAfter %v with Remaining %d of %d", d.NextAfter, d.Remaining, b)
		case !d.Allowed && !d.Never && d.NextAfter > d.RetryAfter:
			fail("denied with NextAfter %v > RetryAfter %v", d.NextAfter, d.RetryAfter)
		case d.ResetAfter < d.NextAfter:
			fail("ResetAfter %v < NextAfter %v", d.ResetAfter, d.NextAfter)
		}
		// Check one prediction (each moves the clock on).
		switch p := rng.IntN(3); {
		case p == 0 && !d.Allowed && !d.Never:
			if fits(d.RetryAfter-time.Millisecond, n) {
				fail("a retry 1 ms before RetryAfter %v is admitted", d.RetryAfter)
			}
			if !fits(d.RetryAfter, n) {
				fail("a retry at RetryAfter %v is denied", d.RetryAfter)
			}
		case p == 1 && d.NextAfter > 0:
			if fits(d.NextAfter-time.Millisecond, d.Remaining+1) {
				fail("Remaining+1 = %d fit 1 ms before NextAfter %v", d.Remaining+1, d.NextAfter)
			}
			if !fits(d.NextAfter, d.Remaining+1) {
				fail("Remaining+1 = %d do not fit at NextAfter %v", d.Remaining+1, d.NextAfter)
			}
		case p == 2 && d.ResetAfter > 0:
			if fits(d.ResetAfter-time.Millisecond, b) {
				fail("a full burst fits 1 ms before ResetAfter %v", d.ResetAfter)
			}
			if !fits(d.ResetAfter, b) {
				fail("a full burst does not fit at ResetAfter %v", d.ResetAfter)
			}
		}
	}
}
