package limit_test

// Audit 85 (concurrency): WaitN with contexts cancelled concurrently, and
// Stats under that traffic, on both engines at GOMAXPROCS 1, 2, 4, 8.
//
// Limiter.WaitN: "or ctx.Err() when the context ends during the wait,
// after cancelling the reservation (Cancel's rule: all of it back unless
// another request touched the key's cells since, ...)". Reservation.Cancel:
// "a cell of the key that no other request has written since the
// reservation gets its previous value back ..., and with the count-min so
// does one written since only within the same millisecond, below MaxDebt;
// any other cell keeps the debit, on the safe side (a key is never given
// back more than its own reservation ...)". Stats, "Counting": "Wait and
// WaitN (Admitted once they reserve, whether or not the wait then
// completes ...)"; "Each counter is exact for the decisions that have
// returned before Stats is called".

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func audit85concWaitLimiter(t *testing.T, e limit.Engine, fc *limittest.FakeClock) *limit.Limiter {
	t.Helper()
	opts := []limit.Option{limit.WithClock(fc), limit.WithSeed(8585), limit.WithMaxDebt(40)}
	if e == limit.CountMin {
		opts = append(opts, limit.WithSize(4, 1<<16))
	} else {
		opts = append(opts, limit.WithEngine(e))
	}
	l, err := limit.New(10, 2, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAudit85ConcWaitCancelDistinctKeys: G waiters, each on its own key
// (alone in its cells: a large engine, a fixed seed), all blocked on their
// timers; then their contexts are cancelled from G goroutines at once
// while the clock is moved to their act time: each WaitN returns nil (its
// token stays: the key owes 2 at its act time) or ctx.Err() (the
// reservation is given back whole: nothing else touched the key's cells,
// so the key owes 1). Admitted counts every WaitN that reserved, once.
func TestAudit85ConcWaitCancelDistinctKeys(t *testing.T) {
	for _, e := range audit85concEngines {
		for _, advance := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/advance=%v", e, advance), func(t *testing.T) {
				sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
					const G = 12
					fc := limittest.NewFakeClock()
					fc.Set(1 << 32)
					l := audit85concWaitLimiter(t, e, fc)
					keys := make([]string, G)
					for i := range keys {
						keys[i] = fmt.Sprintf("w%d", i)
						if !l.AllowN(fc.Now(), keys[i], 2) {
							t.Fatal("setup: a fresh key denied its burst")
						}
					}
					ctxs := make([]context.Context, G)
					cancels := make([]context.CancelFunc, G)
					errs := make([]error, G)
					var wg sync.WaitGroup
					for i := range keys {
						ctxs[i], cancels[i] = context.WithCancel(context.Background())
						wg.Add(1)
						go func(i int) {
							defer wg.Done()
							errs[i] = l.WaitN(ctxs[i], keys[i], 1)
						}(i)
					}
					fc.BlockUntilTimers(G)
					if s := l.Stats(); s.Admitted != 2*G {
						// G setup admissions, G waiters reserved
						t.Errorf("Stats.Admitted %d with %d waiters blocked after %d admissions, want %d", s.Admitted, G, G, 2*G)
					}
					start := make(chan struct{})
					var cw sync.WaitGroup
					for i := range cancels {
						cw.Add(1)
						go func(i int) {
							defer cw.Done()
							<-start
							cancels[i]()
						}(i)
					}
					if advance {
						cw.Add(1)
						go func() {
							defer cw.Done()
							<-start
							fc.Advance(100 * time.Millisecond) // every waiter's act time
						}()
					}
					close(start)
					cw.Wait()
					wg.Wait()
					if !advance {
						fc.Advance(100 * time.Millisecond)
					}
					now := fc.Now()
					for i, key := range keys {
						tok := l.TokensAt(now, key)
						switch {
						case errs[i] == nil:
							if !advance {
								t.Errorf("key %s: WaitN returned nil before its act time", key)
							}
							if tok != 0 {
								t.Errorf("key %s: WaitN admitted, then %v tokens at its act time, want 0 (its token stays)", key, tok)
							}
						case errors.Is(errs[i], context.Canceled):
							if tok != 1 {
								t.Errorf("key %s: WaitN cancelled (%v), then %v tokens at the act time, want 1: the reservation, alone in its cells, must come back whole, once", key, errs[i], tok)
							}
						default:
							t.Errorf("key %s: WaitN: %v", key, errs[i])
						}
					}
					s := l.Stats()
					if s.Admitted != 2*G || s.Denied != 0 {
						t.Errorf("Stats %d admitted %d denied, want %d and 0 (every WaitN reserved; a cancel does not uncount)", s.Admitted, s.Denied, 2*G)
					}
					if n := fc.Timers(); n != 0 {
						t.Errorf("%d timers left running after every WaitN returned", n)
					}
				})
			})
		}
	}
}

// TestAudit85ConcWaitCancelOneKey: G waiters on one key queue behind each
// other (serial delays 100, 200, ... ms); all are cancelled at once. No
// cancellation gives back more than its own: the key never owes less
// than its 2 setup tokens (drained by the time moved). On the count-min,
// with the clock frozen and the debt below MaxDebt, every cell written
// since a reservation was written within its millisecond, so each comes
// back: the key owes exactly its 2 again. Then the key must admit exactly
// what a key owing that debt may (the next WaitN's delay is exact).
func TestAudit85ConcWaitCancelOneKey(t *testing.T) {
	for _, e := range audit85concEngines {
		t.Run(e.String(), func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				const G = 10
				fc := limittest.NewFakeClock()
				fc.Set(1 << 32)
				l := audit85concWaitLimiter(t, e, fc)
				key := "one"
				if !l.AllowN(fc.Now(), key, 2) {
					t.Fatal("setup")
				}
				ctxs := make([]context.Context, G)
				cancels := make([]context.CancelFunc, G)
				errs := make([]error, G)
				var wg sync.WaitGroup
				for i := range ctxs {
					ctxs[i], cancels[i] = context.WithCancel(context.Background())
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						errs[i] = l.WaitN(ctxs[i], key, 1)
					}(i)
				}
				fc.BlockUntilTimers(G)
				if tok := l.TokensAt(fc.Now(), key); tok != -G {
					t.Fatalf("%v tokens with %d waiters queued, want %d", tok, G, -G)
				}
				start := make(chan struct{})
				var cw sync.WaitGroup
				for i := range cancels {
					cw.Add(1)
					go func(i int) {
						defer cw.Done()
						<-start
						cancels[i]()
					}(i)
				}
				close(start)
				cw.Wait()
				wg.Wait()
				for i, err := range errs {
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("waiter %d: %v, want context.Canceled (the clock never moved)", i, err)
					}
				}
				tok := l.TokensAt(fc.Now(), key)
				if tok > 0 {
					t.Fatalf("after %d cancellations the key has %v tokens, above the 0 it had before them: a cancellation gave back more than its own reservation", G, tok)
				}
				if e == limit.CountMin && tok != 0 {
					t.Errorf("count-min: after %d cancellations within one millisecond below MaxDebt the key has %v tokens, want 0 (every reservation back)", G, tok)
				}
				if s := l.Stats(); s.Admitted != 1+G || s.Denied != 0 {
					t.Errorf("Stats %d/%d, want %d/0", s.Admitted, s.Denied, 1+G)
				}
				// the key now owes 2 - tok tokens: the next reservation's delay is
				// exactly (2 - tok + 1 - 2) tokens' time
				r := l.ReserveN(fc.Now(), key, 1)
				want := time.Duration(float64(100*time.Millisecond) * (1 - tok))
				if !r.OK() || r.DelayFrom(fc.Now()) != want {
					t.Errorf("after the cancellations (tokens %v) a reservation has delay %v, want %v", tok, r.DelayFrom(fc.Now()), want)
				}
			})
		})
	}
}
