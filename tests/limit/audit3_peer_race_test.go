package limit_test

// Audit 3: package limit under contention on one key, as x/time/rate's
// mutex serializes it. Strict mode (the default) "decides with the
// sketch's TryUpdate, exact under contention" (WithStrict); ReserveN
// "always decides with TryUpdate (strict), so queued reservations never
// exceed MaxDebt", and its time to act "comes from a read of the key
// after the debit, so under concurrency it may count reservations of the
// key made just after this one: later than x/time/rate's (whose mutex
// orders them), never earlier" (docs/readings.md, parity table).

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"golang.org/x/time/rate"
)

// a3race runs f(i) on n goroutines released together.
func a3race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

func a3procs(t *testing.T, f func(t *testing.T)) {
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("procs%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f(t)
		})
	}
}

// TestAudit3PeerRaceAllow: x/time/rate's TestSimultaneousRequests (1/s,
// burst 5, 15 racers: exactly 5 admitted) and larger: goroutines racing
// AllowN(t, key, 1) on one key on a frozen clock admit exactly burst,
// on both engines, at GOMAXPROCS 1, 2 and 8; and the key then owes
// exactly its burst (TokensAt 0), as x/time/rate's bucket.
func TestAudit3PeerRaceAllow(t *testing.T) {
	a3procs(t, func(t *testing.T) {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			for _, c := range []struct {
				lim          limit.Limit
				burst, racer int
			}{{1, 5, 15}, {10, 20, 64}, {1000, 37, 48}, {limit.Every(10 * time.Second), 3, 40}} {
				clk := limittest.NewFakeClock()
				clk.SetTime(a3T0)
				l := limit.MustNew(c.lim, c.burst, limit.WithClock(clk), limit.WithEngine(e), limit.WithSeed(3))
				x := rate.NewLimiter(rate.Limit(c.lim), c.burst)
				now := clk.Now()
				for round := range 20 {
					key := fmt.Sprintf("k%d", round)
					var ours, theirs atomic.Int64
					a3race(c.racer, func(int) {
						if l.AllowN(now, key, 1) {
							ours.Add(1)
						}
						if round == 0 && x.AllowN(now, 1) {
							theirs.Add(1)
						}
					})
					if ours.Load() != int64(c.burst) {
						t.Fatalf("%v %v burst %d, %d racers: admitted %d", e, c.lim, c.burst, c.racer, ours.Load())
					}
					if round == 0 && theirs.Load() != int64(c.burst) {
						t.Fatalf("x/time/rate admitted %d", theirs.Load())
					}
					if tok := l.TokensAt(now, key); tok != 0 {
						t.Fatalf("%v %v: after the race %v tokens, want 0", e, c.lim, tok)
					}
				}
			}
		}
	})
}

// TestAudit3PeerRaceReserve: goroutines racing ReserveN(t, key, 1) on one
// key on a frozen clock: exactly MaxDebt of them are OK (the serial
// bucket's queue bound), the key then owes exactly MaxDebt, every time to
// act is one the serial bucket hands out, the sorted times to act are
// each at or after the serial bucket's (never earlier), and the last is
// the serial bucket's last; and, since each Delay is derived from the
// debt its own take left (ReserveN's doc), the sorted times to act are
// exactly the serial bucket's.
func TestAudit3PeerRaceReserve(t *testing.T) {
	var rounds, equal atomic.Int64
	a3procs(t, func(t *testing.T) {
		for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
			for _, c := range []struct {
				lim          limit.Limit
				burst, racer int
				maxDebt      int
			}{{10, 4, 20, 12}, {1000, 16, 48, 32}, {limit.Every(3 * time.Second), 2, 16, 8}, {7, 3, 30, 20}} {
				clk := limittest.NewFakeClock()
				clk.SetTime(a3T0)
				l := limit.MustNew(c.lim, c.burst, limit.WithClock(clk), limit.WithEngine(e),
					limit.WithSeed(5), limit.WithMaxDebt(float64(c.maxDebt)))
				now := clk.Now()
				// The serial bucket: x/time/rate, capped at MaxDebt, its
				// delays rounded up to the millisecond (never early), past
				// its float64 ns rounding.
				x := rate.NewLimiter(rate.Limit(c.lim), c.burst)
				var serial []time.Duration
				for range min(c.racer, c.maxDebt) {
					d := x.ReserveN(now, 1).DelayFrom(now)
					if d > 0 {
						d = (d - time.Microsecond + time.Millisecond - 1).Truncate(time.Millisecond)
					}
					serial = append(serial, d)
				}
				for round := range 15 {
					key := fmt.Sprintf("r%d", round)
					got := make([]time.Duration, c.racer)
					oks := make([]bool, c.racer)
					a3race(c.racer, func(i int) {
						r := l.ReserveN(now, key, 1)
						oks[i], got[i] = r.OK(), r.DelayFrom(now)
					})
					var delays []time.Duration
					for i := range got {
						if oks[i] {
							delays = append(delays, got[i])
						} else if got[i] != limit.InfDuration {
							t.Fatalf("a refused reservation's delay %v", got[i])
						}
					}
					slices.Sort(delays)
					name := fmt.Sprintf("%v %v burst %d MaxDebt %d, %d racers", e, c.lim, c.burst, c.maxDebt, c.racer)
					if len(delays) != len(serial) {
						t.Fatalf("%s: %d OK, want %d", name, len(delays), len(serial))
					}
					if tok := l.TokensAt(now, key); tok != float64(c.burst-len(serial)) {
						t.Fatalf("%s: key has %v tokens after the race, want %d", name, tok, c.burst-len(serial))
					}
					for i, d := range delays {
						if d < serial[i] {
							t.Fatalf("%s: sorted delay %d is %v, before the serial bucket's %v\n got %v\nwant %v", name, i, d, serial[i], delays, serial)
						}
						if !slices.Contains(serial, d) {
							t.Fatalf("%s: delay %v is not one the serial bucket gives\n got %v\nwant %v", name, d, delays, serial)
						}
					}
					if delays[len(delays)-1] != serial[len(serial)-1] {
						t.Fatalf("%s: last delay %v, serial %v", name, delays[len(delays)-1], serial[len(serial)-1])
					}
					rounds.Add(1)
					if !slices.Equal(delays, serial) {
						t.Fatalf("%s: racers' delays are not the serial bucket's\n got %v\nwant %v", name, delays, serial)
					}
					equal.Add(1)
				}
			}
		}
	})
	t.Logf("racing reservations handed out exactly the serial delays in %d of %d rounds", equal.Load(), rounds.Load())
}
