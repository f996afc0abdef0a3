package limit_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit90ExactCancelAfterRejectDebit: a reservation cancelled after a
// denial of the same key charged its RejectCost on top of it, on an
// exact limiter (RejectCost 0.5, on the grid). Reservation.Cancel
// (reserve.go): a cell written since "within the same millisecond, below
// MaxDebt" gets the reservation back on the count-min, so the key reads
// as the rational bucket that saw the burst and the denial only (the
// denial's RejectCost kept); on Buckets a cell written since "keeps the
// debit, on the safe side": the key reads as the bucket with the
// reservation too. Either way never below the bucket without the
// reservation. Also with the denial 1 ms later (the count-min keeps the
// debit then too).
func TestAudit90ExactCancelAfterRejectDebit(t *testing.T) {
	pol := a66Pol{10, 1, 20}
	half := big.NewRat(1, 2)
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		for _, gap := range []time.Duration{0, time.Millisecond} {
			t.Run(fmt.Sprint(eng, gap), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(8_000_000)
				l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(5), limit.WithEngine(eng),
					limit.WithMaxDebt(40), limit.WithRejectCost(0.5))
				if !l.Exact() {
					t.Fatal("not Exact")
				}
				without := &a66Oracle{d: new(big.Rat), at: clk.NowMillis(), max: big.NewRat(4000, 1)}
				if !l.AllowN(l.Now(), "k", 20) {
					t.Fatal("burst not admitted")
				}
				a90Decide(without, pol, 20, half, true, -1)
				with := without.clone()
				r := l.ReserveN(l.Now(), "k", 5)
				if ok, d := with.reserve(pol, 5); r.OK() != ok || r.Delay() != d {
					t.Fatalf("ReserveN(5): OK %v Delay %v, want %v %v", r.OK(), r.Delay(), ok, d)
				}
				clk.Advance(gap)
				without.advance(clk.NowMillis())
				with.advance(clk.NowMillis())
				got := l.DecideN(l.Now(), "k", 1)
				want, _ := a90Decide(with, pol, 1, half, true, -1)
				a90Decide(without, pol, 1, half, true, 0)
				got.Policy = ""
				if got != want {
					t.Fatalf("denial after the reservation:\n got %+v\nwant %+v", got, want)
				}
				r.Cancel()
				after := l.PeekN(l.Now(), "k", 1)
				after.Policy = ""
				wWithout, _ := a90Decide(without, pol, 1, half, false, -1)
				wWith, _ := a90Decide(with, pol, 1, half, false, -1)
				want = wWith
				if eng == limit.CountMin && gap == 0 {
					want = wWithout
				}
				if after != want {
					t.Errorf("after Cancel:\n got %+v\nwant %+v\n(bucket without the reservation %+v)", after, want, wWithout)
				}
			})
		}
	}
}
