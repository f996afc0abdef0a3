package limit_test

// Audit 4: WaitN with contexts cancelled while other requests race.
//
// WaitN: "blocks until n tokens for key are available and returns nil,
// or returns ... ctx.Err() when the context ends during the wait, after
// cancelling the reservation (Cancel's rule: all of it back unless
// another request touched the key's cells since, in which case it
// stays, on the safe side)". Reservation.Cancel: "with the count-min so
// does one written since only within the same millisecond, below
// MaxDebt". Stats: "Wait and WaitN (Admitted once they reserve, whether
// or not the wait then completes ...)".

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit4WaitCancelRace: per round, on a fresh key at a frozen time T,
// ten WaitN (of the Limiter and of a Tier) race; those that need no wait
// return nil at once (and must be, in some order, within their own
// bursts), the others block on the fake clock. Then, still at T, the
// contexts of half of the blocked waiters are cancelled while other
// goroutines reserve and allow on the same key: on the count-min every
// such Cancel is in the reservation's millisecond, below MaxDebt, so the
// key's debt is exactly the waits that did not end (plus the others'
// admissions); on Buckets it is within [that, that + the cancelled
// waits]. Then the clock jumps forward while more contexts are
// cancelled, racing the timers that fire: each of those waits returns
// nil or ctx.Err(), the waits not cancelled and not yet due stay
// blocked, and the key's debt is never below what the waits that kept
// their reservation owe (never above what all of them owe). Stats counts
// every WaitN as admitted, cancelled or not.
func TestAudit4WaitCancelRace(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		clk := limittest.NewFakeClock()
		clk.Set(1 << 34)
		// 10/s burst 5 (500 ms); MaxDebt 50 tokens = 5000 ms.
		l, err := limit.New(10, 5, append(a4opts(e, 41), limit.WithClock(clk), limit.WithMaxDebt(50))...)
		if err != nil {
			t.Fatal(err)
		}
		probe, _ := l.Tier("probe", 10, 1)
		tier, _ := l.Tier("slow", 5, 3) // 200 ms a token, 600 ms burst
		rng := rand.New(rand.NewPCG(uint64(procs), 12))
		var tally a4tally
		const W, rounds = 10, 6
		for round := range rounds {
			key := fmt.Sprint("w", round)
			T := clk.NowMillis()
			type waiter struct {
				c, cap int64
				cancel context.CancelFunc
				done   chan error
				err    error
				ended  bool
				killed bool
			}
			ws := make([]*waiter, W)
			for i := range ws {
				n := 1 + rng.IntN(2)
				ctx, cancel := context.WithCancel(context.Background())
				w := &waiter{cancel: cancel, done: make(chan error, 1)}
				ws[i] = w
				if rng.IntN(2) == 0 {
					w.c, w.cap = int64(n)*100, 500
					go func() { w.done <- l.WaitN(ctx, key, n) }()
				} else {
					w.c, w.cap = int64(n)*200, 600
					go func() { w.done <- tier.WaitN(ctx, key, n) }()
				}
			}
			// collect the waits that end; the others hold a timer
			collect := func(want func(*waiter) bool) {
				deadline := time.Now().Add(20 * time.Second)
				for {
					ended, need := 0, false
					for _, w := range ws {
						if !w.ended {
							select {
							case w.err = <-w.done:
								w.ended = true
							default:
							}
						}
						if w.ended {
							ended++
						} else if want(w) {
							need = true
						}
					}
					if !need && ended+clk.Timers() == W {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("round %d: waits stuck: %d ended, %d timers of %d", round, ended, clk.Timers(), W)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			collect(func(*waiter) bool { return false })
			var sum, kept int64
			var immediate [][2]int64
			for _, w := range ws {
				sum += w.c
				if w.ended {
					if w.err != nil {
						t.Fatalf("round %d: WaitN at once: %v", round, w.err)
					}
					immediate = append(immediate, [2]int64{w.c, w.cap})
				}
			}
			// the waits that returned at once each fit their own burst in some order
			sort.Slice(immediate, func(i, j int) bool { return immediate[i][1] < immediate[j][1] })
			var pre int64
			for _, x := range immediate {
				if pre += x[0]; pre > x[1] {
					t.Fatalf("round %d: waits returned at once beyond their bursts: %v", round, immediate)
				}
			}
			if got := a4debt(probe, clk.Now(), key); got != sum {
				t.Fatalf("round %d: debt %d ms with every wait reserved, want %d", round, got, sum)
			}
			// Phase 1, at T: cancel half of the blocked waits while others
			// take the key's cells at the same millisecond.
			var blocked []*waiter
			for _, w := range ws {
				if !w.ended {
					blocked = append(blocked, w)
				}
			}
			var cancelled int64
			var others struct {
				sync.Mutex
				ms int64
			}
			now := clk.Now()
			a4race(len(blocked)+2, func(g int) {
				if g >= len(blocked) {
					for i := range 3 {
						var ok bool
						if i == 1 {
							ok = l.ReserveN(now, key, 1).OK()
						} else {
							ok = l.AllowN(now, key, 1)
						}
						tally.add(ok)
						if ok {
							others.Lock()
							others.ms += 100
							others.Unlock()
						}
					}
					return
				}
				if g%2 == 0 {
					blocked[g].cancel()
				}
			})
			for g, w := range blocked {
				if g%2 == 0 {
					w.killed = true
					cancelled += w.c
				}
			}
			collect(func(w *waiter) bool { return w.killed })
			for _, w := range blocked {
				if w.killed != w.ended || w.ended && !errors.Is(w.err, context.Canceled) {
					t.Fatalf("round %d: a wait cancelled %v ended %v with %v", round, w.killed, w.ended, w.err)
				}
			}
			kept = sum + others.ms - cancelled
			hi := kept
			if e == limit.Buckets {
				hi += cancelled
			}
			d1 := a4debt(probe, clk.Now(), key)
			if d1 < kept || d1 > hi {
				t.Fatalf("round %d: debt %d ms after cancelling %d ms of waits at their millisecond, want within [%d, %d]", round, d1, cancelled, kept, hi)
			}
			// Phase 2: jump forward while cancelling more, racing the timers.
			jump := time.Duration(100+rng.IntN(1500)) * time.Millisecond
			var rest []*waiter
			for _, w := range blocked {
				if !w.ended {
					rest = append(rest, w)
				}
			}
			a4race(len(rest)+1, func(g int) {
				if g == len(rest) {
					clk.Advance(jump)
					return
				}
				if g%2 == 1 {
					rest[g].cancel()
				}
			})
			var maybe int64 // cancelled waits that ended with ctx.Err(): given back or not
			for g, w := range rest {
				if g%2 == 1 {
					w.killed = true
				}
			}
			collect(func(w *waiter) bool { return w.killed })
			for _, w := range rest {
				switch {
				case !w.ended:
				case w.err == nil:
				case w.killed && errors.Is(w.err, context.Canceled):
					maybe += w.c
				default:
					t.Fatalf("round %d: a wait (cancelled %v) ended with %v", round, w.killed, w.err)
				}
			}
			z := T + d1 // the key drains to 0 at z, or earlier by what the late Cancels gave back
			now2 := clk.NowMillis()
			d2 := a4debt(probe, clk.Now(), key)
			if lo, hi := max(z-maybe-now2, 0), max(z-now2, 0); d2 < lo || d2 > hi {
				t.Fatalf("round %d: debt %d ms %v after the jump, want within [%d, %d] (%d ms of waits cancelled late)", round, d2, jump, lo, hi, maybe)
			}
			// the rest: cancel, and let the clock run out the key's debt
			for _, w := range ws {
				w.cancel()
				w.killed = true
			}
			collect(func(w *waiter) bool { return true })
			for range W {
				tally.add(true) // every WaitN reserved
			}
			clk.Advance(time.Duration(max(z-now2, 0)+10) * time.Millisecond)
		}
		a4checkStats(t, "Limiter", l.Stats(), &tally)
	})
}

// TestAudit4WaitDeadlineRace: per round, on a fresh key at a frozen time
// T, twelve WaitN (of the Limiter and of a Tier) race, each with a
// context deadline X ms ahead on the limiter's clock (0 to 800 ms).
// WaitN: "a *WaitError before waiting (... a wait past the context's
// deadline, which also matches context.DeadlineExceeded ...), having
// debited nothing"; docs/readings.md: "a wait that would end after the
// deadline: error, nothing debited (checked before the debit ...;
// exactly at the deadline is in time); else waits on the limiter's
// clock, at most until the time the check admitted". So: the key's debt
// is exactly the costs of the waits that did not fail; some order admits
// each of them with its wait ending by its deadline (debt before + cost
// <= burst + X, in ms); every failure is ErrPastDeadline on a debt that
// could not fit; and once the clock reaches a waiter's deadline its wait
// has returned nil. Stats: admitted once reserved, denied on
// ErrPastDeadline.
func TestAudit4WaitDeadlineRace(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		clk := limittest.NewFakeClock()
		// ahead of the wall clock: a deadline on the fake clock is hours
		// away in real time, so no context expires by itself
		clk.SetTime(time.Now().Add(time.Hour).Truncate(time.Millisecond))
		l, err := limit.New(10, 5, append(a4opts(e, 43), limit.WithClock(clk), limit.WithMaxDebt(50))...)
		if err != nil {
			t.Fatal(err)
		}
		probe, _ := l.Tier("probe", 10, 1)
		tier, _ := l.Tier("slow", 5, 3)
		rng := rand.New(rand.NewPCG(uint64(procs), 13))
		var tally a4tally
		const W, rounds = 12, 8
		failures := 0
		for round := range rounds {
			key := fmt.Sprint("d", round)
			T := clk.Now()
			type waiter struct {
				c, cap, x int64
				done      chan error
				err       error
				ended     bool
			}
			ws := make([]*waiter, W)
			var cancels []context.CancelFunc
			for i := range ws {
				n := 1 + rng.IntN(2)
				w := &waiter{x: rng.Int64N(801), done: make(chan error, 1)}
				ctx, cancel := context.WithDeadline(context.Background(), T.Add(time.Duration(w.x)*time.Millisecond))
				cancels = append(cancels, cancel)
				ws[i] = w
				if i%2 == 0 {
					w.c, w.cap = int64(n)*100, 500
					go func() { w.done <- l.WaitN(ctx, key, n) }()
				} else {
					w.c, w.cap = int64(n)*200, 600
					go func() { w.done <- tier.WaitN(ctx, key, n) }()
				}
			}
			poll := func(want func(*waiter) bool) {
				deadline := time.Now().Add(20 * time.Second)
				for {
					ended, need := 0, false
					for _, w := range ws {
						if !w.ended {
							select {
							case w.err = <-w.done:
								w.ended = true
							default:
							}
						}
						if w.ended {
							ended++
						} else if want(w) {
							need = true
						}
					}
					if !need && ended+clk.Timers() == W {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("round %d: waits stuck: %d ended, %d timers of %d", round, ended, clk.Timers(), W)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			poll(func(*waiter) bool { return false })
			var sum int64
			type job struct{ c, dl int64 }
			var jobs []job
			var failed []*waiter
			for _, w := range ws {
				switch {
				case w.ended && w.err != nil:
					if !errors.Is(w.err, limit.ErrPastDeadline) || !errors.Is(w.err, context.DeadlineExceeded) {
						t.Fatalf("round %d: WaitN: %v", round, w.err)
					}
					failed = append(failed, w)
					tally.add(false)
				default: // returned nil at once, or waiting
					sum += w.c
					jobs = append(jobs, job{w.c, w.cap + w.x})
					tally.add(true)
				}
			}
			failures += len(failed)
			if got := a4debt(probe, T, key); got != sum {
				t.Fatalf("round %d: debt %d ms, want exactly the %d ms of the waits that did not fail", round, got, sum)
			}
			sort.Slice(jobs, func(i, j int) bool { return jobs[i].dl < jobs[j].dl })
			var pre int64
			for _, j := range jobs {
				if pre += j.c; pre > j.dl {
					t.Fatalf("round %d: no order lets every reserved wait end by its deadline: %v", round, jobs)
				}
			}
			for _, w := range failed {
				if sum+w.c <= w.cap+w.x {
					t.Fatalf("round %d: ErrPastDeadline for %d ms with %d ms to the deadline, burst %d ms, on a debt of at most %d ms", round, w.c, w.x, w.cap, sum)
				}
			}
			// Move the clock deadline by deadline: each reserved wait has
			// returned nil by its own.
			order := append([]*waiter(nil), ws...)
			sort.Slice(order, func(i, j int) bool { return order[i].x < order[j].x })
			for _, w := range order {
				if w.ended {
					continue
				}
				clk.SetTime(T.Add(time.Duration(w.x) * time.Millisecond))
				poll(func(v *waiter) bool { return v.x <= w.x })
				if w.err != nil {
					t.Fatalf("round %d: a reserved wait ended with %v", round, w.err)
				}
			}
			for _, c := range cancels {
				c()
			}
			clk.SetTime(T.Add(time.Duration(sum+1000) * time.Millisecond))
		}
		if failures == 0 {
			t.Fatal("no wait was refused: the deadlines were never binding")
		}
		a4checkStats(t, "Limiter", l.Stats(), &tally)
	})
}
