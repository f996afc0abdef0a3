package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit61FixedNextAfterEarlyAtCap: DecideContext (decide.go):
// "NextAfter is the time until Remaining grows by one (or the bucket is
// full), rounded up to the millisecond". For a limit counting tokens
// whose Burst a float32 does not hold, a key taken to its full Burst
// has its cells at Burst rounded up to float32, read back capped at
// Burst: Remaining 0, and toDecision computes NextAfter = 1 token / Rate
// from it, without the cap's float32 step of drain that 66c5cb9 added to
// the deny cache's and the LocalFallback's waits (capExcess). At now +
// NextAfter a peek (n = 0, writes nothing) finds Remaining still below 1,
// and DecideContext(1) there is denied:
//   - PerSecond(0.3, 30000001), the server: NextAfter 3.334s, at it
//     Remaining 0.0002, DecideContext(1) denied with RetryAfter 3.333s;
//   - PerSecond(1000/999, 1e9+1), the server: NextAfter 999ms, at it
//     Remaining 0, RetryAfter ~63 s;
//   - PerSecond(10, 100) over Instances 3, the LocalFallback (Burst/N
//     100/3): the full Burst/N taken, DecideContext(1) denied with
//     NextAfter 300ms while its own RetryAfter says 301ms; at 300 ms
//     Remaining 0.999997 and DecideContext(1) denied (RetryAfter 1ms).
//
// Control: PerSecond(0.3, 30000002) (a float32): at NextAfter Remaining
// is 1.0002. Cause: decide.go toDecision, "next := min(math.Floor(r)+1,
// b) - r; ms := math.Ceil(...)" uses d.Remaining (capped) with no
// capExcess when r == 0 (the debt at the cap).
func TestAudit61FixedNextAfterEarlyAtCap(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, lim := range []Limit{PerSecond(0.3, 30000001), PerSecond(1000.0/999, 1e9+1)} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a61nc%d", i), Limit: lim, Clock: clk, Timeout: 5 * time.Second})
		d, err := l.DecideContext(ctx, "k", int(lim.Burst))
		if err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("setup: %+v %v", d, err)
		}
		clk.Advance(d.NextAfter)
		p, err := l.AllowN(ctx, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		d2, _ := l.DecideContext(ctx, "k", 1)
		if p.Remaining < 1 {
			t.Errorf("%v, the server: the full Burst taken, Remaining 0, NextAfter %v; at it Remaining %v < 1 and DecideContext(1) is %+v; want Remaining grown by one at NextAfter (decide.go: \"NextAfter is the time until Remaining grows by one (or the bucket is full), rounded up to the millisecond\")",
				lim, d.NextAfter, p.Remaining, d2)
		}
	}
	// The LocalFallback: PerSecond(10, 100) over 3 instances.
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	lim := PerSecond(10, 100)
	l := e.limiter(t, LimiterConfig{Name: "a61ncfb", Limit: lim, Clock: clk, Policy: LocalFallback, Instances: 3, ServerCheck: CheckSkip, Timeout: time.Second})
	e.srv.kill()
	fbB := divDown(lim.Burst, 3) // the fallback's, rounded down (audit 149)
	if d, err := l.AllowN(ctx, "k", fbB); !d.Allowed || !errors.Is(err, ErrDegraded) {
		t.Fatalf("setup: %+v %v", d, err)
	}
	d, _ := l.DecideContext(ctx, "k", 1)
	if d.Allowed || d.Remaining != 0 {
		t.Fatalf("setup: %+v", d)
	}
	clk.Advance(d.NextAfter)
	p, _ := l.AllowN(ctx, "k", 0)
	if p.Remaining < 1 {
		d2, _ := l.DecideContext(ctx, "k", 1)
		t.Errorf("%v over 3 instances, the LocalFallback: the full Burst/N taken, DecideContext(1) denied with Remaining 0, NextAfter %v (RetryAfter %v); at NextAfter Remaining %v < 1 and DecideContext(1) is %+v; want Remaining grown by one (decide.go: \"NextAfter is the time until Remaining grows by one\")",
			lim, d.NextAfter, d.RetryAfter, p.Remaining, d2)
	}
}

// TestAudit61NextAfterAtCapFloat32Burst is the control: a Burst a
// float32 holds (0.3/s x 30000002): at NextAfter Remaining has grown by
// one.
func TestAudit61NextAfterAtCapFloat32Burst(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	lim := PerSecond(0.3, 30000002)
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	l := e.limiter(t, LimiterConfig{Name: "a61ncc", Limit: lim, Clock: clk, Timeout: 5 * time.Second})
	d, err := l.DecideContext(ctx, "k", int(lim.Burst))
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("setup: %+v %v", d, err)
	}
	clk.Advance(d.NextAfter)
	if p, err := l.AllowN(ctx, "k", 0); err != nil || p.Remaining < 1 || math.IsNaN(p.Remaining) {
		t.Errorf("%v: NextAfter %v; at it %+v, %v", lim, d.NextAfter, p, err)
	}
}
