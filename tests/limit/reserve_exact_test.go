package limit_test

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// reserveExactCase is one engine configuration for the exact-delay tests.
type reserveExactCase struct {
	name string
	opts []limit.Option
}

func reserveExactCases() []reserveExactCase {
	long := limit.WithPeriod(10 * 365 * 24 * time.Hour)
	return []reserveExactCase{
		{"buckets", []limit.Option{limit.WithEngine(limit.Buckets)}},
		{"count-min", []limit.Option{limit.WithEngine(limit.CountMin), long}},
		{"count-min-conservative", []limit.Option{limit.WithEngine(limit.CountMin), long, limit.WithConservativeUpdate(true)}},
		// Two generations promoted every 40 s (the least Period for
		// MaxDebt 400 at 10/s): TestReserveDelaySequential's gaps cross
		// several promotions.
		{"count-min-rotating", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithGenerations(2), limit.WithPeriod(40 * time.Second)}},
	}
}

// raceMovingClock releases G goroutines together, each running body(g),
// while another goroutine moves clk forward 1 ms at a time, at most moves
// times, until every body has returned. The reservation tests share it.
func raceMovingClock(clk *sketchtest.FakeClock, G, moves int, body func(g int)) {
	var wg sync.WaitGroup
	var done atomic.Int32
	start := make(chan struct{})
	for g := range G {
		wg.Go(func() {
			defer done.Add(1)
			<-start
			body(g)
		})
	}
	var mover sync.WaitGroup
	mover.Go(func() {
		<-start
		for range moves {
			if done.Load() == int32(G) {
				return
			}
			clk.Advance(time.Millisecond)
			runtime.Gosched()
		}
	})
	close(start)
	wg.Wait()
	mover.Wait()
}

// TestReserveDelaysExactMovingClock: G goroutines reserve one token each
// on one key of a 10/s limiter (burst 10) while another goroutine moves
// the fake clock forward 1 ms at a time, 40 ms in all. The debt never
// drains to 0 once the first take is in (it grows by 100 ms a token, far
// faster than it drains), so in any serial order the k-th take (from 0)
// may act at t0 + (k+1-burst) x 100 ms for k >= burst, whenever it was
// taken, t0 the first take's time (which may act at once): x/time/rate's
// answer, computed under its lock. The times to act, sorted, must be
// exactly those, the earliest being t0, and the first burst within the
// 40 ms the clock moved. A delay derived from a read of the debt after
// the take, rather than from the take itself, counts racing later takes
// and fails this.
func TestReserveDelaysExactMovingClock(t *testing.T) {
	const G, per, burst, moves = 8, 25, 10, 40
	for _, procs := range []int{1, 2, 8} {
		for _, c := range reserveExactCases() {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				o := append([]limit.Option{limit.WithSeed(3), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
				l, err := limit.New(10, burst, o...)
				if err != nil {
					t.Fatal(err)
				}
				start := clk.Now()
				var mu sync.Mutex
				var acts []time.Duration
				raceMovingClock(clk, G, moves, func(int) {
					for range per {
						r := l.ReserveN(l.Now(), "k", 1)
						if !r.OK() {
							t.Error("refused below MaxDebt")
							return
						}
						d := r.DelayFrom(start)
						mu.Lock()
						acts = append(acts, d)
						mu.Unlock()
						runtime.Gosched()
					}
				})
				if t.Failed() {
					return
				}
				sort.Slice(acts, func(i, j int) bool { return acts[i] < acts[j] })
				t0 := acts[0]
				for k, d := range acts {
					if k < burst {
						if d < 0 || d > moves*time.Millisecond {
							t.Fatalf("take #%d within the burst may act at +%v, want within the %d ms the clock moved (acts %v)", k, d, moves, acts)
						}
						continue
					}
					if want := t0 + time.Duration(k+1-burst)*100*time.Millisecond; d != want {
						t.Fatalf("take #%d may act at +%v, want +%v exactly (acts %v)", k, d, want, acts)
					}
				}
			})
		}
	}
}

// TestReserveDelaySequential: serially, each reservation's Delay is what
// x/time/rate's Reserve gives at the same instants (one token per
// 100 ms, burst 5), with the clock moving between reservations by a
// varying number of ms, idle gaps that drain the debt to 0 included,
// and gaps across the rotating count-min's promotions.
func TestReserveDelaySequential(t *testing.T) {
	for _, c := range reserveExactCases() {
		t.Run(c.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 36)
			o := append([]limit.Option{limit.WithSeed(5), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
			l, err := limit.New(10, 5, o...)
			if err != nil {
				t.Fatal(err)
			}
			// A rational token bucket in ms: debt in ms of drain.
			debt := time.Duration(0)
			last := clk.Now()
			gaps := []int{0, 0, 0, 7, 0, 0, 0, 0, 13, 250, 0, 0, 1, 1, 1, 999, 0, 0, 0, 0, 0, 0, 0, 3000, 0, 0, 40, 0, 0, 0, 39990, 0, 0, 0, 5, 0, 40001, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 120000, 0, 1, 0}
			for i, g := range gaps {
				clk.Advance(time.Duration(g) * time.Millisecond)
				now := clk.Now()
				debt = max(0, debt-now.Sub(last)) + 100*time.Millisecond
				last = now
				r := l.ReserveN(now, "s", 1)
				if !r.OK() {
					t.Fatalf("#%d refused", i)
				}
				want := max(0, debt-500*time.Millisecond)
				if got := r.DelayFrom(now); got != want {
					t.Fatalf("#%d (gap %d ms): delay %v, want %v", i, g, got, want)
				}
			}
		})
	}
}

// TestDecideRemainingExactRacing: G goroutines race DecideN(t, k, 1) on
// one key at a frozen instant, strict (WithStrict(true): TryUpdate) and
// not. Remaining is "how many one-token requests the key could make
// right after this decision", so, strict, the admitted decisions'
// Remaining values, sorted, are exactly burst-1, burst-2, ..., 0, each
// once: each reads the debt its own take left, none of a take after it.
// (The strict count-min read the key again after its TryUpdate, so a
// racing take could lower it.) Not strict, only the range is checked.
func TestDecideRemainingExactRacing(t *testing.T) {
	const G, burst = 8, 40
	for _, procs := range []int{1, 2, 8} {
		for _, c := range reserveExactCases() {
			for _, strict := range []bool{true, false} {
				t.Run(fmt.Sprintf("P%d/%s/strict=%v", procs, c.name, strict), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
					clk := sketchtest.NewFakeClock()
					clk.Set(1 << 36)
					o := append([]limit.Option{limit.WithSeed(9), limit.WithClock(clk), limit.WithMaxDebt(400), limit.WithStrict(strict)}, c.opts...)
					l, err := limit.New(10, burst, o...)
					if err != nil {
						t.Fatal(err)
					}
					now := clk.Now()
					rem := a9Race(G, burst, func(int, int) limit.Decision { return l.DecideN(now, "k", 1) }, nil)
					if !strict {
						// Not strict, racing requests may pass together
						// (limit's doc, "Strict"), and an Update of the
						// count-min writes its cells one at a time, so two
						// racers may read each other's add in one cell
						// and not the other: Remaining is each one's debt
						// after its own add, within 0..burst-1, no more.
						if rem[len(rem)-1] > burst-1 || rem[0] < 0 || len(rem) < burst {
							t.Fatalf("Remaining %v: want within 0..%d, at least %d admitted", rem, burst-1, burst)
						}
						return
					}
					a9WantSeq(t, rem, burst, "racing DecideN")
				})
			}
		}
	}
}
