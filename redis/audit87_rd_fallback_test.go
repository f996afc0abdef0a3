package redis

// Audit 87: DecideContext answered by the LocalFallback (the server
// down), against package limit's Decision for the equivalent local limit
// (Rate/N, Burst/N) and against the fallback's own later state.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// a87rdDecideFB is DecideContext on a limiter whose server is down: the
// error must match ErrDegraded.
func a87rdDecideFB(t *testing.T, l *Limiter, key string, n int) limit.Decision {
	t.Helper()
	d, err := l.DecideContext(context.Background(), key, n)
	if !errors.Is(err, ErrDegraded) {
		t.Fatalf("DecideContext(%q, %d) with the server down: err %v; want ErrDegraded", key, n, err)
	}
	return d
}

// a87rdPeekFB is the fallback's Remaining for key (a peek: AllowN of 0
// only reads, limiter.go).
func a87rdPeekFB(t *testing.T, l *Limiter, key string) float64 {
	t.Helper()
	d, err := l.AllowN(context.Background(), key, 0)
	if !errors.Is(err, ErrDegraded) || !d.Allowed {
		t.Fatalf("peek of %q with the server down: %+v, %v", key, d, err)
	}
	return d.Remaining
}

// TestAudit87RdFallbackDecideParity: policy.go, LocalFallback "decides
// with a local lock-free limiter at Rate/N and Burst/N"; decide.go,
// DecideContext answers "the shape of package limit's limiters";
// limiter.go, Decision.RetryAfter: "never early", "The LocalFallback's
// waits are otherwise exact". For limits whose share Rate/N, Burst/N
// package limit holds exactly (10/s x 20 over 2, 4, 5 and 10 instances,
// 3/s x 9 over 3, 100/s x 300 over 3, Every(7ms) x 14 over 2), a seeded
// sequence of DecideContext(k, n) (n from 1 to Burst/N, retries at
// RetryAfter and 1 ms before, n above Burst: Never) goes to the Redis
// limiter with its server killed, to package limit's limiter
// (WithMaxDebt(Burst/N), named as the Redis limiter) and to a rational
// token bucket at Rate/N, Burst/N that follows the fallback's own
// admissions. Asserted, the safe side: the fallback never admits what the
// bucket denies, none of its RetryAfter, ResetAfter (nor NextAfter,
// where both report the same Remaining) is below the bucket's, and its
// Remaining is never above the bucket's. Measured and
// logged (audit 87's report): how often and by how much the fallback is
// later than the bucket, and the first decision where it differs from
// package limit (from there on the two keys hold different debts).
func TestAudit87RdFallbackDecideParity(t *testing.T) {
	type tc struct {
		lim Limit
		N   uint32
	}
	cases := []tc{
		{PerSecond(10, 20), 2}, {PerSecond(10, 20), 4}, {PerSecond(10, 20), 5}, {PerSecond(10, 20), 10},
		{PerSecond(3, 9), 3}, {PerSecond(100, 300), 3}, {PerSecond(1000.0/7, 14), 2},
	}
	e := newEnv(t, "rueidis", "standalone")
	rigs := make([]fallbackRig, len(cases))
	for i, c := range cases {
		rigs[i] = newFallbackRig(t, e, fmt.Sprintf("a87rdpar%d", i), c.lim, c.N, nil)
	}
	e.srv.kill()
	const steps = 300
	for i, r := range rigs {
		fbR, fbB := r.lim.Rate/float64(r.N), r.lim.Burst/float64(r.N)
		fb := PerSecond(fbR, fbB)
		name := fmt.Sprintf("a87rdpar%d", i)
		ll := limit.MustNew(limit.Limit(fbR), int(fbB), limit.WithClock(r.clk), limit.WithMaxDebt(fbB), limit.WithName(name))
		b := audit86NewBucket(fb, r.clk.NowMillis())
		rng := rand.New(rand.NewPCG(87, uint64(i)))
		drainMs := fbB / fbR * 1000
		var lastRetry time.Duration
		early, lateDeny, lateWaits, maxLate := 0, 0, 0, time.Duration(0)
		samePL := true // package limit still holds the same debt
		plSteps, plDiffs := 0, 0
		for step := range steps {
			switch k := rng.IntN(6); {
			case k == 0 && lastRetry > 0:
				r.clk.Advance(lastRetry - time.Duration(rng.IntN(2))*time.Millisecond) // at RetryAfter, or 1 ms before
			case k <= 2:
				r.clk.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
			default:
				r.clk.Advance(time.Duration(rng.Float64()*drainMs/4) * time.Millisecond)
			}
			n := 1
			switch rng.IntN(5) {
			case 0:
				n = 1 + rng.IntN(int(fbB))
			case 1:
				n = int(fbB)
			case 2:
				if rng.IntN(4) == 0 {
					n = int(r.lim.Burst) + 1 // above the limiter's Burst: Never on both
				}
			}
			now := r.clk.NowMillis()
			got := a87rdDecideFB(t, r.l, "k", n)
			if samePL {
				want := ll.DecideN(r.clk.Now(), "k", n)
				if got != want {
					plDiffs++
					if plDiffs == 1 {
						t.Logf("%v over %d: first difference from package limit at step %d (+%d ms), n=%d:\n redis fallback %+v\n package limit  %+v",
							r.lim, r.N, step, now-1_000_000, n, got, want)
					}
				}
				if got.Allowed != want.Allowed {
					samePL = false
					t.Logf("%v over %d: package limit decides otherwise at step %d (+%d ms), n=%d (compared no further):\n redis fallback %+v\n package limit  %+v",
						r.lim, r.N, step, now-1_000_000, n, got, want)
				} else {
					plSteps++
				}
			}
			lastRetry = 0
			if !got.Allowed && !got.Never {
				lastRetry = got.RetryAfter
			}
			// The rational bucket, following the fallback's admissions.
			b.drain(now)
			nr := big.NewRat(int64(n), 1)
			after := new(big.Rat).Add(b.debt, nr)
			fits := nr.Cmp(b.burst) <= 0 && after.Cmp(b.burst) <= 0
			var wantRetry int64
			switch {
			case got.Allowed && !fits:
				early++
				t.Errorf("%v over %d, step %d (+%d ms), n=%d: the fallback admitted what Rate/N, Burst/N denies (debt %v): %+v",
					r.lim, r.N, step, now-1_000_000, n, b.debt.FloatString(6), got)
			case got.Allowed:
				b.debt = after
			case fits:
				lateDeny++
			case nr.Cmp(b.burst) <= 0:
				wantRetry = audit86CeilMs(new(big.Rat).Sub(after, b.burst), b.rate)
			}
			rem := new(big.Rat).Sub(b.burst, b.debt)
			wantRem := new(big.Int).Quo(rem.Num(), rem.Denom()).Int64()
			wantReset := time.Duration(audit86CeilMs(b.debt, b.rate)) * time.Millisecond
			var wantNext time.Duration
			if rem.Cmp(b.burst) < 0 {
				next := new(big.Rat).SetInt64(min(wantRem+1, int64(fbB)))
				wantNext = time.Duration(audit86CeilMs(next.Sub(next, rem), b.rate)) * time.Millisecond
				if wantRetry > 0 {
					wantNext = min(wantNext, time.Duration(wantRetry)*time.Millisecond)
				}
			}
			type w struct {
				what      string
				got, want time.Duration
			}
			ws := []w{{"ResetAfter", got.ResetAfter, wantReset}}
			if int64(got.Remaining) == wantRem {
				// NextAfter counts from the Remaining it reports: a lower
				// Remaining (a debt rounded up past a whole token) has its
				// next token sooner, and is the safe side already.
				ws = append(ws, w{"NextAfter", got.NextAfter, wantNext})
			}
			if wantRetry > 0 && !got.Allowed {
				ws = append(ws, w{"RetryAfter", got.RetryAfter, time.Duration(wantRetry) * time.Millisecond})
			}
			late := false
			for _, x := range ws {
				if x.got < x.want {
					early++
					t.Errorf("%v over %d, step %d (+%d ms), n=%d: %s %v, below Rate/N, Burst/N's %v (debt %v): %+v",
						r.lim, r.N, step, now-1_000_000, n, x.what, x.got, x.want, b.debt.FloatString(6), got)
				} else if x.got > x.want {
					late = true
					maxLate = max(maxLate, x.got-x.want)
				}
			}
			if int64(got.Remaining) > wantRem {
				early++
				t.Errorf("%v over %d, step %d, n=%d: Remaining %d, above Rate/N, Burst/N's %d", r.lim, r.N, step, n, got.Remaining, wantRem)
			}
			if late {
				lateWaits++
			}
		}
		t.Logf("%v over %d (fallback %v/s x %v): %d early; of %d decisions %d with a wait later than the bucket's (by up to %v), %d denials the bucket admits; package limit: %d of %d compared decisions differ",
			r.lim, r.N, fbR, fbB, early, steps, lateWaits, maxLate, lateDeny, plDiffs, plSteps)
	}
}

// TestAudit87RdFallbackNextAfterEdges: decide.go, DecideContext:
// "NextAfter is the time until Remaining grows by one (or the bucket is
// full), rounded up to the millisecond" (and at most RetryAfter on a
// denial). On the LocalFallback (server killed), at limits that count
// tokens, some whose drain a float64 does not hold, and at exact ones,
// over 1 to 7 instances: after every DecideContext whose NextAfter is
// above 0, a peek at +NextAfter finds Remaining grown to floor(r)+1 (or
// the bucket full), and, unless NextAfter was cut to RetryAfter, a peek
// 1 ms before it does not (the least whole ms: "rounded up", not
// later; only logged: for the fallback the docs promise never early).
// A peek only reads, so the key's state is the decision's.
func TestAudit87RdFallbackNextAfterEdges(t *testing.T) {
	type tc struct {
		lim Limit
		N   uint32
	}
	cases := []tc{
		{PerSecond(1000.0/13, 300), 3}, {PerSecond(math.Pi, 100), 1}, {PerSecond(7.0/3, 50), 7},
		{PerSecond(10, 100.0/3), 3}, {PerSecond(0.3, 1001), 1}, {PerSecond(1000*math.E, 1e4+0.1), 3},
		{PerSecond(10, 20), 2}, {PerSecond(1000.0/7, 14), 2},
	}
	e := newEnv(t, "rueidis", "standalone")
	rigs := make([]fallbackRig, len(cases))
	for i, c := range cases {
		rigs[i] = newFallbackRig(t, e, fmt.Sprintf("a87rdnext%d", i), c.lim, c.N, nil)
	}
	e.srv.kill()
	early, late, checks := 0, 0, 0
	for i, r := range rigs {
		fbR, fbB := r.lim.Rate/float64(r.N), r.lim.Burst/float64(r.N)
		if r.l.fbSlack != 0 {
			t.Fatalf("%v over %d: sweep slack %v; the test needs none", r.lim, r.N, r.l.fbSlack)
		}
		rng := rand.New(rand.NewPCG(870, uint64(i)))
		drainMs := fbB / fbR * 1000
		for step := range 80 {
			if rng.IntN(3) == 0 {
				r.clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
			} else {
				r.clk.Advance(time.Duration(rng.Float64()*drainMs/float64(2+rng.IntN(20))) * time.Millisecond)
			}
			n := 1
			if rng.IntN(3) == 0 {
				n = max(1, int(math.Floor(rng.Float64()*fbB)))
			}
			now := r.clk.NowMillis()
			d := a87rdDecideFB(t, r.l, "k", n)
			if d.NextAfter <= 0 || d.NextAfter == limit.InfDuration {
				continue
			}
			rf := a87rdPeekFB(t, r.l, "k")
			target := math.Min(math.Floor(rf)+1, fbB)
			na := d.NextAfter.Milliseconds()
			cut := d.RetryAfter > 0 && d.NextAfter == d.RetryAfter
			checks++
			// 1 ms before first: the clock never steps back (a step back
			// would leave the fallback at its high-water mark).
			if na >= 1 && !cut {
				r.clk.Set(now + na - 1)
				if got := a87rdPeekFB(t, r.l, "k"); got >= target {
					late++
					if late <= 5 {
						t.Logf("%v over %d, step %d, n=%d: Remaining %v (%d whole), NextAfter %v; 1 ms before it Remaining is already %v >= %v (late)",
							r.lim, r.N, step, n, rf, d.Remaining, d.NextAfter, got, target)
					}
				}
			}
			r.clk.Set(now + na)
			if got := a87rdPeekFB(t, r.l, "k"); got < target {
				early++
				if early <= 5 {
					t.Errorf("%v over %d, step %d, n=%d: Remaining %v (%d whole), NextAfter %v; at +NextAfter Remaining %v, below %v (early)",
						r.lim, r.N, step, n, rf, d.Remaining, d.NextAfter, got, target)
				}
			}
		}
	}
	if early > 0 {
		t.Errorf("NextAfter: %d early, of %d checked", early, checks)
	}
	// Late is the documented side for the fallback (its NextAfter is the
	// closed form from the float64 Remaining: docs/migrating.md, audit
	// 86's row, "the LocalFallback's ... as before (never early)"): logged.
	t.Logf("NextAfter: %d early, %d late by a ms, of %d checked", early, late, checks)
	if checks < 300 {
		t.Errorf("only %d NextAfter checks; want at least 300", checks)
	}
}
