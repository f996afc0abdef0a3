package redis

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit61NextAfterNotEarly: DecideContext (decide.go): "NextAfter is
// the time until Remaining grows by one (or the bucket is full), rounded
// up to the millisecond". Now that the quotient is snapped within 4 ulps
// of a whole ms before rounding up, check it is never early: for rates
// 1000/k per second (k = 3..60) and 3/s, 7/s, with Bursts counting tokens
// (7.3) and exact units (7), a key with 1 (and 2.5) tokens taken; at
// now + NextAfter a peek (n = 0, writes nothing) finds Remaining grown by
// one (or the key full).
func TestAudit61NextAfterNotEarly(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	rates := []float64{3, 7, 1000.0 / 7 * 3, math.Pi}
	for k := 3; k <= 60; k++ {
		rates = append(rates, 1000.0/float64(k))
	}
	bad, late, checked := 0, 0, 0
	for i, rate := range rates {
		for j, burst := range []float64{7.3, 7} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			l := e.limiter(t, LimiterConfig{Name: fmt.Sprintf("a61na%d_%d", i, j), Limit: PerSecond(rate, burst), Clock: clk, Timeout: 5 * time.Second})
			for ki, take := range []int{1, 2, 3} {
				key := fmt.Sprintf("k%d", ki)
				d, err := l.DecideContext(ctx, key, take)
				if err != nil || !d.Allowed {
					t.Fatalf("setup: %+v %v", d, err)
				}
				p0, _ := l.AllowN(ctx, key, 0)
				r := p0.Remaining
				want := math.Min(math.Floor(r)+1, burst)
				clk.Advance(d.NextAfter - time.Millisecond)
				pb, err := l.AllowN(ctx, key, 0)
				if err != nil {
					t.Fatal(err)
				}
				if pb.Remaining >= want {
					late++
					if late <= 10 {
						t.Errorf("late: PerSecond(%v, %v) (exact units %v): %d taken, Remaining %v, NextAfter %v; 1 ms before it Remaining is already %v >= %v",
							rate, burst, l.exactU, take, r, d.NextAfter, pb.Remaining, want)
					}
				}
				clk.Advance(time.Millisecond)
				p, err := l.AllowN(ctx, key, 0)
				if err != nil {
					t.Fatal(err)
				}
				checked++
				if p.Remaining < want {
					bad++
					if bad <= 10 {
						t.Errorf("PerSecond(%v, %v) (exact units %v): %d taken, Remaining %v, NextAfter %v; at it Remaining is %v < %v (decide.go: \"NextAfter is the time until Remaining grows by one ... rounded up to the millisecond\")",
							rate, burst, l.exactU, take, r, d.NextAfter, p.Remaining, want)
					}
				}
			}
		}
	}
	t.Logf("checked %d, early %d, late %d", checked, bad, late)
}
