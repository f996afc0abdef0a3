package limit_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a150Engines are the engines the end tests build.
var a150Engines = []limit.Engine{limit.CountMin, limit.Buckets}

// TestAudit150FixedPastAtNearMinInt64Refills (audit 150): a limiter
// built while its fake clock read MinInt64+5 ms takes its burst (20) at
// that reading; the clock then moves 1 s (10 tokens' worth) with no
// operation. AllowN at a t 10 ms before the anchor, a time before one
// already used, must count as the latest time used (MinInt64+5 ms), where
// the bucket is empty. limit/doc.go "Keys and time": "a t before a time
// already used counts as that time". Observed: it admits 10 (the t reads
// as the clock's current reading). Cause: internal/core/clock.go:309,
// convert's near path returns anchorMs + ms unsaturated: MinInt64+5-10
// wraps to MaxInt64-4, which Millis caps at the clock's reading. Fix:
// return addSat(tb.anchorMs, ms).
func TestAudit150FixedPastAtNearMinInt64Refills(t *testing.T) {
	for _, eng := range a150Engines {
		clk := limittest.NewFakeClock()
		clk.Set(math.MinInt64 + 5)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(150))
		if err != nil {
			t.Fatal(err)
		}
		past := clk.Now().Add(-10 * time.Millisecond)
		n := 0
		for n < 100 && l.Allow("k") {
			n++
		}
		if n != 20 {
			t.Fatalf("%v: burst %d, want 20", eng, n)
		}
		clk.Advance(time.Second)
		n = 0
		for n < 100 && l.AllowN(past, "k", 1) {
			n++
		}
		if n != 0 {
			t.Errorf("%v: AllowN(t before the anchor, before a time used) admitted %d after the clock moved 1 s, want 0 (it counts as the latest time used)", eng, n)
		}
	}
}

// TestAudit150PastAtMidRangeHolds: the control of the finding above at a
// clock of 0 ms: the past t counts as the latest time used (0 admitted).
func TestAudit150PastAtMidRangeHolds(t *testing.T) {
	for _, eng := range a150Engines {
		clk := limittest.NewFakeClock()
		clk.Set(0)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(150))
		if err != nil {
			t.Fatal(err)
		}
		past := clk.Now().Add(-10 * time.Millisecond)
		for l.Allow("k") {
		}
		clk.Advance(time.Second)
		if l.AllowN(past, "k", 1) {
			t.Errorf("%v: clock at 0: AllowN(t before a time used) admitted after the clock moved 1 s", eng)
		}
	}
}

// TestAudit150FutureAtNearMaxInt64Holds (audit 150): a limiter whose
// fake clock reads MaxInt64-5 ms at New and after: AllowN at the clock's
// Now + 10 ms (a t in the future, which counts as the reading) first,
// then the short form at the same millisecond. limit/doc.go: "a t after
// the clock's reading counts as that reading"; so together at most the
// burst (20). Cause: internal/core/clock.go:309 convert returns
// anchorMs + ms unsaturated, MinInt64+4 for anchor+10ms (see
// internal/core TestAudit150FixedConvertNearAnchorWraps).
func TestAudit150FutureAtNearMaxInt64Holds(t *testing.T) {
	for _, eng := range a150Engines {
		clk := limittest.NewFakeClock()
		clk.Set(math.MaxInt64 - 5)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(150))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < 100 && l.AllowN(clk.Now().Add(10*time.Millisecond), "k", 1) {
			n++
		}
		for n < 100 && l.Allow("k") {
			n++
		}
		if n > 20 {
			t.Errorf("%v: clock at MaxInt64-5 ms: AllowN(Now+10ms) then Allow admitted %d in one ms, want at most the burst 20", eng, n)
		}
	}
}

// a150BucketsRestored returns a Buckets limit.New(10, 20) on a fake
// clock at base holding the snapshot of one whose clock ran 10 s from 0
// (its key "old" spent 5 tokens at 10 s): the restore's clock is earlier
// than the snapshot's, so no downtime, and the engine's scale resumes at
// 10 s.
func a150BucketsRestored(t *testing.T, base int64) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	ca := limittest.NewFakeClock()
	a, err := limit.New(10, 20, limit.WithClock(ca), limit.WithEngine(limit.Buckets), limit.WithSeed(150))
	if err != nil {
		t.Fatal(err)
	}
	ca.Advance(10 * time.Second)
	if !a.AllowN(ca.Now(), "old", 5) {
		t.Fatal("old: 5 of 20 denied")
	}
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	cb := limittest.NewFakeClock()
	cb.Set(base)
	b, err := limit.New(10, 20, limit.WithClock(cb), limit.WithEngine(limit.Buckets), limit.WithSeed(150))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFrom(&buf); err != nil {
		t.Fatalf("restore at %d ms: %v", base, err)
	}
	return b, cb
}

// a150Refills spends key's burst at the clock's reading, moves the clock
// 1 s and returns how many one-token requests are admitted then (10 at
// 10/s).
func a150Refills(l *limit.Limiter, clk *limittest.FakeClock, key string) (burst, after int) {
	for burst < 100 && l.Allow(key) {
		burst++
	}
	clk.Advance(time.Second)
	for after < 100 && l.Allow(key) {
		after++
	}
	return burst, after
}

// TestAudit150FixedBucketsRestoreNearMinInt64Freezes (audit 150): a
// Buckets limiter's snapshot (its scale at 10 s) restored on a clock at
// MinInt64 + less than 10 s. internal/bucket/snapshot.go:279 sets
// e.epoch = ms - int64(target), which wraps to near MaxInt64; fed71ea's
// new check in rel (internal/bucket/engine.go:203, "the span overflowed
// int64") then reads every later clock as past the 2^47 ms horizon: the
// engine's time is stuck at its end for ever. Before fed71ea the wrapped
// epoch and the wrapped difference cancelled (d was right modulo 2^64;
// checked on a copy with that check removed: this test passes there), so
// fed71ea regressed it. limit/doc.go (Buckets): "It counts time in 47
// bits of milliseconds after New: a clock more than 2^47 ms (4,460 years)
// on counts as that instant, where debts stop draining"; this clock is
// 1 s after the restore. Observed: a fresh key takes its burst of 20, and
// 1 s later (10 tokens' worth) none is admitted, nor ever after. Fix:
// keep the restore's own reading and the scale offset apart (e.g. e.base
// = ms, e.off = target; rel = min(subSat(ms, e.base) + e.off, lwMask),
// with New's off = 0), so that neither the epoch nor the span wraps; a
// saturated epoch (core's subSat) alone would stop the restored lines
// draining for up to 2^47 ms.
func TestAudit150FixedBucketsRestoreNearMinInt64Freezes(t *testing.T) {
	for _, base := range []int64{math.MinInt64, math.MinInt64 + 5, math.MinInt64 + 9_999} {
		b, clk := a150BucketsRestored(t, base)
		burst, after := a150Refills(b, clk, "fresh")
		if burst != 20 || after != 10 {
			t.Errorf("Buckets restored at %d ms (its snapshot's scale at 10 s): a fresh key took %d, then %d 1 s later; want 20, then 10 (10/s)", base, burst, after)
		}
	}
}

// TestAudit150BucketsRestoreAtLowClocksHold: the same restore where
// the clock is at least 10 s above MinInt64 (ms - target does not wrap),
// and at 0 and 15 s (5 s of downtime): the burst, then 10 a second
// later; the restored key holds its 15 tokens plus its refill.
func TestAudit150BucketsRestoreAtLowClocksHold(t *testing.T) {
	for _, base := range []int64{math.MinInt64 + 10_000, math.MinInt64 + 1<<31, -1 << 62, 0, 15_000} {
		b, clk := a150BucketsRestored(t, base)
		if burst, after := a150Refills(b, clk, "fresh"); burst != 20 || after != 10 {
			t.Errorf("Buckets restored at %d ms: a fresh key took %d, then %d 1 s later; want 20, then 10", base, burst, after)
		}
		if tok := b.Tokens("old"); tok < 15 || tok > 20 {
			t.Errorf("Buckets restored at %d ms: old holds %v tokens, want 15 + 1 s of refill", base, tok)
		}
	}
}

// TestAudit150BucketsHorizonEdge: limit/doc.go (Buckets): "a clock more
// than 2^47 ms (4,460 years) on counts as that instant, where debts stop
// draining". A Buckets limiter built at 0 ms whose key spends its burst
// at 2^47 - 1000 ms: at 2^47 - 1 ms it has 999 ms of refill (9 tokens);
// at 2^47, 2^47 + 1 s and MaxInt64 ms nothing more (the scale's last
// millisecond is 2^47 - 1); a count-min limiter on the same clock keeps
// refilling (11 at 2^47 + 1 s, after
// 9 at 2^47 - 1 ms).
func TestAudit150BucketsHorizonEdge(t *testing.T) {
	const horizon = int64(1) << 47
	clk := limittest.NewFakeClock()
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithSeed(150))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithSeed(150))
	if err != nil {
		t.Fatal(err)
	}
	drain := func(l *limit.Limiter) int {
		n := 0
		for n < 100 && l.Allow("k") {
			n++
		}
		return n
	}
	clk.Set(horizon - 1000)
	if n, m := drain(l), drain(cm); n != 20 || m != 20 {
		t.Fatalf("at 2^47 - 1000 ms: %d and %d admitted, want the burst 20", n, m)
	}
	clk.Set(horizon - 1)
	if n := drain(l); n != 9 {
		t.Errorf("Buckets at 2^47 - 1 ms: %d admitted, want 9 (999 ms of 10/s)", n)
	}
	for _, ms := range []int64{horizon, horizon + 1000, math.MaxInt64} {
		clk.Set(ms)
		if n := drain(l); n != 0 {
			t.Errorf("Buckets at %d ms: %d admitted, want 0 (its time stops at 2^47 - 1 ms)", ms, n)
		}
	}
	clk.Set(horizon - 1)
	drain(cm)
	clk.Set(horizon + 1000)
	if n := drain(cm); n != 11 {
		t.Errorf("count-min at 2^47 + 1 s: %d admitted, want 11 (0.99 left at 2^47 - 1 ms, 1001 ms of 10/s)", n)
	}
}
