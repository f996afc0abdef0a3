package limit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit51ConcurrentNeverPastBucketUnderSteps: workers deciding one
// key (AllowN at the clock's reading and at stale and future t, Decide,
// ReserveN with some Cancels) while another goroutine steps the clock
// back (up to a day) and forward: the tokens kept never exceed what one
// token bucket admits over the time the limiter can have used, burst +
// rate x (the latest clock reading - the start), on either engine.
// limit/doc.go: "a t before a time already used counts as that time",
// "Under contention on one key, strict decisions never admit past the
// burst on either engine".
func TestAudit51ConcurrentNeverPastBucketUnderSteps(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
			for round := range 4 {
				clk := limittest.NewFakeClock()
				start := int64(1_700_000_000_000)
				clk.Set(start)
				l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(eng), limit.WithSeed(uint64(round)), limit.WithMaxDebt(60))
				var maxClock atomic.Int64
				maxClock.Store(start)
				var kept atomic.Int64
				steps := []int64{3, 7, -5, 11, -200, 40, -86_400_000, 86_400_000, -3_600_000, 3_600_000, 450}
				var nstep atomic.Int64
				step := func() { // one worker steps the clock while the others decide
					i := nstep.Add(1)
					ms := clk.NowMillis() + steps[int(i)%len(steps)]
					clk.Set(ms)
					if ms > maxClock.Load() {
						maxClock.Store(ms)
					}
				}
				var workers sync.WaitGroup
				for w := range 4 {
					workers.Add(1)
					go func() {
						defer workers.Done()
						for i := range 2000 {
							if w == 0 && i%2 == 0 {
								step()
							}
							now := clk.Now()
							switch (i + w) % 5 {
							case 0:
								if l.AllowN(now, "k", 1) {
									kept.Add(1)
								}
							case 1:
								if l.AllowN(now.Add(-time.Duration(i%3000)*time.Millisecond), "k", 2) {
									kept.Add(2)
								}
							case 2:
								if l.AllowN(now.Add(time.Duration(i%5000)*time.Millisecond), "k", 1) {
									kept.Add(1)
								}
							case 3:
								if l.Decide("k").Allowed {
									kept.Add(1)
								}
							case 4:
								// a reservation that may act now, cancelled half the time
								r := l.ReserveN(now, "k", 1)
								if r.OK() && r.DelayFrom(now) == 0 {
									if i%2 == 0 {
										r.Cancel()
									} else {
										kept.Add(1)
									}
								} else if r.OK() {
									r.Cancel()
								}
							}
						}
					}()
				}
				workers.Wait()
				span := maxClock.Load() - start
				bound := 20 + span/100
				if round == 0 {
					t.Logf("%v: kept %d, bound %d (span %d ms)", eng, kept.Load(), bound, span)
				}
				if k := kept.Load(); k > bound {
					t.Errorf("%v round %d: kept %d tokens, more than burst 20 + %d ms x 10/s = %d", eng, round, k, span, bound)
				}
			}
		}
	})
}
