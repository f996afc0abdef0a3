package limit_test

// audit22: package limit under concurrency with a stepping clock. One
// goroutine moves a limittest.FakeClock (mostly forward, sometimes back
// by up to 40 ms) while others call Allow, DecideN (stale, current and
// future t), AllowN, ReserveN+Cancel, a Tier's AllowN and DecideN, a
// Multi's AllowN, and WaitN, at GOMAXPROCS 1, 2 and 4, on both engines.
// Properties checked (all hold on 11ec328):
//
//   - admissions never exceed burst + rate x (latest clock value - start),
//     counted exactly in New's tokens (200/s: one token every 5 ms),
//     for one hot key and for each of 12 keys, Tier admissions at their
//     cost (2 tokens), with ReserveN+Cancel racing (a Cancel never gives
//     back more than its reservation took);
//   - no Decision duration is negative or absurd (above a minute, on a
//     run of a few seconds of clock), and RetryAfter is 0 on admissions,
//     >= 1 ms on denials;
//   - RetryAfter is never early: a worker alone on its key retries, with
//     nothing else happening to the key, at a clock reading >= t +
//     RetryAfter (t its request's time, or the clock's reading when t was
//     ahead of it), and is admitted (the retry is judged only when the
//     clock did not move during the call: a seqlock on the mover);
//   - WaitN never returns before its tokens are there, steps back during
//     the wait included (TestAudit22FixedWaitNTimerArmedAfterStepBack):
//     Tokens >= 0 right after it returns, for a key whose burst was
//     taken before;
//   - Stats counts every decision: Admitted + Denied equals the calls made.
//
// The count-min rotates (its default Period): across a rotation, under
// this load, a key alone read above its true debt (its retry at
// t+RetryAfter denied, WaitN returning with Tokens < 0) until the
// younger generations were written at the primary's time:
// TestAudit22FixedYoungerGenerationWrittenLater, found by this test.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// a22Mover moves a fake clock and publishes what the checks need: a
// sequence number, odd while it moves (a seqlock: a call made between two
// equal even readings ran at one clock value), the largest value it ever
// set (set before the clock moves) and the count of backward steps (counted
// before and after each, so that a reader never misses one in progress).
type a22Mover struct {
	clk   *limittest.FakeClock
	seq   atomic.Int64
	max   atomic.Int64
	backs atomic.Int64
}

func (m *a22Mover) set(ms int64) {
	m.seq.Add(1)
	back := ms < m.clk.NowMillis()
	if back {
		m.backs.Add(1)
	}
	if ms > m.max.Load() {
		m.max.Store(ms) // one writer
	}
	m.clk.Set(ms)
	if back {
		// Again after the step: a reader that saw the first increment
		// before the clock moved sees this one after.
		m.backs.Add(1)
	}
	m.seq.Add(1)
}

// stable runs f at the clock's current reading and reports whether the
// clock did not move while it ran.
func (m *a22Mover) stable(f func(now int64)) bool {
	s := m.seq.Load()
	if s&1 == 1 {
		return false
	}
	f(m.clk.NowMillis())
	return m.seq.Load() == s
}

const a22Absurd = time.Minute

func a22CheckDurations(d limit.Decision) error {
	for _, x := range []struct {
		name string
		v    time.Duration
	}{{"RetryAfter", d.RetryAfter}, {"ResetAfter", d.ResetAfter}, {"NextAfter", d.NextAfter}} {
		if x.v < 0 || (x.v > a22Absurd && !(x.name == "RetryAfter" && d.Never)) {
			return fmt.Errorf("%s = %v: negative or absurd (%+v)", x.name, x.v, d)
		}
	}
	if d.Allowed && d.RetryAfter != 0 {
		return fmt.Errorf("admitted with RetryAfter %v", d.RetryAfter)
	}
	if !d.Allowed && d.RetryAfter < time.Millisecond {
		return fmt.Errorf("denied with RetryAfter %v", d.RetryAfter)
	}
	return nil
}

type a22Run struct {
	eng   limit.Engine
	procs int
	seed  uint64
	steps int
	opts  []limit.Option // more options for l
}

func a22Concurrent(t *testing.T, r a22Run) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(r.procs))
	const (
		tokenMs = 5 // the rate: one token every 5 ms
		rate    = 1000 / tokenMs
		burst   = 20
		maxDebt = 40
		nKeys   = 12
		workers = 4
		owners  = 2 // workers alone on their keys: RetryAfter
		waiters = 2
	)
	clk := limittest.NewFakeClock()
	start := time.Now().Add(2 * time.Hour).UnixMilli()
	clk.Set(start)
	mv := &a22Mover{clk: clk}
	mv.max.Store(start)
	l, err := limit.New(rate, burst, append([]limit.Option{limit.WithClock(clk), limit.WithEngine(r.eng), limit.WithSeed(r.seed), limit.WithMaxDebt(maxDebt)}, r.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := limit.New(rate, 2*burst, limit.WithClock(clk), limit.WithEngine(r.eng), limit.WithSeed(r.seed+1))
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l.Tier("half", rate/2, burst/2) // 2 tokens of l a request
	if err != nil {
		t.Fatal(err)
	}
	multi, err := limit.NewMulti(l, l2)
	if err != nil {
		t.Fatal(err)
	}
	l.Now() // the first time used: start
	l2.Now()

	keys := make([]string, nKeys+1)
	keys[0] = "hot"
	for i := 1; i <= nKeys; i++ {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	var admitted [nKeys + 1]atomic.Int64 // tokens of l admitted per key
	var calls atomic.Int64               // decisions counted in l's Stats
	var stop atomic.Bool
	errs := make(chan error, 64)
	fail := func(format string, a ...any) {
		select {
		case errs <- fmt.Errorf(format, a...):
		default:
		}
	}
	var wg sync.WaitGroup

	// Workers on the shared keys.
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(r.seed, uint64(w)))
			for !stop.Load() {
				ki := 0
				if rng.IntN(2) == 0 {
					ki = 1 + rng.IntN(nKeys)
				}
				k := keys[ki]
				now := clk.Now()
				tm := now.Add(time.Duration(rng.IntN(41)-20) * time.Millisecond) // stale, current or future
				switch rng.IntN(7) {
				case 0:
					calls.Add(1)
					if l.Allow(k) {
						admitted[ki].Add(1)
					}
				case 1:
					n := 1 + rng.IntN(4)
					calls.Add(1)
					d := l.DecideN(tm, k, n)
					if err := a22CheckDurations(d); err != nil {
						fail("DecideN(%d): %v", n, err)
					}
					if d.Allowed {
						admitted[ki].Add(int64(n))
					}
				case 2:
					n := 1 + rng.IntN(3)
					calls.Add(1)
					if l.AllowN(tm, k, n) {
						admitted[ki].Add(int64(n))
					}
				case 3:
					calls.Add(1)
					d := tier.DecideN(tm, k, 1)
					if err := a22CheckDurations(d); err != nil {
						fail("Tier.DecideN: %v", err)
					}
					if d.Allowed {
						admitted[ki].Add(2)
					}
				case 4:
					calls.Add(1)
					if tier.Allow(k) {
						admitted[ki].Add(2)
					}
				case 5:
					// A Multi's decisions count in the Multi, not in l.
					if multi.AllowN(tm, k, 1) {
						admitted[ki].Add(1)
					}
				case 6:
					calls.Add(1)
					res := l.ReserveN(tm, k, 1+rng.IntN(3))
					if res.OK() {
						if d := res.DelayFrom(now); d < 0 || d > a22Absurd {
							fail("Reservation delay %v", d)
						}
					}
					if rng.IntN(2) == 0 {
						runtime.Gosched()
					}
					res.Cancel()
					res.Cancel()
				}
				runtime.Gosched()
			}
		}()
	}

	// Owners: alone on their keys, RetryAfter never early.
	var retriesChecked atomic.Int64
	for w := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(r.seed, 100+uint64(w)))
			k := fmt.Sprintf("owner-%d", w)
			var retryAt int64 = -1
			var retryN int
			var useTier bool
			var dbgD limit.Decision
			var dbgT int64
			var dbgRot uint64
			for !stop.Load() {
				if retryAt >= 0 {
					var d limit.Decision
					var at int64
					ok := mv.stable(func(now int64) {
						at = now
						if now < retryAt {
							return
						}
						calls.Add(1)
						if useTier {
							d = tier.DecideN(time.UnixMilli(now), k, retryN)
						} else {
							d = l.DecideN(time.UnixMilli(now), k, retryN)
						}
					})
					if at < retryAt {
						runtime.Gosched()
						continue
					}
					if ok && !d.Allowed {
						fail("owner %s: retry of %d at %d, RetryAfter due at %d (%d ms later), denied: %+v; first %+v from %d (rotations %d, now %d); tier %v", k, retryN, at, retryAt, at-retryAt, d, dbgD, dbgT, dbgRot, l.Stats().Rotations, useTier)
					}
					if ok {
						retriesChecked.Add(1)
					}
					if ok || d.Allowed {
						retryAt = -1
					}
					continue
				}
				off := int64(rng.IntN(41) - 20)
				retryN = 1 + rng.IntN(8)
				useTier = rng.IntN(3) == 0
				var d limit.Decision
				var base int64
				ran := false
				ok := mv.stable(func(now int64) {
					ran = true
					tm := now + off
					base = min(tm, now) // durations count from t, or from the reading when t is ahead
					calls.Add(1)
					if useTier {
						d = tier.DecideN(time.UnixMilli(tm), k, retryN)
					} else {
						d = l.DecideN(time.UnixMilli(tm), k, retryN)
					}
				})
				if !ran { // the clock was moving: f did not run
					runtime.Gosched()
					continue
				}
				if err := a22CheckDurations(d); err != nil {
					fail("owner DecideN: %v", err)
				}
				if ok && !d.Allowed && !d.Never {
					dbgD, dbgT, dbgRot = d, base, l.Stats().Rotations
					retryAt = base + d.RetryAfter.Milliseconds()
				}
			}
		}()
	}

	// Waiters: alone on their keys, WaitN never returns before its tokens.
	var waitsChecked atomic.Int64
	for w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprintf("waiter-%d", w)
			for i := 0; !stop.Load(); i++ {
				calls.Add(1)
				l.AllowN(clk.Now(), k, burst) // usually denied: the key is in debt
				calls.Add(1)
				err := l.WaitN(context.Background(), k, 1+i%2)
				if err != nil {
					fail("WaitN: %v", err)
					return
				}
				tk := l.Tokens(k)
				// A step back during the wait no longer releases it early.
				waitsChecked.Add(1)
				if tk < 0 {
					fail("waiter %s: WaitN returned with Tokens = %v (the clock only moved forward)", k, tk)
				}
			}
		}()
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	rng := rand.New(rand.NewPCG(r.seed, 999))
	now := start
	for step := 0; ; step++ {
		select {
		case <-finished:
			goto done
		default:
		}
		if step == r.steps {
			stop.Store(true)
		}
		switch {
		case step >= r.steps:
			now = max(now, mv.max.Load()) + 1 // release the waiters
			time.Sleep(50 * time.Microsecond)
		case rng.IntN(16) == 0:
			now -= int64(1 + rng.IntN(30))
		default:
			now += int64(rng.IntN(5))
		}
		mv.set(now)
		runtime.Gosched()
	}
done:
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	maxUsed := mv.max.Load()
	bound := int64(burst) + (maxUsed-start)/tokenMs
	var total int64
	for i, k := range keys {
		a := admitted[i].Load()
		total += a
		if a > bound {
			t.Errorf("key %s: %d tokens admitted in %d ms of clock: above burst + rate x time = %d", k, a, maxUsed-start, bound)
		}
	}
	st := l.Stats()
	if got := int64(st.Admitted + st.Denied); got != calls.Load() {
		t.Errorf("Stats: Admitted %d + Denied %d = %d, want the %d decisions made", st.Admitted, st.Denied, got, calls.Load())
	}
	t.Logf("%v procs=%d: %d ms of clock, %d backward steps, hot key %d tokens (bound %d), all keys %d; %d retries, %d waits checked",
		r.eng, r.procs, maxUsed-start, mv.backs.Load()/2, admitted[0].Load(), bound, total, retriesChecked.Load(), waitsChecked.Load())
}

func TestAudit22ConcurrentSteppingClock(t *testing.T) {
	for _, eng := range engines {
		for _, procs := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%v/procs%d", eng, procs), func(t *testing.T) {
				r := a22Run{eng: eng, procs: procs, seed: 22, steps: 3000}
				a22Concurrent(t, r)
			})
		}
	}
}
