package limit_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit66WaitDeadlineBoundary: WaitN "returns ... a *WaitError before
// waiting (... a wait past the context's deadline ...) having debited
// nothing" (reserve.go), as x/time/rate's WaitN, which refuses only a
// delay strictly above the time left. On rates that are not exact in
// float64 (1/3/s, 0.3/s, 7/13 per ms), after spending the burst, a WaitN
// whose exact wait (rational bucket) ends exactly at the deadline must
// wait and succeed, and one whose deadline is 1 ms earlier must fail
// with ErrPastDeadline and take nothing.
func TestAudit66WaitDeadlineBoundary(t *testing.T) {
	cases := []struct {
		num, den int64
		burst    int
		n        int
		opts     []limit.Option
	}{
		{1, 3, 3, 1, nil},
		{1, 3, 3, 2, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{3, 10, 4, 3, nil},
		{3, 10, 40, 7, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{7000, 13, 50, 13, nil},
		{7000, 13, 50, 1, []limit.Option{limit.WithEngine(limit.CountMin)}},
	}
	for _, c := range cases {
		for _, early := range []bool{false, true} {
			clk := limittest.NewFakeClock()
			base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			clk.SetTime(base)
			l, err := limit.New(limit.Limit(float64(c.num)/float64(c.den)), c.burst,
				append([]limit.Option{limit.WithClock(clk), limit.WithSeed(3)}, c.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !l.Exact() {
				t.Fatalf("%d/%d not exact", c.num, c.den)
			}
			if !l.AllowN(l.Now(), "k", c.burst) {
				t.Fatal("burst not admitted")
			}
			// exact wait: debt burst tokens drained adv ms; need debt <= burst-n
			cost := big.NewRat(1000*c.den, c.num) // ms per token
			d := new(big.Rat).Mul(cost, big.NewRat(int64(c.n), 1))
			adv := int64(7)
			if d.Cmp(big.NewRat(8, 1)) < 0 {
				adv = 1
			}
			clk.Advance(time.Duration(adv) * time.Millisecond) // partial drain
			d.Sub(d, big.NewRat(adv, 1))
			wait := a66ms(a66Ceil(d))
			dl := l.Now().Add(wait)
			if early {
				dl = dl.Add(-time.Millisecond)
			}
			ctx, cancel := context.WithDeadline(context.Background(), dl)
			done := make(chan error, 1)
			before := l.TokensAt(l.Now(), "k")
			go func() { done <- l.WaitN(ctx, "k", c.n) }()
			if early {
				err := <-done
				cancel()
				if !errors.Is(err, limit.ErrPastDeadline) {
					t.Errorf("%d/%d n=%d: WaitN with deadline 1 ms before the exact wait %v = %v, want ErrPastDeadline", c.num, c.den, c.n, wait, err)
				}
				if after := l.TokensAt(l.Now(), "k"); after != before {
					t.Errorf("%d/%d: refused WaitN debited: tokens %v -> %v", c.num, c.den, before, after)
				}
				continue
			}
			// wait for the timer, then move the clock to 1 ms short of it,
			// then to it.
			var err2 error
			got := false
			for !got {
				select {
				case err2 = <-done:
					got = true
				default:
					if clk.Timers() > 0 {
						if wait > time.Millisecond {
							clk.Advance(wait - time.Millisecond)
							select {
							case err2 = <-done:
								t.Errorf("%d/%d n=%d: WaitN returned %v 1 ms before the exact wait %v", c.num, c.den, c.n, err2, wait)
								got = true
								continue
							case <-time.After(20 * time.Millisecond):
							}
							clk.Advance(time.Millisecond)
						} else {
							clk.Advance(wait)
						}
						err2 = <-done
						got = true
					} else {
						time.Sleep(time.Millisecond)
					}
				}
			}
			cancel()
			if err2 != nil {
				t.Errorf("%d/%d n=%d: WaitN with deadline at the exact wait %v = %v, want nil", c.num, c.den, c.n, wait, err2)
			}
		}
	}
}
