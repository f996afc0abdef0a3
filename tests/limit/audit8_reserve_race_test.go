package limit_test

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a8Cases: the engines, with collisions forced: a tiny count-min (2 x 3
// cells for 6 keys), conservative or not, rotating or not, and a Buckets
// engine sized for 2 keys.
func a8Cases() []reserveExactCase {
	long := limit.WithPeriod(10 * 365 * 24 * time.Hour)
	return []reserveExactCase{
		{"buckets-small", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(2, 0.5)}},
		{"count-min-tiny", []limit.Option{limit.WithSize(2, 3), long}},
		{"count-min-tiny-cu", []limit.Option{limit.WithSize(2, 3), long, limit.WithConservativeUpdate(true)}},
		{"count-min-tiny-rot", []limit.Option{limit.WithSize(2, 3), limit.WithGenerations(2), limit.WithPeriod(40 * time.Second)}},
		{"count-min-tiny-rot-cu", []limit.Option{limit.WithSize(2, 3), limit.WithGenerations(3), limit.WithPeriod(20 * time.Second), limit.WithConservativeUpdate(true)}},
	}
}

// TestAudit8ReserveNeverEarlyColliding: 8 goroutines reserve 1 token
// each on 6 keys sharing cells (10/s, burst 5, MaxDebt 400) while the
// clock moves 1 ms at a time (60 ms in all); the times t passed are the
// clock's reading, a stale one (1 s before it) or a future one (10 s
// after), which count as the high-water mark or the clock's reading. For
// every key, the k-th earliest time to act (k from 0) is no earlier than
// start + (k+1-burst) x 100 ms: its debt after k+1 takes, taken no
// earlier than start, in any serial order (collisions only add debt).
func TestAudit8ReserveNeverEarlyColliding(t *testing.T) {
	const G, per, burst, moves, nkeys = 8, 30, 5, 60, 6
	for _, procs := range []int{1, 2, 8} {
		for _, c := range a8Cases() {
			t.Run(fmt.Sprintf("P%d/%s", procs, c.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				o := append([]limit.Option{limit.WithSeed(7), limit.WithClock(clk), limit.WithMaxDebt(400)}, c.opts...)
				l, err := limit.New(10, burst, o...)
				if err != nil {
					t.Fatal(err)
				}
				start := clk.Now()
				var mu sync.Mutex
				acts := make([][]time.Time, nkeys)
				raceMovingClock(clk, G, moves, func(g int) {
					for i := range per {
						k := (g + 3*i) % nkeys
						tt := l.Now()
						switch i % 3 {
						case 1:
							tt = tt.Add(-time.Second)
						case 2:
							tt = tt.Add(10 * time.Second)
						}
						r := l.ReserveN(tt, fmt.Sprintf("key%d", k), 1)
						if !r.OK() {
							continue // MaxDebt reached through collisions: fine
						}
						act := tt.Add(r.DelayFrom(tt))
						mu.Lock()
						acts[k] = append(acts[k], act)
						mu.Unlock()
						runtime.Gosched()
					}
				})
				for k := range nkeys {
					a := acts[k]
					sort.Slice(a, func(i, j int) bool { return a[i].Before(a[j]) })
					for i, at := range a {
						if i < burst {
							if at.Before(start) {
								t.Fatalf("key%d take #%d may act at %v before start", k, i, at.Sub(start))
							}
							continue
						}
						if lb := start.Add(time.Duration(i+1-burst) * 100 * time.Millisecond); at.Before(lb) {
							t.Fatalf("key%d take #%d may act at +%v, before +%v (acts %v)", k, i, at.Sub(start), lb.Sub(start), a)
						}
					}
				}
			})
		}
	}
}
