package meter

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a118Limit bounds every wait of these tests in real time (a hang is a
// failure, never a timing assertion).
const a118Limit = 20 * time.Second

// a118Builds returns a hasher factory that reports on built every
// generation built while armed is set (a promotion's build), and a
// switch to arm it.
func a118Builds(built chan<- struct{}) (sketch.HasherFactory, *atomic.Bool) {
	var armed atomic.Bool
	xx := sketch.XXH3()
	return func(seed uint64) sketch.Hasher {
		if armed.Load() {
			select {
			case built <- struct{}{}:
			default:
			}
		}
		return xx(seed)
	}, &armed
}

// TestAudit118RotNoveltyHeldAdmissionAcrossPromotion (regression, passes):
// Novelty's doc: "of N goroutines racing Seen on a key not seen within T,
// exactly one is told it is new"; docs/design.md, "TryUpdate across
// promotions": "every admission of the old primary, increments in every
// younger generation included, completes before the new primary is
// published". Interleaving: A = Seen(k) at D-1 (D the deadline) is
// admitted by the primary and stopped before its level-0 CAS (stripe
// held); from another goroutine the clock crosses D (by one Period and,
// in a second case, by two: every generation rebuilt) and B = Seen(k)
// claims the promotion; A resumes only once B's build has started
// (B is then closing A's stripe). Observation wanted: A told new, B
// told seen, and k seen afterwards; for the jump of two Periods B
// decides on a set that keeps none of A's generations: a jump of two
// Periods makes A's mark older than T, so B may be told new too (that
// is the rotation's window, not a double answer within T), but k must
// then be seen.
func TestAudit118RotNoveltyHeldAdmissionAcrossPromotion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		periods int64
	}{{"one-period", 1}, {"two-periods", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			built := make(chan struct{}, 1)
			hf, armed := a118Builds(built)
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000)
			n, err := NewNovelty(10*time.Millisecond, WithClock(clk), WithSize(2, 64), WithSeed(118),
				WithPeriodWindows(1), WithHasher(hf), WithPrefetch(false))
			if err != nil {
				t.Fatal(err)
			}
			cur := n.rot().Current()
			d := cur.Deadline
			clk.Set(d - 1)
			p := cur.Gens[0]
			armed.Store(true)
			bRes := make(chan bool, 1)
			var fired atomic.Bool
			core.SetHooks(p, core.Hooks{BeforeCAS: func(level uint32) {
				if level != 0 || fired.Swap(true) {
					return
				}
				go func() {
					clk.Set(d + (tc.periods-1)*10)
					bRes <- n.Seen("k")
				}()
				select {
				case <-built:
				case <-time.After(a118Limit):
					t.Error("no promotion started while A held its stripe")
				}
				for range 200 {
					runtime.Gosched()
				}
			}})
			aSeen := n.Seen("k")
			var bSeen bool
			select {
			case bSeen = <-bRes:
			case <-time.After(a118Limit):
				t.Fatal("B never returned: the promotion waits for A for ever")
			}
			core.SetHooks(p, core.Hooks{})
			if !fired.Load() {
				t.Fatal("the interleaving did not happen")
			}
			if aSeen {
				t.Errorf("A, the first sighting of k, was told seen")
			}
			if tc.periods == 1 && !bSeen {
				t.Errorf("B, racing A across a promotion of one Period, was told new too: two first sightings of k within T")
			}
			if !n.Contains("k") {
				t.Errorf("k is not seen after both sightings")
			}
			if n.rot().Current().Gens[0] == p {
				t.Errorf("no promotion happened")
			}
		})
	}
}

// TestAudit118RotNoveltyStalledLoadAcrossPromotion (regression, passes):
// "a call that finds its stripe closed ... decides again on the current
// set; it writes nothing before" (docs/design.md, "TryUpdate across
// promotions"). Interleaving: A = Seen(k) at D-1 has read its stripe's
// seq in the primary and is stopped before loading the cells (Load
// hook); meanwhile the clock crosses D by one or two Periods and B =
// Seen(k) promotes (A holds nothing: the close goes through) and marks
// k in the new set only, told new. A resumes on the retired primary,
// which holds no mark, and would admit: it must find the stripe closed,
// decide again on the new set, and be told seen. Exactly one new.
func TestAudit118RotNoveltyStalledLoadAcrossPromotion(t *testing.T) {
	for _, periods := range []int64{1, 2, 5} {
		for _, at := range []bool{false, true} {
			t.Run(fmt.Sprintf("periods=%d/at=%v", periods, at), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000)
				n, err := NewNovelty(10*time.Millisecond, WithClock(clk), WithSize(2, 64), WithSeed(118), WithPeriodWindows(1))
				if err != nil {
					t.Fatal(err)
				}
				cur := n.rot().Current()
				d := cur.Deadline
				clk.Set(d - 1)
				tA := clk.Now()
				p := cur.Gens[0]
				var fired, bSeen bool
				core.SetHooks(p, core.Hooks{Load: func(uint32) {
					if fired {
						return
					}
					fired = true
					clk.Set(d + (periods-1)*10)
					bSeen = n.Seen("k")
				}})
				var aSeen bool
				if at {
					aSeen = n.SeenAt(tA, "k")
				} else {
					aSeen = n.Seen("k")
				}
				core.SetHooks(p, core.Hooks{})
				if !fired {
					t.Fatal("the interleaving did not happen")
				}
				if bSeen {
					t.Errorf("B, the first call to decide, was told seen")
				}
				if !aSeen {
					t.Errorf("A, stalled on the retired primary, was told new after B's first sighting: two new answers for k within T")
				}
				if !n.Contains("k") {
					t.Errorf("k not seen after both sightings")
				}
			})
		}
	}
}

// TestAudit118RotRateObserveStalledAcrossPromotion (regression, passes):
// Rate's doc: "collisions ... and float32 rounding (up) can raise an
// estimate, never lower it, except the rotation term"; package rotator,
// "Operations during a promotion": only an operation whose time is
// before the deadline, in flight during the promotion, finishes on the
// old set, and the generations that follow keep its write. Interleaving:
// Observe(k) x n at D-1 stopped before loading the primary's cells;
// meanwhile the clock crosses D (one Period) and a read promotes. After
// the Observe returns, the new primary (the old younger generation)
// must hold it: PerSecond at D reads at least n x exp(-1 ms/window) /
// window.
func TestAudit118RotRateObserveStalledAcrossPromotion(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000)
	r, err := NewRate(time.Second, WithClock(clk), WithSize(2, 64), WithSeed(118), WithPeriodWindows(1))
	if err != nil {
		t.Fatal(err)
	}
	cur := r.rot().Current()
	d := cur.Deadline
	clk.Set(d - 1)
	p := cur.Gens[0]
	fired := false
	var during float64
	core.SetHooks(p, core.Hooks{Load: func(uint32) {
		if fired {
			return
		}
		fired = true
		clk.Set(d)
		during = r.PerSecond("other") // promotes
	}})
	r.ObserveAt(clk.Now(), "k", 100)
	core.SetHooks(p, core.Hooks{})
	if !fired || during != 0 || r.rot().Current().Gens[0] == p {
		t.Fatal("the interleaving did not happen")
	}
	got := r.PerSecond("k")
	// 100 events 1 ms old on a 1 s window: 100 x exp(-0.001) = 99.9.
	if got < 99.9 {
		t.Errorf("PerSecond after a promotion during the Observe = %v, want >= 99.9: the promotion lost the in-flight events", got)
	}
}

// TestAudit118RotNoveltyRaceAcrossDeadlines (regression, passes):
// Novelty's "exactly one of racing callers is told a key is new" with
// promotions mid-race: goroutines race Seen on fresh keys while another
// steps the fake clock across Period deadlines (Period = T = 4 ms), so
// promotions land
// inside the race; the race spans at most 3 ms, less than T. Per key
// exactly one caller is told new (M = 4096, few keys: no false
// positive).
func TestAudit118RotNoveltyRaceAcrossDeadlines(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(100_000)
	n, err := NewNovelty(4*time.Millisecond, WithClock(clk), WithSize(3, 4096), WithSeed(118), WithPeriodWindows(1))
	if err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 6, 4
	rounds := testsize.Sample(300, 60, 40)
	bad := 0
	for round := range rounds {
		start := clk.NowMillis()
		var fresh [keys]atomic.Int32
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var ticks sync.WaitGroup
		ticks.Go(func() {
			for range 3 {
				select {
				case <-stop:
					return
				default:
				}
				clk.Advance(time.Millisecond)
				runtime.Gosched()
			}
		})
		for g := range keys * perKey {
			wg.Go(func() {
				if !n.Seen(fmt.Sprintf("r%d-k%d", round, g%keys)) {
					fresh[g%keys].Add(1)
				}
			})
		}
		wg.Wait()
		close(stop)
		ticks.Wait()
		if clk.NowMillis()-start > 3 { // the race may have spanned more than T
			clk.Advance(10 * time.Millisecond)
			continue
		}
		for i := range fresh {
			if f := fresh[i].Load(); f > 1 || f == 0 {
				bad++
				if bad < 5 {
					t.Errorf("round %d key %d: %d callers told new, want 1", round, i, f)
				}
			}
		}
		clk.Advance(10 * time.Millisecond)
	}
	if bad > 0 {
		t.Errorf("%d keys of %d rounds broke exactly-one", bad, rounds)
	}
}
