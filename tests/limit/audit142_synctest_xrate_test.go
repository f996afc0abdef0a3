package limit_test

// Audit 142: testing/synctest. golang.org/x/time/rate reads time.Now and
// waits on time.NewTimer, so inside a synctest.Test bubble it is exact
// and deterministic. A limit.Limiter whose clock (WithClock) reads
// time.Now and waits on time.NewTimer must be too: same admissions, same
// waits, in the same bubble.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

// a142Near: limit's duration d (whole ms, never early) against
// x/time/rate's x, which float64 rounding leaves a few ns short of the
// same whole ms (38.999999ms for 39ms).
func a142Near(d, x time.Duration) bool { return d >= x && d-x <= time.Microsecond }

// TestAudit142XRateParityInBubble: a seeded script of AllowN, Reserve
// (Delay), Wait (fake time waited) and fake sleeps of whole ms, on three
// keys, then waiters queued on one key from several goroutines: the
// limiter (limittest.TimeClock, on time.Now) and one x/time/rate Limiter per key agree on
// every step, in the same bubble.
func TestAudit142XRateParityInBubble(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { a142Parity(t, seed) })
		})
	}
}

func a142Parity(t *testing.T, seed uint64) {
	const lim, burst = 10, 3
	l, err := limit.New(lim, burst, limit.WithClock(limittest.TimeClock{}), limit.WithMaxDebt(40))
	if err != nil {
		t.Fatal(err)
	}
	peers := map[string]*rate.Limiter{}
	peer := func(k string) *rate.Limiter {
		if peers[k] == nil {
			peers[k] = rate.NewLimiter(lim, burst)
		}
		return peers[k]
	}
	rng := rand.New(rand.NewPCG(seed, 142))
	keys := []string{"a", "b", "c"}
	timed := func(f func() error) (time.Duration, error) {
		s := time.Now()
		err := f()
		return time.Since(s), err
	}
	for i := range 300 {
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(4); op {
		case 0:
			n := 1 + rng.IntN(burst)
			now := time.Now()
			if g, x := l.AllowN(now, k, n), peer(k).AllowN(now, n); g != x {
				t.Fatalf("step %d AllowN(%s, %d): limit %v, x/time/rate %v", i, k, n, g, x)
			}
		case 1:
			now := time.Now()
			g, x := l.ReserveN(now, k, 1), peer(k).ReserveN(now, 1)
			if g.OK() != x.OK() || !a142Near(g.DelayFrom(now), x.DelayFrom(now)) {
				t.Fatalf("step %d Reserve(%s): limit %v %v, x/time/rate %v %v", i, k, g.OK(), g.DelayFrom(now), x.OK(), x.DelayFrom(now))
			}
		case 2:
			// The peer reserves at the instant the limiter's Wait
			// starts: what x/time/rate's Wait would wait from there.
			s := time.Now()
			r := peer(k).ReserveN(s, 1)
			dx := r.DelayFrom(s)
			dg, eg := timed(func() error { return l.Wait(context.Background(), k) })
			if eg != nil || !r.OK() || !a142Near(dg, dx) {
				t.Fatalf("step %d Wait(%s): limit %v after %v, x/time/rate ok %v delay %v", i, k, eg, dg, r.OK(), dx)
			}
		default:
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
	}
	// Queued waiters: both libraries in the same bubble, each waiter
	// started once the previous one blocks.
	const waiters = 5
	got := make([]time.Duration, waiters)
	want := make([]time.Duration, waiters)
	gl, err := limit.New(lim, burst, limit.WithClock(limittest.TimeClock{}), limit.WithMaxDebt(40))
	if err != nil {
		t.Fatal(err)
	}
	xl := rate.NewLimiter(lim, burst)
	var wg sync.WaitGroup
	s := time.Now()
	for i := range waiters {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := gl.WaitN(context.Background(), "q", 2); err != nil {
				t.Error(err)
			}
			got[i] = time.Since(s)
		}()
		go func() {
			defer wg.Done()
			if err := xl.WaitN(context.Background(), 2); err != nil {
				t.Error(err)
			}
			want[i] = time.Since(s)
		}()
		synctest.Wait()
	}
	wg.Wait()
	for i := range got {
		if !a142Near(got[i], want[i]) {
			t.Fatalf("queued waiters: limit %v, x/time/rate %v", got, want)
		}
	}
}
