package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit90ExactReserveFullBurstHeldMaxDebt pins the reported oddity:
// on a count-min whose MaxDebt = burst is no float32 in units (audit 67's
// rates, bursts above 65,536), AllowN(burst) on an empty key is admitted
// at once ("a full burst is admitted at once from an empty key",
// doc.go), while ReserveN(burst) on an identical empty key is OK with a
// Delay above 0 (40 ms at 0.944/s): the take leaves the key at MaxDebt,
// which the limiter reads as the float32 above it, "and its durations may
// be late by up to that step's drain, less than 2^-23 of MaxDebt's"
// (doc.go, "Exactness", the one exception). So Reserve and Allow answer
// differently for the same state and request; both leave the same state
// (the twins read alike afterwards), and the Delay stays within that
// bound. Neither limiter is Exact.
func TestAudit90ExactReserveFullBurstHeldMaxDebt(t *testing.T) {
	for _, c := range []struct {
		r limit.Limit
		b int
	}{{0.9444444444444444, 958687}, {3.4977583072838137, 535500}} {
		t.Run(fmt.Sprint(c.r), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_000_000)
			opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(float64(c.b)), limit.WithSize(2, 64)}
			a, b := limit.MustNew(c.r, c.b, opts...), limit.MustNew(c.r, c.b, opts...)
			if a.Engine() != limit.CountMin || a.Exact() {
				t.Fatalf("engine %v, Exact %v: want an inexact count-min", a.Engine(), a.Exact())
			}
			now := clk.Now()
			if !a.AllowN(now, "k", c.b) {
				t.Fatal("AllowN(burst) on an empty key not admitted")
			}
			r := b.ReserveN(now, "k", c.b)
			bound := time.Duration(float64(c.b) / float64(c.r) * float64(time.Second) / (1 << 23))
			if !r.OK() || r.DelayFrom(now) > bound {
				t.Fatalf("ReserveN(burst) on an empty key: OK %v Delay %v, want OK within %v", r.OK(), r.DelayFrom(now), bound)
			}
			if pa, pb := a.PeekN(now, "k", 1), b.PeekN(now, "k", 1); pa != pb {
				t.Fatalf("AllowN(burst) and ReserveN(burst) left different states:\n %+v\n %+v", pa, pb)
			}
			t.Logf("AllowN(burst) admitted at once; ReserveN(burst) Delay %v (bound %v)", r.DelayFrom(now), bound)
		})
	}
}
