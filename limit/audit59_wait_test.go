package limit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// WaitN on both engines and count-mins of 2, 3 and 8 generations, on a
// fake clock: a wait past the context's deadline is refused with
// ErrPastDeadline having debited nothing; a wait whose context is
// cancelled while it waits gives its reservation back (Cancel's rule:
// nothing else wrote the key since, so all of it), across a promotion
// too; a wait that ends returns nil at the bucket's time to act.
func TestAudit59WaitNCancelAndDeadline(t *testing.T) {
	for _, w := range []a59Window{{limit.Buckets, 0}, {limit.CountMin, 2}, {limit.CountMin, 3}, {limit.CountMin, 8}} {
		t.Run(w.String(), func(t *testing.T) {
			clk := limittest.NewFakeClock()
			// An hour ahead of the wall clock: a context's deadline set on
			// the fake clock's reading never fires during the test.
			start := time.Now().Add(time.Hour).UnixMilli()
			clk.Set(start)
			extra := []limit.Option{}
			if w.engine == limit.CountMin {
				extra = append(extra, limit.WithPeriod(a59Period(w.gens)))
			}
			l := limit.MustNew(10, 20, w.opts(clk, extra...)...)
			l.AllowN(clk.Now(), "k", 18) // 2 tokens left
			tokens := func() float64 { return l.TokensAt(clk.Now(), "k") }

			// 1. Past the deadline: 5 tokens need 300 ms; the deadline is 250 ms away.
			ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(250*time.Millisecond))
			before := tokens()
			err := l.WaitN(ctx, "k", 5)
			cancel()
			if !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitN past the deadline: %v; want ErrPastDeadline", err)
			}
			if got := tokens(); got != before {
				t.Errorf("a refused WaitN debited: tokens %v; before %v", got, before)
			}

			// 2. Cancelled while waiting, after a Period boundary for the
			// count-mins (the wait outlasts a promotion).
			_ = tokens() // (the twin below is the oracle of this step)
			twin := limit.MustNew(10, 20, w.opts(clk, extra...)...)
			twin.AllowN(a59At(start), "k", 18)
			ctx, cancel = context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- l.WaitN(ctx, "k", 20) }() // debt 38: acts in 1.8 s
			clk.BlockUntilTimers(1)
			step := 1000 * time.Millisecond
			if w.engine == limit.CountMin {
				step = a59Period(w.gens) + time.Millisecond
				if step > 1700*time.Millisecond {
					step = 1700 * time.Millisecond
				}
			}
			clk.Advance(step)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("WaitN: %v; want context.Canceled", err)
			}
			for _, dt := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
				clk.Advance(dt)
				if got, want := tokens(), twin.TokensAt(clk.Now(), "k"); got != want {
					t.Errorf("%v after the cancelled wait (+%v): tokens %v; want %v (the wait's reservation given back)", step, dt, got, want)
				}
			}

			// 3. A wait that ends: after the drain, 20 act at once (no timer),
			// then 4 more wait 400 ms, and not 1 ms less.
			clk.Advance(5 * time.Second)
			if err := l.WaitN(context.Background(), "k", 20); err != nil {
				t.Fatalf("WaitN(20) from a full bucket: %v", err)
			}
			go func() { done <- l.WaitN(context.Background(), "k", 4) }() // acts in 400 ms
			clk.BlockUntilTimers(1)
			clk.Advance(399 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("WaitN returned %v 1 ms before its time", err)
			default:
			}
			clk.Advance(time.Millisecond)
			if err := <-done; err != nil {
				t.Fatalf("WaitN: %v", err)
			}
		})
	}
}
