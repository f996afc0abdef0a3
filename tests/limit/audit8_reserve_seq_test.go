package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit8ReserveSequentialStaleFuture: serially, with t the clock's
// reading, a stale one (before the high-water mark: counts as it) or a
// future one (counts as the clock's reading), each reservation's time to
// act is exactly the rational token bucket's at the time the limiter
// decided at (10/s, burst 5), on every engine configuration of the
// exact tests plus collisions-free rotation with 3 generations.
func TestAudit8ReserveSequentialStaleFuture(t *testing.T) {
	cases := append(reserveExactCases(),
		reserveExactCase{"count-min-rot3-cu", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithGenerations(3), limit.WithPeriod(20 * time.Second), limit.WithConservativeUpdate(true)}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 36)
			o := append([]limit.Option{limit.WithSeed(9), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
			l, err := limit.New(10, 5, o...)
			if err != nil {
				t.Fatal(err)
			}
			debt := time.Duration(0)
			last := clk.Now()
			hw := last
			gaps := []int{0, 0, 7, 0, 13, 250, 0, 1, 999, 0, 0, 3000, 0, 40, 0, 39990, 0, 5, 40001, 0, 0, 0, 0, 0, 120000, 0, 1, 0, 17, 0, 0}
			offs := []int{0, -300, 5000, 0, -1, 2, -40000, 0, -7, 100, 0, -250, 0, 1, -2, 0, -999, 3, 0, -1, -1, 0, 20, -5, 0, 0, -120000, 9, 0, -17, 0}
			for i, g := range gaps {
				clk.Advance(time.Duration(g) * time.Millisecond)
				now := clk.Now()
				tt := now.Add(time.Duration(offs[i]) * time.Millisecond)
				te := tt
				if te.After(now) {
					te = now
				}
				if te.Before(hw) {
					te = hw
				}
				hw = te
				debt = max(0, debt-te.Sub(last)) + 100*time.Millisecond
				last = te
				r := l.ReserveN(tt, "s", 1)
				if !r.OK() {
					t.Fatalf("#%d refused", i)
				}
				act := te.Add(max(0, debt-500*time.Millisecond))
				want := max(0, act.Sub(tt))
				if got := r.DelayFrom(tt); got != want {
					t.Fatalf("#%d (gap %d ms, t %+d ms): delay from t %v, want %v", i, g, offs[i], got, want)
				}
			}
		})
	}
}
