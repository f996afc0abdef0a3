package core_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestReplayWriteDuringPromotion holds the operation that claimed a
// promotion inside its successor's build (a HasherFactory that blocks)
// while another operation, whose time is also past the deadline, writes a
// key. That operation must wait for the publish and write the successor.
// Before the fix it wrote the retiring set and returned at once:
//   - after an idle of N periods or more (k >= N), the successor keeps none
//     of the retiring generations, so the write was gone at once (audit 29:
//     two Novelty callers told "new", eight racing Observes counted as one);
//   - after one period, the newborn generation missed it, so it was gone
//     once the newborn became the primary, within the window.
func TestReplayWriteDuringPromotion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		idle    time.Duration
		readAt1 bool // the write must also survive one more period (k < N: the newborn holds it)
	}{
		{"k=1", time.Second, true},
		{"k=3>=N", 3 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_000_000)
			var block atomic.Bool
			entered, release := make(chan struct{}), make(chan struct{})
			base := core.XXH3()
			hf := func(seed uint64) core.Hasher {
				if block.CompareAndSwap(true, false) {
					close(entered)
					<-release
				}
				return base(seed)
			}
			r, err := core.NewRotator(core.RotatorConfig{
				Sketch:      core.Config{Levels: 2, CellsPerLevel: 64, Hi: 100, Hasher: hf, Clock: clk},
				Generations: 2,
				Period:      time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(tc.idle)
			block.Store(true)
			claimer := make(chan struct{})
			go func() { r.UpdateString("a", 1); close(claimer) }()
			<-entered // the claimer is building the successor
			writer := make(chan struct{})
			go func() { r.UpdateString("b", 1); close(writer) }()
			select {
			case <-writer:
				t.Error("an Update past the deadline returned while the promotion was being built (it wrote the retiring set)")
			case <-time.After(300 * time.Millisecond):
			}
			close(release)
			<-claimer
			<-writer
			for _, k := range []string{"a", "b"} {
				if got := r.QueryString(k); got != 1 {
					t.Errorf("after the promotion, %s reads %v; want 1", k, got)
				}
			}
			if tc.readAt1 {
				clk.Advance(time.Second) // the newborn becomes the primary
				for _, k := range []string{"a", "b"} {
					if got := r.QueryString(k); got != 1 {
						t.Errorf("one period later (the newborn is the primary), %s reads %v; want 1", k, got)
					}
				}
			}
		})
	}
}

// TestPeriodMillisRoundsUpWithoutWrapping: a Period rounds up to whole
// ms, and one within a millisecond of MaxInt64 ns stays positive (it
// wrapped to a negative period, which a saturating add's own overflow
// then turned into "never").
func TestPeriodMillisRoundsUpWithoutWrapping(t *testing.T) {
	for _, c := range []struct {
		p    time.Duration
		want int64
	}{
		{time.Millisecond, 1}, {2900 * time.Microsecond, 3}, {time.Second, 1000},
		{math.MaxInt64, math.MaxInt64/int64(time.Millisecond) + 1},
		{math.MaxInt64 - 1e6, math.MaxInt64 / int64(time.Millisecond)},
	} {
		if got := core.PeriodMillis(c.p); got != c.want {
			t.Errorf("PeriodMillis(%d) = %d, want %d", c.p, got, c.want)
		}
	}
}
