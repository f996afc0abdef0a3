package redis

import (
	"context"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit17TinyLinearRateHang: a Linear law whose drain of a score takes
// more than 2^53 ms (a tiny rate): every Query and TryUpdate computes the
// reset wait by stepping a float64 ms count down (settle: r = r - 1), and
// r - 1 == r above 2^53, so the function never returns and the server is
// blocked (BUSY for every other client). Timed out before the fix
// (pre-existing: the stepping was there before e95cc53); a regression
// test now.
func TestAudit17FixedTinyLinearRateHang(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := e.sketch(t, Config{Name: "a17hang", Levels: 2, CellsPerLevel: 64, Decay: decay.Linear(1e-12),
		Lo: 0, Hi: 1e6, Aggregator: sketch.Min, Clock: clk})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.Update(ctx, "k", 1e4); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if q, err := s.Query(ctx, "k"); err != nil || q != 1e4 {
		t.Fatalf("Query = %v, %v; want 10000 (a drain of 1e19 ms: the reset wait's step never ends)", q, err)
	}
}

// TestAudit17FixedWaitOverflow: Burst/Rate is bounded (9e9 s) so that a
// wait fits a time.Duration, but the lag of a clock that stepped back is
// added on top: a limiter of the longest drain whose clock steps back
// from 2026 to 1970 (a clock reset to the Unix epoch) answers waits of
// 285 + 56 years, past time.Duration's 292, which wrap to negative
// durations. Failed before the fix (audit17); a regression test now.
func TestAudit17FixedWaitOverflow(t *testing.T) {
	for _, dc := range []uint32{0, 1024} {
		e := newEnv(t, "rueidis", "standalone")
		clk := sketchtest.NewFakeClock()
		clk.Set(1_767_225_600_000) // 2026-01-01
		l := e.limiter(t, LimiterConfig{Name: "a17ovf", Limit: PerSecond(1e-6, 9000), Clock: clk, DenyCacheCells: dc})
		ctx := context.Background()
		// 9e9 s, and up to rebaseLate later: the server's waits are never
		// early across the rebases that may come while they run.
		if d, err := l.AllowN(ctx, "k", 9000); err != nil || !d.Allowed || d.ResetAfter < 9e9*time.Second || d.ResetAfter > 9e9*time.Second+rebaseLate(9e9*time.Second) {
			t.Fatalf("AllowN(9000) = %+v, %v; want admitted, ResetAfter 9e9 s (at most rebaseLate later)", d, err)
		}
		clk.Set(1)               // the clock resets to the epoch
		for i := 0; i < 2; i++ { // the server's answer, then the deny cache's
			d, err := l.AllowN(ctx, "k", 9000)
			if err != nil || d.Allowed || d.RetryAfter <= 0 || d.ResetAfter <= 0 {
				t.Errorf("DenyCacheCells %d: AllowN(9000) after the clock stepped back 56 years = %+v, %v; want denied with positive waits (RetryAfter %v, ResetAfter %v)",
					dc, d, err, d.RetryAfter, d.ResetAfter)
			}
		}
	}
}
