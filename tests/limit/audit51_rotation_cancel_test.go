package limit_test

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit51CountMinCancelAcrossRotation: a count-min reservation
// cancelled after a rotation (G = 2, 3, 4; the reservation taken 1 to 5
// ms before the deadline and cancelled after it, or 2 s after) is given
// back exactly, as if never reserved (Reservation.Cancel; the rotator
// refunds every generation still live).
func TestAudit51CountMinCancelAcrossRotation(t *testing.T) {
	for _, gens := range []uint32{2, 3, 4} {
		for _, c := range []struct {
			at, cancel int64 // ms from the first deadline
		}{{-1, -1}, {-3, -1}, {-1, 1}, {1, 3}, {-1, 2000}, {-5, 5}} {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithGenerations(gens), limit.WithSeed(7), limit.WithMaxDebt(80))
			pd := l.Period()
			T := clk.NowMillis()
			clk.Set(T + pd.Milliseconds() + c.at)
			l.AllowN(clk.Now(), "k", 20)
			r := l.ReserveN(clk.Now(), "k", 20)
			rot0 := l.Stats().Rotations
			clk.Set(T + pd.Milliseconds() + c.cancel)
			l.Allow("other")
			rot1 := l.Stats().Rotations
			before := l.Tokens("k")
			r.Cancel()
			after := l.Tokens("k")
			never := 20 - max(20-float64(c.cancel-c.at)/100, 0)
			if math.Abs(after-never) > 1e-9 || (c.at < 0 && c.cancel > 0 && rot1 != rot0+1) {
				t.Errorf("G=%d period %v reserve at %+d cancel at %+d: rotations %d->%d; tokens before cancel %.3f after %.3f, want %.3f (never reserved)", gens, pd, c.at, c.cancel, rot0, rot1, before, after, never)
			}
		}
	}
}
