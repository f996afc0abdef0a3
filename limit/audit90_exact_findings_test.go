package limit_test

import (
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// TestAudit90ExactFixedBucketsClampBelowMaxDebt (fixed: the Buckets
// engine holds only a MaxDebt and a RejectCost of whole ticks; Auto picks
// the count-min otherwise and WithEngine(Buckets) is refused) (a finding): on the
// Buckets engine, a key that a RejectCost drives to the clamp is held
// at MaxDebt rounded down to whole ticks when MaxDebt is not a whole
// number of them, while Exact reports true: a key at MaxDebt reads
// RetryAfter and ResetAfter 1 ms short of the rational bucket's and is
// admitted 1 ms early. New(10, 20, WithMaxDebt(40.0001),
// WithRejectCost(1)) (Auto runs it on Buckets; MaxDebt is 4000.01 ms of
// drain): after the burst and 60 denials the key reads RetryAfter 2.1 s,
// ResetAfter 4 s, and an Allow at t+2.1 s is admitted; the rational
// bucket (debt 4000.01 ms) says 2.101 s and 4.001 s and denies it, as
// the count-min limiter of the same options does. The package doc
// ("Exactness", limit/doc.go:82-86) promises the rational bucket "when
// Exact reports true", WithMaxDebt (limit/limit.go:158-160) holds MaxDebt
// as "the float64 nearest to d x unit, so a decimal d means what it
// says", and "Both engines give the same decisions for a key alone in
// its cells" (doc.go:70-71). The engine's span is
// floor(MaxDebt x ticks) (internal/bucket/law.go:163,171). Same with New(1000, 10, WithMaxDebt(20.0001))
// (11 ms against 12 ms) and Every(7ms) with burst 1 and
// WithMaxDebt(3.00001) (21 ms against 22 ms). Without WithMaxDebt too:
// New(10, 20, WithRejectCost(25.0001)) takes the default MaxDebt, burst +
// RejectCost = 45.0001 (4500.01 ms), and runs on Buckets (Exact false,
// the RejectCost being off the grid); after the burst, its first denial
// reads RetryAfter 2.6 s and ResetAfter 4.5 s and a retry at t+2.6 s is
// admitted, where the bucket's debt of 45.0001 tokens says 2.601 s and
// 4.501 s (the count-min: 2.601 s): earlier than the exact bucket, which
// an inexact limiter never is ("Otherwise decisions are never earlier
// than the exact bucket's", doc.go:96-97).
func TestAudit90ExactFixedBucketsClampBelowMaxDebt(t *testing.T) {
	for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
		t.Run(fmt.Sprint("default-maxdebt-", eng), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(2_000_000)
			l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(3), limit.WithEngine(eng), limit.WithRejectCost(25.0001))
			if !l.AllowN(l.Now(), "k", 20) {
				t.Fatal("the burst was not admitted from an empty key")
			}
			// the bucket: debt 20 + 25.0001 tokens = 4500.01 ms
			const retry, reset = 2601 * time.Millisecond, 4501 * time.Millisecond
			d := l.Decide("k")
			if d.Allowed || d.RetryAfter < retry || d.ResetAfter < reset {
				t.Errorf("%v (Exact %v): the first denial after the burst reads RetryAfter %v, ResetAfter %v; the bucket %v, %v",
					l.Engine(), l.Exact(), d.RetryAfter, d.ResetAfter, retry, reset)
			}
			clk.Advance(retry - time.Millisecond)
			if l.Allow("k") {
				t.Errorf("%v: admitted at t+%v, before the bucket's %v", l.Engine(), retry-time.Millisecond, retry)
			}
		})
	}
	cases := []struct {
		pol a66Pol
		md  float64
		mdR *big.Rat // MaxDebt meant, in tokens
	}{
		{a66Pol{10, 1, 20}, 40.0001, big.NewRat(400001, 10000)},
		{a66Pol{1000, 1, 10}, 20.0001, big.NewRat(200001, 10000)},
		{a66Pol{1000, 7, 1}, 3.00001, big.NewRat(300001, 100000)},
	}
	for _, c := range cases {
		if _, err := limit.New(c.pol.limit(), c.pol.b, limit.WithEngine(limit.Buckets), limit.WithMaxDebt(c.md), limit.WithRejectCost(1)); !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%v, WithMaxDebt(%v) off the tick grid: WithEngine(Buckets) gave %v, want the engine refused", c.pol.limit(), c.md, err)
		}
		for _, eng := range []limit.Engine{limit.Auto, limit.CountMin} {
			t.Run(fmt.Sprintf("%d/%d-b%d-md%v-%v", c.pol.num, c.pol.den, c.pol.b, c.md, eng), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				const t0 = 2_000_000
				clk.Set(t0)
				l, err := limit.New(c.pol.limit(), c.pol.b, limit.WithClock(clk), limit.WithSeed(3), limit.WithEngine(eng),
					limit.WithMaxDebt(c.md), limit.WithRejectCost(1))
				if err != nil {
					t.Fatal(err)
				}
				// Off the count-min's grid too (audit 91): not Exact there
				// either, and then never earlier than the rational bucket.
				exact := l.Exact()
				o := &a66Oracle{d: new(big.Rat), at: t0, max: new(big.Rat).Mul(c.pol.cost(), c.mdR)}
				one := big.NewRat(1, 1)
				now := l.Now()
				if !l.AllowN(now, "k", c.pol.b) {
					t.Fatal("the burst was not admitted from an empty key")
				}
				a90Decide(o, c.pol, c.pol.b, one, true, -1)
				for i := 0; i < 3*int(c.md)+2; i++ {
					got := l.DecideN(now, "k", 1)
					want, _ := a90Decide(o, c.pol, 1, one, true, -1)
					got.Policy = ""
					if exact && got != want || !exact && (got.Allowed && !want.Allowed || got.RetryAfter < want.RetryAfter || got.ResetAfter < want.ResetAfter) {
						t.Fatalf("%v on %v (Exact %v), denial %d (debt %s ms, MaxDebt %s ms):\n got %+v\nwant %+v (the rational bucket's)",
							c.pol.limit(), l.Engine(), exact, i+1, o.d.FloatString(4), o.max.FloatString(4), got, want)
					}
				}
				d := l.PeekN(now, "k", 1)
				clk.Advance(d.RetryAfter - time.Millisecond)
				o.advance(clk.NowMillis())
				if ok := l.Allow("k"); ok {
					t.Fatalf("%v on %v: admitted at t+%v, 1 ms before its own RetryAfter %v", c.pol.limit(), l.Engine(),
						d.RetryAfter-time.Millisecond, d.RetryAfter)
				}
			})
		}
	}
}

// TestAudit90ExactFixedAutoPicksInexactBuckets (fixed as above): Auto runs
// New(1000, 5, WithRejectCost(0.5)) on Buckets, where Exact reports
// false (a token is one tick, so each denial is charged a whole token,
// twice the RejectCost), although the count-min of the same options is
// exact. limit/engine.go:18-19: "Auto (the default) picks Buckets
// wherever it is exact, CountMin otherwise"; doc.go:65-66: "Auto, the
// default, picks Buckets wherever it is exact and CountMin elsewhere";
// engine.go:24, Buckets: "It is exact (Exact) where it holds a limiter";
// doc.go:86-87: "it is chosen only where it is". After the
// burst and two denials in one ms the Auto limiter reads RetryAfter 3 ms
// and ResetAfter 7 ms where the rational bucket (debt 6 tokens) reads
// 2 ms and 6 ms; WithRejectCost's "each denial debits a little more than
// c" (limit.go:147-149) reads as a small rounding, not a doubling. Also Every(7ms) with
// RejectCost 0.5 (3.5 ticks, charged 4). The fix is either in Auto's
// choice or in these docs.
func TestAudit90ExactFixedAutoPicksInexactBuckets(t *testing.T) {
	for _, c := range []struct {
		pol a66Pol
		rc  float64
	}{{a66Pol{1000, 1, 5}, 0.5}, {a66Pol{1000, 7, 4}, 0.5}, {a66Pol{2000, 3, 6}, 0.25}} {
		t.Run(fmt.Sprintf("%d/%d-rc%v", c.pol.num, c.pol.den, c.rc), func(t *testing.T) {
			cm, err := limit.New(c.pol.limit(), c.pol.b, limit.WithEngine(limit.CountMin), limit.WithRejectCost(c.rc), limit.WithSize(1, 64))
			if err != nil {
				t.Fatal(err)
			}
			clk := limittest.NewFakeClock()
			clk.Set(1_000_000)
			l := limit.MustNew(c.pol.limit(), c.pol.b, limit.WithClock(clk), limit.WithRejectCost(c.rc), limit.WithSeed(1))
			o := &a66Oracle{d: new(big.Rat), at: 1_000_000, max: new(big.Rat).Mul(c.pol.cost(), new(big.Rat).SetFloat64(l.MaxDebt()))}
			now := l.Now()
			l.AllowN(now, "k", c.pol.b)
			a90Decide(o, c.pol, c.pol.b, new(big.Rat), true, -1)
			rc := new(big.Rat).SetFloat64(c.rc)
			l.Allow("k")
			l.Allow("k")
			a90Decide(o, c.pol, 1, rc, true, -1)
			a90Decide(o, c.pol, 1, rc, true, -1)
			got, want := l.PeekN(now, "k", 1), o.decide(c.pol, 1, 0, false)
			got.Policy = ""
			if cm.Exact() && (!l.Exact() || got != want) {
				t.Errorf("Auto runs %v, RejectCost %v on %v: Exact %v (the count-min's: %v); after the burst and 2 denials:\n got %+v\nwant %+v (the rational bucket's)",
					c.pol.limit(), c.rc, l.Engine(), l.Exact(), cm.Exact(), got, want)
			}
		})
	}
}

// TestAudit90ExactFixedRejectCostRoundsDown (resolved as the finding
// proposed: WithRejectCost now says a decimal c means what it says, the
// float64 nearest to c x unit, as WithMaxDebt's d; the limiter is then
// exact here and Exact says so) (a finding, minor): the cost is formed
// as the float64 product c x unit, rounded to nearest: New(0.3, 7,
// WithMaxDebt(7), WithEngine(CountMin), WithRejectCost(1e-4)) has a unit
// of 10000 per token, and the float64 1e-4 (1.0000000000000000479e-4)
// times 10000 rounds to 1 unit, below the float's exact value. After two
// tokens and 1 ms, a Never request's denial leaves ResetAfter 6.666 s,
// where the bucket of the float64 c says 6.667 s; it is exactly the
// decimal 1e-4's bucket.
func TestAudit90ExactFixedRejectCostRoundsDown(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	l := limit.MustNew(0.3, 7, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(7),
		limit.WithEngine(limit.CountMin), limit.WithSize(1, 64), limit.WithRejectCost(1e-4))
	if !l.Exact() {
		t.Fatalf("0.3/s, MaxDebt 7, RejectCost 1e-4 (1 unit): Exact false")
	}
	pol := a66Pol{3, 10, 7}
	o := &a66Oracle{d: new(big.Rat), at: 1_000_000, max: new(big.Rat).Mul(pol.cost(), big.NewRat(7, 1))}
	if !l.AllowN(l.Now(), "k", 2) {
		t.Fatal("2 tokens not admitted from an empty key")
	}
	a90Decide(o, pol, 2, new(big.Rat), true, -1)
	clk.Advance(time.Millisecond)
	o.advance(clk.NowMillis())
	got := l.DecideN(l.Now(), "k", 8)
	want, _ := a90Decide(o, pol, 8, big.NewRat(1, 10000), true, -1)
	got.Policy = ""
	if got != want {
		t.Errorf("RejectCost 1e-4 (Exact %v): a denial left\n %+v\nwhere the bucket of the decimal c says\n %+v", l.Exact(), got, want)
	}
}
