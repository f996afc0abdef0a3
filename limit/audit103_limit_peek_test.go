package limit_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit103LimitFixedPeekNDisagreesWithDecideNOnRoundedCells (fixed at stop 60, the text below
// says what was wrong; audit 103):
// on a count-min whose cells round a key's debt (units past 2^24, or a
// debt far finer than a token: the tiny debt of 3094000's repro), PeekN
// of an admitted request reports the Remaining, ResetAfter and
// NextAfter of a debt DecideN does not leave.
//
// Doc says (limit/decision.go, PeekN): "PeekN is DecideN without any
// write: it says what DecideN would answer at t (Remaining and
// ResetAfter as if the request were admitted, when it would be)";
// doc.go: decisions on such rates are "late by the float32 rounding of
// the key's stored debt: each write while the key is in debt ... rounds
// it up".
//
// Code does: judge's !commit branch adds the cost in float64, debt +=
// nU, while DecideN's take stores RoundUp(debt + nU) in a float32 cell
// and reads that back. Every(24h) with burst 30 (count-min, a unit of
// 86,400,000 per token, float32 steps of 128 units = 128 ms at 21
// tokens): 20 tokens taken, 100 ms later PeekN(1) says ResetAfter
// 503h59m59.9s and NextAfter 23h59m59.9s, DecideN(1) at the same t
// 504h and 24h: PeekN's are 100 ms early against the decision it
// predicts. New(math.Pi, 10) after one token of a 1e22/s Tier: PeekN(1)
// says Remaining 9, NextAfter 319 ms; DecideN(1) says Remaining 8,
// NextAfter 1 ms.
//
// Repro: l := New(Every(24h), 30); l.AllowN(t0, "k", 20); at t0+100ms
// compare l.PeekN(t, "k", 1) with DecideN(t, "k", 1) on a copy.
//
// Suggested fix: in judge's !commit branch, form the debt as the engine
// would store it: debt = stored(debt + nU), with stored rounding up to
// the float32 cell (atom.RoundUp) and clamping at MaxDebt as held does,
// on the count-min (the Buckets engine's ticks are exact).
func TestAudit103LimitFixedPeekNDisagreesWithDecideNOnRoundedCells(t *testing.T) {
	type setup func(t *testing.T) (*limit.Limiter, time.Time)
	cases := map[string]setup{
		"Every(24h) x 30, 20 taken, 100 ms later": func(t *testing.T) (*limit.Limiter, time.Time) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 30)
			l := limit.MustNew(limit.Every(24*time.Hour), 30, limit.WithClock(clk), limit.WithCapacity(16, 0.01))
			if !l.AllowN(clk.Now(), "k", 20) {
				t.Fatal("setup: denied")
			}
			clk.Advance(100 * time.Millisecond)
			return l, clk.Now()
		},
		"New(pi, 10) after a 1e22/s Tier's token": func(t *testing.T) (*limit.Limiter, time.Time) {
			clk := limittest.NewFakeClock()
			clk.Set(1 << 30)
			l := limit.MustNew(math.Pi, 10, limit.WithClock(clk), limit.WithCapacity(16, 0.01))
			fast, err := l.Tier("fast", 1e22, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !fast.AllowN(clk.Now(), "k", 1) {
				t.Fatal("setup: denied")
			}
			return l, clk.Now()
		},
	}
	for name, mk := range cases {
		l, now := mk(t)
		p := l.PeekN(now, "k", 1)
		l2, now2 := mk(t)
		d := l2.DecideN(now2, "k", 1)
		if p != d {
			t.Errorf("%s (engine %v, Exact %v): PeekN says %+v, DecideN answers %+v", name, l.Engine(), l.Exact(), p, d)
		}
	}
}
