package grudgetest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Sub-millisecond Advances add up, as a clock that "moves only when told"
// and grudge's FakeClock (docs/migrating.md: grudgetest "same") do: ten
// Advance(100µs) move the clock by 1 ms, and a sketch sees that millisecond.
func TestAudit30FixedFakeClockSubMillisecondAdvanceLost(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	start := clk.Now()
	for range 10 {
		clk.Advance(100 * time.Microsecond)
	}
	moved := clk.Now().Sub(start)
	s, _ := grudge.New(grudge.Config{Hi: 10, Decay: grudge.Linear(1000), Clock: clk}) // 1 per ms
	k := []byte("k")
	s.Update(k, 5)
	for range 20 {
		clk.Advance(100 * time.Microsecond) // 2 ms in all
	}
	q := s.Query(k)
	if moved != time.Millisecond || q != 3 {
		t.Errorf("10 x Advance(100µs): clock moved %v, want 1ms; Linear(1000/s) score 5 after 20 x 100µs = %v, want 3 "+
			"(docs/migrating.md: grudgetest NewFakeClock() (Now, Advance, Set) \"same\" as grudge; a FakeClock \"moves only when told\")", moved, q)
	}
}

// Advance, Set and Now race safely (-race) at several GOMAXPROCS, and
// whole-millisecond Advances add up exactly.
func TestAudit30FakeClockConcurrent(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := grudgetest.NewFakeClock()
		s, _ := grudge.New(grudge.Config{Hi: 1e6, Decay: grudge.Linear(1), Clock: clk})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 500 {
					clk.Advance(time.Millisecond)
					_ = clk.Now()
					s.Update([]byte("k"), 1)
				}
			})
		}
		wg.Wait()
		if got := clk.Now(); !got.Equal(time.UnixMilli(2000)) {
			t.Errorf("after 2000 x Advance(1ms): %v, want %v", got, time.UnixMilli(2000))
		}
		clk.Set(time.UnixMilli(5))
		if got := clk.NowMillis(); got != 5 {
			t.Errorf("Set(5ms): NowMillis %d", got)
		}
	})
}

// Tick with no rotator attached returns (within its documented second) and
// rotates nothing; a FakeTicker stopped by Close makes Tick a no-op.
func TestAudit30TickUnattached(t *testing.T) {
	tk := grudgetest.NewFakeTicker()
	tk.Tick() // returns after at most a second
	if tk.Stopped() {
		t.Errorf("Stopped before Stop")
	}
	tk.Stop()
	tk.Stop()
	if !tk.Stopped() {
		t.Errorf("not Stopped after Stop")
	}
	tk.Tick()
}
