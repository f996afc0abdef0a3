package limit_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a97Waiting is a WaitN running in its own goroutine.
type a97Waiting struct {
	done chan error
}

func a97StartWait(ctx context.Context, l *limit.Limiter, n int) *a97Waiting {
	w := &a97Waiting{done: make(chan error, 1)}
	go func() { w.done <- l.WaitN(ctx, "k", n) }()
	return w
}

// timer waits until the WaitN has a timer on clk (returned false), or
// has returned without one (returned true, with its error).
func (w *a97Waiting) timer(clk *limittest.FakeClock) (returned bool, err error) {
	for clk.Timers() == 0 {
		select {
		case err := <-w.done:
			return true, err
		default:
			runtime.Gosched()
		}
	}
	return false, nil
}

// a97WaitFor checks that w waits exactly until the clock reads at (ms):
// its timer still pending at at-1, and WaitN returning nil at at.
func a97WaitFor(t *testing.T, clk *limittest.FakeClock, w *a97Waiting, at int64) {
	t.Helper()
	if returned, err := w.timer(clk); returned {
		t.Fatalf("WaitN returned %v at once, want a wait until +%d ms", err, at-clk.NowMillis())
	}
	clk.Set(at - 1)
	if clk.Timers() == 0 {
		t.Fatalf("WaitN's timer fired at +%d ms, 1 ms before the act time", at-1-a97Base)
	}
	clk.Set(at)
	if err := <-w.done; err != nil {
		t.Fatalf("WaitN at its act time: %v", err)
	}
}

// TestAudit97PeerWaitPort: x/time/rate's TestWaitSimple, TestWaitCancel,
// TestWaitTimeout and TestReserveMax (as WaitN with a deadline d ahead),
// on the fake clock, both engines. reserve.go (WaitN): "a *WaitError
// before waiting (n above the burst, a wait past the context's deadline,
// which also matches context.DeadlineExceeded, ...), having debited
// nothing; or ctx.Err() when the context ends during the wait, after
// cancelling the reservation"; readings.md:572: "ctx done: ctx.Err()",
// "exactly at the deadline is in time". Waits are exact to the ms
// (the timer pending 1 ms before the act time, fired at it).
func TestAudit97PeerWaitPort(t *testing.T) {
	a97Engines(t, func(t *testing.T, eng limit.Engine) {
		// TestWaitSimple
		l, clk := a97Port(t, eng, 10, 3)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.WaitN(ctx, "k", 1); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitN on a cancelled context: %v, want context.Canceled", err)
		}
		if err := l.WaitN(context.Background(), "k", 4); !errors.Is(err, limit.ErrAboveBurst) {
			t.Errorf("WaitN(4) above the burst 3: %v, want ErrAboveBurst", err)
		}
		if tk := l.Tokens("k"); tk != 3 {
			t.Errorf("after the refused WaitNs Tokens %v, want 3 (nothing debited)", tk)
		}
		if err := l.WaitN(context.Background(), "k", 2); err != nil {
			t.Errorf("WaitN(2) of 3 tokens: %v", err)
		}
		a97WaitFor(t, clk, a97StartWait(context.Background(), l, 3), a97Base+200)

		// TestWaitCancel: 3 after 2 waits 200 ms; the context ends at
		// 100 ms: ctx.Err(), the 3 tokens back, so 2 more at once.
		l, clk = a97Port(t, eng, 10, 3)
		if err := l.WaitN(context.Background(), "k", 2); err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		w := a97StartWait(ctx, l, 3)
		if returned, err := w.timer(clk); returned {
			t.Fatalf("WaitN(3) with 1 token returned %v at once", err)
		}
		clk.Set(a97Base + 100)
		cancel()
		if err := <-w.done; !errors.Is(err, context.Canceled) {
			t.Errorf("WaitN whose context ended during the wait: %v, want context.Canceled", err)
		}
		if tk := l.Tokens("k"); tk != 2 {
			t.Errorf("after the cancelled wait Tokens %v, want 2 (1 + 100 ms; the 3 given back)", tk)
		}
		if err := l.WaitN(context.Background(), "k", 2); err != nil || clk.Timers() != 0 {
			t.Errorf("WaitN(2) after the cancel: %v (timers %d), want nil at once", err, clk.Timers())
		}

		// TestWaitTimeout and TestReserveMax: a deadline 100 ms ahead.
		l, clk = a97Port(t, eng, 10, 2)
		ctx, cancel = context.WithDeadline(context.Background(), time.UnixMilli(a97Base+100))
		defer cancel()
		if err := l.WaitN(ctx, "k", 2); err != nil {
			t.Fatalf("WaitN(2) of 2 tokens: %v", err)
		}
		if err := l.WaitN(ctx, "k", 2); !errors.Is(err, limit.ErrPastDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitN(2) needing 200 ms, 100 ms left: %v, want ErrPastDeadline", err)
		}
		w = a97StartWait(ctx, l, 1) // 100 ms: exactly at the deadline, in time
		if returned, err := w.timer(clk); returned {
			t.Fatalf("WaitN(1) ending at the deadline returned %v at once", err)
		}
		err := l.WaitN(ctx, "k", 1) // would act at 200 ms
		var we *limit.WaitError
		if !errors.Is(err, limit.ErrPastDeadline) || !errors.As(err, &we) || we.Wait != 100*time.Millisecond {
			t.Errorf("WaitN(1) queued past the deadline: %v, want ErrPastDeadline with Wait 100ms", err)
		}
		if tk := l.Tokens("k"); tk != -1 {
			t.Errorf("Tokens %v with one wait of 1 queued, want -1 (nothing else debited)", tk)
		}
		a97WaitFor(t, clk, w, a97Base+100)
	})
}

// TestAudit97PeerWaitDifferential: WaitN against a97Peer's reserveN with
// x/time/rate's maxFutureReserve (the time to the deadline), over random
// schedules (fixed seeds) on exact limiters of both engines: with the
// peer's wait w (rational ms) and the whole ms left to the deadline,
// WaitN returns nil at once when w is 0, waits exactly ceil(w) ms when
// ceil(w) <= left ("exactly at the deadline is in time"), and otherwise
// returns ErrPastDeadline having debited nothing; without a deadline,
// a reservation past MaxDebt is ErrMaxDebt ("the queue bound"),
// readings.md:572.
func TestAudit97PeerWaitDifferential(t *testing.T) {
	type cfg struct {
		num, den int64
		b        int
		md       float64
	}
	var waited, refused, immediate int
	for ci, c := range []cfg{{10, 1, 4, 0}, {1, 3, 2, 5}, {7000, 13, 20, 0}, {1000, 1, 50, 0}} {
		for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
			opts := []limit.Option{}
			if c.md != 0 {
				opts = append(opts, limit.WithMaxDebt(c.md))
			}
			l, clk := a97Port(t, eng, limit.Limit(float64(c.num)/float64(c.den)), c.b, opts...)
			if !l.Exact() {
				t.Fatalf("%v: not Exact", c)
			}
			name := fmt.Sprintf("%d/%ds-b%d-%v", c.num, c.den, c.b, eng)
			maxDebt := new(big.Rat).SetFloat64(l.MaxDebt())
			rng := rand.New(rand.NewPCG(uint64(ci), 972))
			p := a97NewPeer(c.num, c.den, c.b, a97Base)
			tokMs := max(1000*c.den/c.num, 1)
			now := int64(a97Base)
			for step := 0; step < 60; step++ {
				now += rng.Int64N(int64(c.b)*tokMs/2 + 2)
				clk.Set(now)
				if k := rng.IntN(c.b + 1); k > 0 && l.AllowN(clk.Now(), "k", k) {
					p.take(now, k)
				}
				n := 1 + rng.IntN(c.b)
				tk := p.advance(now)
				wait := a97Ceil(p.waitMs(tk, int64(n)))
				after := new(big.Rat).Sub(big.NewRat(int64(c.b+n), 1), tk)
				left := time.Duration(-1)
				ctx := context.Background()
				cancel := func() {}
				if rng.IntN(4) != 0 {
					left = time.Duration(rng.Int64N(int64(wait/time.Millisecond)+3)) * time.Millisecond
					ctx, cancel = context.WithDeadline(ctx, time.UnixMilli(now).Add(left))
				}
				w := a97StartWait(ctx, l, n)
				returned, err := w.timer(clk)
				switch {
				case after.Cmp(maxDebt) > 0 && (left < 0 || wait <= left):
					refused++
					if !returned || !errors.Is(err, limit.ErrMaxDebt) {
						t.Fatalf("%s step %d: WaitN(%d), debt after %s > MaxDebt: returned %v err %v, want ErrMaxDebt", name, step, n, after.FloatString(3), returned, err)
					}
				case left >= 0 && wait > left:
					// Past the deadline, and maybe past MaxDebt too: either
					// refusal, as the lower bound decides.
					refused++
					if !returned || !errors.Is(err, limit.ErrPastDeadline) && !(after.Cmp(maxDebt) > 0 && errors.Is(err, limit.ErrMaxDebt)) {
						t.Fatalf("%s step %d: WaitN(%d) needing %v, %v left: returned %v err %v, want ErrPastDeadline", name, step, n, wait, left, returned, err)
					}
				case wait == 0:
					immediate++
					if !returned || err != nil {
						t.Fatalf("%s step %d: WaitN(%d) with the tokens there: returned %v err %v, want nil at once", name, step, n, returned, err)
					}
					p.take(now, n)
				default:
					waited++
					if returned {
						t.Fatalf("%s step %d: WaitN(%d) needing %v (left %v) returned %v at once", name, step, n, wait, left, err)
					}
					p.take(now, n)
					now += int64(wait / time.Millisecond)
					a97WaitFor(t, clk, w, now)
				}
				cancel()
				if got, want := l.TokensAt(clk.Now(), "k"), p.advance(now); new(big.Rat).SetFloat64(got).Cmp(want) != 0 {
					gf, _ := want.Float64()
					if d := got - gf; d > 1e-9 || d < -1e-9 {
						t.Fatalf("%s step %d: after WaitN Tokens %v, the peer %v", name, step, got, gf)
					}
				}
			}
		}
	}
	if waited < 50 || refused < 50 || immediate < 50 {
		t.Fatalf("too little checked: %d waits, %d refusals, %d immediate", waited, refused, immediate)
	}
	t.Logf("%d waits, %d refusals, %d immediate", waited, refused, immediate)
}
