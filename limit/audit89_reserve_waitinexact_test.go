package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit89WaitDeadlineMatchesRetryAfter: WaitN refuses "a wait past
// the context's deadline" and no other (docs/readings.md: "exactly at the
// deadline is in time"), and RetryAfter "predicts the limiter's own next
// decision to the millisecond" on any limiter, inexact ones and inexact
// Tiers included (doc.go, "Exactness" and "Exactness of a policy"). So
// on a key in debt, with nothing else happening, a WaitN(n) whose
// deadline is PeekN(n).RetryAfter away waits and succeeds, and one whose
// deadline is 1 ms sooner fails with ErrPastDeadline, having debited
// nothing. Random debts (fixed seeds) on inexact count-mins, an inexact
// Tier on each engine, and exact controls.
func TestAudit89WaitDeadlineMatchesRetryAfter(t *testing.T) {
	type cfg struct {
		name  string
		lim   limit.Limit
		burst int
		tier  limit.Limit // 0: the limiter's own policy
		tb    int
		opts  []limit.Option
	}
	cfgs := []cfg{
		{"pi/countmin", limit.Limit(math.Pi), 20, 0, 0, nil},
		{"0.944/countmin", 0.9444444444444444, 50, 0, 0, nil},
		{"10/s-buckets-tier3", 10, 20, 3, 6, []limit.Option{limit.WithEngine(limit.Buckets)}},
		{"10/s-countmin-tier3", 10, 20, 3, 6, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"pi/countmin-tier-e", limit.Limit(math.Pi), 20, limit.Limit(math.E), 10, []limit.Option{limit.WithMaxDebt(60)}},
		{"third/countmin", 1.0 / 3, 4, 0, 0, []limit.Option{limit.WithEngine(limit.CountMin)}},
		{"10/s-buckets", 10, 20, 0, 0, []limit.Option{limit.WithEngine(limit.Buckets)}},
	}
	type pol interface {
		WaitN(context.Context, string, int) error
		PeekN(time.Time, string, int) limit.Decision
		AllowN(time.Time, string, int) bool
		TokensAt(time.Time, string) float64
		Burst() int
	}
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(89, uint64(len(c.name))))
			for i := 0; i < 40; i++ {
				clk := limittest.NewFakeClock()
				clk.SetTime(time.Now().Add(time.Hour).Truncate(time.Millisecond))
				l, err := limit.New(c.lim, c.burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(i))}, c.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				var p pol = l
				if c.tier != 0 {
					tr, err := l.Tier("t", c.tier, c.tb)
					if err != nil {
						t.Fatal(err)
					}
					p = tr
				}
				b := p.Burst()
				// a random debt: a burst, then partial drains and takes
				p.AllowN(clk.Now(), "k", b)
				for range 1 + rng.IntN(4) {
					clk.Advance(time.Duration(rng.IntN(int(2000*float64(b)/float64(c.lim)))) * time.Millisecond)
					p.AllowN(clk.Now(), "k", 1+rng.IntN(b))
				}
				n := 1 + rng.IntN(b)
				ra := p.PeekN(clk.Now(), "k", n).RetryAfter
				if ra == 0 {
					continue // fits now
				}
				before := p.TokensAt(clk.Now(), "k")
				short, cancel := context.WithDeadline(context.Background(), clk.Now().Add(ra-time.Millisecond))
				err = p.WaitN(short, "k", n)
				cancel()
				if !errors.Is(err, limit.ErrPastDeadline) {
					t.Fatalf("run %d: WaitN(%d) with its deadline 1 ms before RetryAfter %v = %v, want ErrPastDeadline", i, n, ra, err)
				}
				if after := p.TokensAt(clk.Now(), "k"); after != before {
					t.Fatalf("run %d: the refused WaitN debited: %v -> %v", i, before, after)
				}
				ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(ra))
				errc := make(chan error, 1)
				go func() { errc <- p.WaitN(ctx, "k", n) }()
				if err, early := a89rsTimerOrResult(clk, errc); early {
					t.Fatalf("run %d: WaitN(%d) returned %v without waiting for RetryAfter %v", i, n, err, ra)
				}
				clk.Advance(ra)
				if err := <-errc; err != nil {
					t.Fatalf("run %d: %s WaitN(%d) with its deadline at RetryAfter %v = %v, want nil", i, fmt.Sprint(c.lim), n, ra, err)
				}
				cancel()
			}
		})
	}
}

// a89rsTimerOrResult waits until the WaitN running in the background has
// either set a timer on clk (false) or returned (true, with its error),
// so that a WaitN that wrongly returns at once fails a test instead of
// hanging it.
func a89rsTimerOrResult(clk *limittest.FakeClock, errc <-chan error) (error, bool) {
	for {
		select {
		case err := <-errc:
			return err, true
		default:
		}
		if clk.Timers() > 0 {
			return nil, false
		}
		runtime.Gosched()
	}
}
