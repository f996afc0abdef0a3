package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"golang.org/x/time/rate"
)

// TestAudit45XRateCancelAfterReadsAndDenials: Reservation.Cancel gives
// the reservation back exactly when no other request has written the
// key's cells since. Reads (TokensAt, Peek) and denied AllowN (RejectCost
// 0) write nothing, so after them Cancel is x/time/rate's CancelAt of the
// last reservation (all tokens back), at every cancel time before and
// after the act time... x/time/rate gives nothing back after its act time
// (documented deviation), so that part is compared with "as if never
// taken" instead.
func TestAudit45XRateCancelAfterReadsAndDenials(t *testing.T) {
	for _, cancelAt := range []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 250 * time.Millisecond, time.Second} {
		a45Each(t, func(t *testing.T, eng limit.Engine) {
			t.Run(fmt.Sprint(cancelAt), func(t *testing.T) {
				e := a45New(t, 10, 3, eng, limit.WithMaxDebt(8))
				x := rate.NewLimiter(10, 3) // the key without the cancelled reservation
				t0 := e.clk.Now()
				e.l.AllowN(t0, "k", 1)
				x.AllowN(t0, 1)
				r := e.l.ReserveN(t0, "k", 3) // debt 4, acts at +100ms
				if !r.OK() || r.DelayFrom(t0) != 100*time.Millisecond {
					t.Fatalf("reserve: %v %v", r.OK(), r.DelayFrom(t0))
				}
				e.clk.Advance(cancelAt / 2)
				now := e.clk.Now()
				_ = e.l.TokensAt(now, "k")
				_ = e.l.PeekN(now, "k", 1)
				if e.l.TokensAt(now, "k") < 3 && e.l.AllowN(now, "k", 3) {
					t.Fatalf("AllowN(3) admitted with debt")
				}
				e.clk.Advance(cancelAt - cancelAt/2)
				now = e.clk.Now()
				r.Cancel()
				if got, want := e.l.TokensAt(now, "k"), x.TokensAt(now); abs45(got-want) > 1e-9 {
					t.Errorf("cancel at +%v after reads and a denial: tokens %v, want %v (as if never taken)", cancelAt, got, want)
				}
			})
		})
	}
}
