package limit_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit51BucketsCancelAcrossResidueWraps: on the Buckets engine
// (10/s: 15 ticks a ms, the 16-bit residue wraps every 4369.07 ms) a
// reservation cancelled after an idle jump of whole and near-whole
// numbers of wraps (and of 65,536 ms, 15 wraps), with only another key's
// request in between, leaves the key reading as if never reserved, its
// earlier debt drained since included (Reservation.Cancel).
func TestAudit51BucketsCancelAcrossResidueWraps(t *testing.T) {
	bad := 0
	for _, base := range []int64{0, 13, 65536, 4369} {
		for j := int64(-3); j <= 3; j++ {
			for _, m := range []int64{1, 2, 3, 15, 30, 1000} {
				for _, first := range []int{0, 5, 20} {
					jump := base*m + j
					if jump < 0 {
						continue
					}
					clk := limittest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithSeed(uint64(m+j)), limit.WithMaxDebt(40))
					if first > 0 {
						l.AllowN(clk.Now(), "k", first)
					}
					r := l.ReserveN(clk.Now(), "k", 15)
					clk.Advance(time.Duration(jump) * time.Millisecond)
					l.Peek("other")
					r.Cancel()
					want := 20 - math.Max(float64(first)-float64(jump)/100, 0)
					if got := l.Tokens("k"); math.Abs(got-want) > 1e-9 {
						bad++
						if bad < 10 {
							t.Errorf("first %d jump %d: tokens %.4f want %.4f", first, jump, got, want)
						}
					}
				}
			}
		}
	}
	t.Logf("bad %d", bad)
}
