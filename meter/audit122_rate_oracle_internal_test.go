package meter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a122Ev is one completed event: n at whole millisecond t (a time the
// event's own time is at or after: Observe reads the clock after t was
// read, and the Timebase counts an earlier t as a later one).
type a122Ev struct {
	key string
	t   int64
	n   float64
}

// a122Truth returns the exact decayed count of key at tr under Rate's
// law (each event's n decays as exp(-age/window), ages in whole ms),
// over the events at or after lo only: those the primary must hold.
// With grid deadlines and G generations, an event at time >= D - G x P
// (D the current set's deadline) ran on a set whose deadline is at
// least D - (G-1) x P, which already holds the current primary: every
// promotion of k Periods that builds a generation fresh leaves the
// sets before it with deadlines <= D - G x P.
func a122Truth(evs []a122Ev, key string, tr, lo int64, wms float64) float64 {
	var s float64
	for _, e := range evs {
		if e.key == key && e.t >= lo {
			s += e.n * math.Exp(-float64(tr-e.t)/wms)
		}
	}
	return s
}

// a122Bound returns the lowest time whose events the current primary of
// r must hold (see a122Truth).
func a122Bound(r *Rate) int64 {
	cur := r.rot().Current()
	return cur.Deadline - int64(len(cur.Gens))*core.PeriodMillis(r.rot().Config().Period)
}

// TestAudit122RateConcurrentOracle (regression, passes): meter/doc.go:
// "errors are one-sided: a collision can only raise a Rate ... never the
// reverse"; Rate's doc: "The sketch only errs upward: collisions (Min of
// L cells) and float32 rounding (up) can raise an estimate, never lower
// it, except the rotation term". Interleaving: W goroutines Observe and
// ObserveAt (n in {1, 0.75, 2.5, 7}) six keys on a sketch whose keys
// collide (WithSize(2, 1): every key on the same two cells;
// WithSize(1, 4)), at GOMAXPROCS 1, 2, 4, 8, the fake clock frozen in
// some phases and stepped by the observers themselves in others, each
// stepping phase starting 2 ms before a deadline so that promotions run
// while goroutines observe (PeriodWindows 1 and 1.5). After each phase
// every key's count is checked against the exact decayed sum of the
// events the primary must hold (a122Truth). Observation: never below.
func TestAudit122RateConcurrentOracle(t *testing.T) {
	const window = 10 * time.Millisecond
	wms := float64(window / time.Millisecond)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	ns := []float64{1, 0.75, 2.5, 7}
	ops := testsize.Sample(300, 80, 20)
	phases := testsize.Sample(8, 4, 2)
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for _, procs := range []int{1, 2, 4, 8} {
		for _, sz := range [][2]uint32{{2, 1}, {1, 4}, {3, 32}} {
			for _, pw := range []float64{1, 1.5} {
				t.Run(fmt.Sprintf("procs=%d/size=%dx%d/pw=%v", procs, sz[0], sz[1], pw), func(t *testing.T) {
					runtime.GOMAXPROCS(procs)
					defer runtime.GOMAXPROCS(old)
					clk := sketchtest.NewFakeClock()
					clk.Set(1_000_000)
					r, err := NewRate(window, WithClock(clk), WithSize(sz[0], sz[1]), WithSeed(122), WithPeriodWindows(pw))
					if err != nil {
						t.Fatal(err)
					}
					var all []a122Ev
					promos := r.rot().Stats().Promotions
					for ph := range phases {
						step := ph%2 == 0
						if step {
							clk.Set(r.rot().Current().Deadline - 2)
						} else {
							clk.Advance(3 * time.Millisecond)
						}
						const workers = 4
						logs := make([][]a122Ev, workers)
						var wg sync.WaitGroup
						for w := range workers {
							wg.Add(1)
							go func() {
								defer wg.Done()
								rnd := rand.New(rand.NewPCG(uint64(ph), uint64(w)))
								log := make([]a122Ev, 0, ops)
								for range ops {
									k := keys[rnd.IntN(len(keys))]
									if rnd.IntN(3) == 0 {
										t0 := clk.NowMillis()
										r.Observe(k)
										log = append(log, a122Ev{k, t0, 1})
									} else {
										n := ns[rnd.IntN(len(ns))]
										tt := clk.Now()
										r.ObserveAt(tt, k, n)
										log = append(log, a122Ev{k, tt.UnixMilli(), n})
									}
									if step && rnd.IntN(6) == 0 {
										clk.Advance(time.Millisecond)
									}
									if rnd.IntN(4) == 0 {
										runtime.Gosched()
									}
								}
								logs[w] = log
							}()
						}
						wg.Wait()
						for _, l := range logs {
							all = append(all, l...)
						}
						for _, lag := range []int64{0, 1, 4} {
							tr := clk.NowMillis() + lag
							for _, k := range keys {
								got := r.rot().QueryStringAt(time.UnixMilli(tr), k)
								want := a122Truth(all, k, tr, a122Bound(r), wms)
								if got < want {
									t.Fatalf("phase %d (step %v), read at %d: key %q reads %.9g, below the exact decayed count %.9g of the events the primary holds (ratio %.3g)",
										ph, step, tr, k, got, want, got/want)
								}
								if ps := r.PerSecondAt(time.UnixMilli(tr), k); ps < want/window.Seconds()*(1-1e-12) {
									t.Fatalf("phase %d: PerSecondAt(%q) = %.9g below truth %.9g/s", ph, k, ps, want/window.Seconds())
								}
							}
						}
					}
					if r.rot().Stats().Promotions == promos {
						t.Fatalf("no promotion happened")
					}
				})
			}
		}
	}
}
