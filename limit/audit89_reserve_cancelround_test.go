package limit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit89ReserveCancelRoundsUpDebt (a finding, now documented on
// Cancel and in the package doc's rounding list, and asserted as
// documented: never early against the twin, never above the debt before
// the pairs): Reservation.Cancel
// (limit/reserve.go:51-54) promises "a cell of the key that no other
// request has written since the reservation gets its previous value back
// (the key reads as if the reservation had never been taken, the part
// drained since included)", and WaitN (reserve.go:210-214) cancels by
// that rule when its context ends. On a count-min limiter whose key's
// debt, drained to the reservation's millisecond, is not a float32 (an
// inexact rate with a large debt in units), the engine's receipt holds
// that previous value "decayed to that word's stamp (rounded up)"
// (internal/core/tryupdate.go, Receipt.restore), and Cancel writes it
// back: each Reserve+Cancel pair rounds the key's debt up by up to one
// float32 step, and the steps add up. The package doc lists such
// rounding for admissions and RejectCosts ("Exactness", doc.go:102-106),
// not for a cancelled reservation, which must leave no trace
// (docs/design.md:294-296 calls the CAS back "Exact for every law").
//
// Every(24h) with burst 30 (the doc's own example; a step is 256 ms of a
// 30-day debt): a key at its burst that reserves one token and cancels it
// every 7 ms, 1000 times, has not drained at all after those 7 s
// (RetryAfter 24h0m0s), where the twin limiter that never reserved reads
// 23h59m53s; Every(time.Minute) at burst 4096: 1m0.032s against
// 53.032s. The same through WaitN with contexts cancelled during the wait.
func TestAudit89ReserveCancelRoundsUpDebt(t *testing.T) {
	cases := []struct {
		lim   limit.Limit
		burst int
		wait  bool
	}{
		{limit.Every(24 * time.Hour), 30, false},
		{limit.Every(time.Minute), 4096, false},
		{limit.Every(24 * time.Hour), 30, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%d/wait=%v", c.lim, c.burst, c.wait), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(50_000_000)
			opts := []limit.Option{limit.WithClock(clk), limit.WithSeed(1)}
			a := limit.MustNew(c.lim, c.burst, opts...)
			b := limit.MustNew(c.lim, c.burst, opts...)
			if a.Engine() != limit.CountMin || a.Exact() {
				t.Fatalf("%v: engine %v, Exact %v; want an inexact count-min", c.lim, a.Engine(), a.Exact())
			}
			for _, l := range []*limit.Limiter{a, b} {
				if !l.AllowN(clk.Now(), "k", c.burst) {
					t.Fatal("the burst was not admitted from an empty key")
				}
			}
			before := a.Peek("k")
			rounds := 1000
			if c.wait {
				rounds = 200
			}
			for range rounds {
				clk.Advance(7 * time.Millisecond)
				_ = b.Tokens("k") // the twin's time moves as a's
				if !c.wait {
					r := a.Reserve("k")
					if !r.OK() {
						t.Fatal("Reserve(1) above the burst, within MaxDebt, not OK")
					}
					r.Cancel()
					continue
				}
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error, 1)
				go func() { errc <- a.Wait(ctx, "k") }()
				clk.BlockUntilTimers(1)
				cancel()
				if err := <-errc; !errors.Is(err, context.Canceled) {
					t.Fatalf("Wait cancelled during the wait: %v, want context.Canceled", err)
				}
			}
			ga, gb := a.Peek("k"), b.Peek("k")
			if ga.RetryAfter < gb.RetryAfter || ga.Remaining > gb.Remaining {
				t.Errorf("after %d Reserve+Cancel pairs 7 ms apart (wait=%v), the key reads\n %+v\nearlier than the twin that never reserved\n %+v",
					rounds, c.wait, ga, gb)
			}
			if ga.RetryAfter > before.RetryAfter || ga.ResetAfter > before.ResetAfter {
				t.Errorf("after %d Reserve+Cancel pairs 7 ms apart (wait=%v), the key reads\n %+v\nlater than before them\n %+v",
					rounds, c.wait, ga, before)
			}
		})
	}
}
