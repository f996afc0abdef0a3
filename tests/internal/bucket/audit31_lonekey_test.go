package bucket_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit31LoneKeyLaggingTimesNoPhantom: a key alone, x, asked for
// 1/8 ms of drain at a time (never near its limit), beside 4 other keys
// of its two lines hammered near their limits, 8 goroutines passing
// times t from a shared counter, one call in four lagged by up to three
// times the slack (so writers' times differ by more than the slack and
// long moves are common; the Timebase lifts a t below its high-water
// mark to it, so the lags that remain are those of racing callers, as in
// TestAudit8LaggingTimeHighWater), at GOMAXPROCS 2, 4 and 8. No reading of x may
// be a phantom (above limit/2): commit c761bf5 and docs/design.md,
// section 8 ("a write prepared before the move either fails its CAS or
// stores a stamp that reads correctly in every window to come", doc.go);
// x's denials are bounded at 2% of its calls (the racing-insert and
// cleared-candidate cases design.md keeps). The other keys admit at most
// limit + rate x (span of times) and read at the end at least admitted -
// that drain.
func TestAudit31LoneKeyLaggingTimesNoPhantom(t *testing.T) {
	for _, law := range []bucket.Law{bucket.Linear(2000, 60), bucket.Linear(1000, 60), bucket.Linear(1e6, 60000)} {
		q, err := bucket.QuantumOf(law)
		if err != nil {
			t.Fatal(err)
		}
		slackMs := max(int64(time.Duration(1<<16-1-q.Span)*q.Tick/time.Millisecond), 1)
		for _, procs := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%vx%v/P%d", law.Rate, law.Max, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				var den, ph, calls int64
				var phLoads, denLoads []float64
				for rep := range reps(3, 1) {
					clk := sketchtest.NewFakeClock()
					const t0ms = 1_000_000
					clk.Set(t0ms)
					e := newTest(t, 2, law, clk)
					clk.Advance(time.Hour) // times passed are below the clock's reading: none is capped
					_, _, xfp := e.Locate("x")
					var others []string
					for _, k := range distinctKeys(e, 6, fmt.Sprintf("a31lk%d-", rep)) {
						if _, _, f := e.Locate(k); f != xfp && len(others) < 4 {
							others = append(others, k)
						}
					}
					limit := law.Max / 2
					nx := law.Rate / 1000 / 8
					var ctr, maxMs atomic.Int64
					var xDen, xPh, xCalls atomic.Int64
					adm := make([]atomic.Int64, len(others))
					phCh := make(chan float64, 64)
					denCh := make(chan float64, 64)
					race(8, 2000, func(g, i int) bool {
						ms := ctr.Add(1) / 2
						for {
							m := maxMs.Load()
							if ms <= m || maxMs.CompareAndSwap(m, ms) {
								break
							}
						}
						if rand.IntN(4) == 0 {
							ms -= rand.Int64N(3*slackMs + 1)
						}
						at := time.UnixMilli(t0ms + ms)
						switch r := rand.IntN(8); {
						case r < 3:
							k := rand.IntN(len(others))
							if e.TryUpdateAt(at, others[k], 1, limit) {
								adm[k].Add(1)
							}
						case r < 6:
							xCalls.Add(1)
							if ok, v := e.TryUpdateAndQueryAt(at, "x", nx, limit); !ok {
								xDen.Add(1)
								select {
								case denCh <- v:
								default:
								}
								if v > limit/2 {
									xPh.Add(1)
									select {
									case phCh <- v:
									default:
									}
								}
							}
						default:
							if v := e.QueryAt(at, "x"); v > limit/2 {
								xPh.Add(1)
								select {
								case phCh <- v:
								default:
								}
							}
						}
						return false
					})
					close(phCh)
					close(denCh)
					for v := range denCh {
						denLoads = append(denLoads, v)
					}
					for v := range phCh {
						phLoads = append(phLoads, v)
					}
					drained := float64(maxMs.Load()+1) * law.Rate / 1000
					for k := range others {
						a := float64(adm[k].Load())
						if a > limit+drained+1e-6 {
							t.Fatalf("rep %d: %s admitted %v > limit %v + drained %v", rep, others[k], a, limit, drained)
						}
						if v := e.QueryAt(time.UnixMilli(t0ms+maxMs.Load()), others[k]); v < a-drained-1e-6 {
							t.Fatalf("rep %d: %s reads %v < admitted %v - drained %v", rep, others[k], v, a, drained)
						}
					}
					den += xDen.Load()
					ph += xPh.Load()
					calls += xCalls.Load()
				}
				t.Logf("x alone: %d denials (loads returned %v), %d phantom readings (loads %v) in %d calls", den, denLoads, ph, phLoads, calls)
				if ph > 0 || den*50 > calls {
					t.Errorf("x, never near its limit (asked %v a call, limit %v): %d phantom readings above limit/2 (loads %v; want 0: a write prepared before a move \"either fails its CAS or stores a stamp that reads correctly in every window to come\", doc.go), %d denials (bound 2%% of %d calls)", law.Rate/1000/8, law.Max/2, ph, phLoads, den, calls)
				}
			})
		}
	}
}
