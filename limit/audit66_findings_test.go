package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66FixedBucketsSpanShortFraction (fixed in the docs, stop 47:
// doc.go's "Engines" now says the span is 61.4 s divided by the ticks a
// millisecond takes, with New(0.3, 5) and New(7.3, 20) as examples).
// The audit found doc.go saying the Buckets engine holds a limiter where
// "MaxDebt/limit <= 61.4 s for a rate that is a short fraction", and
// "Auto ... picks Buckets wherever it is exact and CountMin elsewhere
// (slow rates whose MaxDebt takes longer than 61.4 s to drain ...)". For
// a short fraction whose token is not a whole number of milliseconds,
// the ticks must be finer than a millisecond (a token of 0.3/s is
// 10000/3 ms: 3 ticks a ms), so the real bound is 61,438 ticks, 61.4 s
// divided by those ticks per ms (20.48 s at 0.3/s, 0.84 s at 7.3/s).
// Each case below is refused by Buckets past that bound and taken within
// it.
func TestAudit66FixedBucketsSpanShortFraction(t *testing.T) {
	cases := []struct {
		r       limit.Limit
		frac    string
		ticks   float64 // ticks a millisecond takes
		b       int
		maxDebt float64 // drains past 61,438 ticks
	}{
		{0.3, "3/10", 3, 5, 10},    // MaxDebt drains in 33.3 s, bound 20.48 s
		{1.5, "3/2", 3, 40, 80},    // 53.3 s, 20.48 s
		{0.7, "7/10", 7, 20, 40},   // 57.1 s, 8.78 s
		{7.3, "73/10", 73, 20, 40}, // 5.5 s, 0.84 s (docs/capacity.md: count-min)
	}
	for _, c := range cases {
		bound := 61.438 / c.ticks // s
		if c.maxDebt/float64(c.r) <= bound {
			t.Fatalf("test bug: %v", c)
		}
		if _, err := limit.New(c.r, c.b, limit.WithMaxDebt(c.maxDebt), limit.WithEngine(limit.Buckets)); err == nil {
			t.Errorf("New(%v (= %s), %d, WithMaxDebt(%v)): MaxDebt drains in %.1f s, past %.2f s; WithEngine(Buckets) took it", float64(c.r), c.frac, c.b, c.maxDebt, c.maxDebt/float64(c.r), bound)
		}
		// within the bound: MaxDebt of the whole tokens that drain in it
		md := math.Floor(bound * float64(c.r))
		if md < 1 {
			continue
		}
		auto, err := limit.New(c.r, 1, limit.WithMaxDebt(md))
		if err != nil || auto.Engine() != limit.Buckets {
			t.Errorf("New(%v (= %s), 1, WithMaxDebt(%v)): MaxDebt drains in %.2f s, within %.2f s; want Buckets (doc.go), got %v (err %v)", float64(c.r), c.frac, md, md/float64(c.r), bound, auto.Engine(), err)
		}
	}
}

// TestAudit66FixedEarlyAtMaxDebtCap (fixed in stop 47: limit reads a
// count-min debt at MaxDebt as the float32 cell holds it, engine.go
// held): Decision (decision.go):
// "RetryAfter ... a retry at t+RetryAfter is admitted and one 1 ms
// earlier is not"; "ResetAfter is the time until the key's debt drains to
// zero"; doc.go, "Exactness": for an inexact limiter "decisions are never
// earlier than the exact bucket's ... and RetryAfter predicts the
// limiter's own next decision to the millisecond: a retry at
// t+RetryAfter is admitted". On the count-min, when a key's debt reaches
// MaxDebt and MaxDebt in units is not a float32 (a rate that is not a
// short fraction with a burst near a million, WithMaxDebt(burst)), the
// cell stores MaxDebt rounded up to float32 while every read is capped at
// MaxDebt (internal/core/sketch.go, hiOver/hiCap): RetryAfter and
// ResetAfter are computed from the capped read and come out early by the
// rounding; the retry at t+RetryAfter is denied and the bucket is not
// full at t+ResetAfter.
func TestAudit66FixedEarlyAtMaxDebtCap(t *testing.T) {
	cases := []struct {
		r limit.Limit
		b int
	}{
		{0.9444444444444444, 958687},
		{3.4977583072838137, 535500},
		{0.0005581315387422752, 1040836},
	}
	for _, c := range cases {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		// Auto: these run on the count-min.
		l, err := limit.New(c.r, c.b, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(float64(c.b)))
		if err != nil {
			t.Fatal(err)
		}
		t0 := l.Now()
		if !l.AllowN(t0, "k", c.b) {
			t.Fatalf("full burst from an empty key denied")
		}
		d := l.DecideN(t0, "k", 1)
		clk.Set(1_000_000 + d.RetryAfter.Milliseconds())
		retry := l.PeekN(l.Now(), "k", 1)
		clk.Set(1_000_000 + d.ResetAfter.Milliseconds())
		tk := l.TokensAt(l.Now(), "k")
		if !retry.Allowed {
			t.Errorf("New(%v, %d, WithMaxDebt(%d)) on %v, full burst spent at t: Decide says RetryAfter %v, "+
				"but a retry at t+RetryAfter is denied and says wait %v more (want admitted: \"a retry at t+RetryAfter is admitted\")",
				float64(c.r), c.b, c.b, l.Engine(), d.RetryAfter, retry.RetryAfter)
		}
		if tk != float64(c.b) {
			t.Errorf("New(%v, %d, WithMaxDebt(%d)): ResetAfter %v, but at t+ResetAfter the key has %v tokens of %d "+
				"(want a full bucket: \"ResetAfter is the time until the key's debt drains to zero\")",
				float64(c.r), c.b, c.b, d.ResetAfter, tk, c.b)
		}
	}
	// The same through RejectCost with the default MaxDebt (2 x burst): the
	// denial's penalty fills the key to MaxDebt.
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	b := 958687
	l, err := limit.New(0.9444444444444444, b, limit.WithClock(clk), limit.WithSeed(1), limit.WithRejectCost(float64(b)))
	if err != nil {
		t.Fatal(err)
	}
	t0 := l.Now()
	l.AllowN(t0, "k", b)
	d := l.DecideN(t0, "k", 1) // denied; RejectCost fills to MaxDebt
	clk.Set(1_000_000 + d.RetryAfter.Milliseconds())
	if p := l.PeekN(l.Now(), "k", 1); !p.Allowed {
		t.Errorf("New(0.9444444444444444, %d, WithRejectCost(%d)) (MaxDebt %v): a denial says RetryAfter %v, "+
			"but the retry at t+RetryAfter is denied and says wait %v more", b, b, l.MaxDebt(), d.RetryAfter, p.RetryAfter)
	}
}
