package grudge_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// With a Ticker: rotation follows ticks exactly; a write survives
// Generations-1 ticks and is gone after Generations; time alone never
// rotates; Close is idempotent and stops rotation.
func TestAudit30TickerRotation(t *testing.T) {
	for _, gens := range []uint32{2, 3, 5} {
		clk := grudgetest.NewFakeClock()
		tk := grudgetest.NewFakeTicker()
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Hi: 100, Clock: clk},
			Generations: gens, Period: time.Second, Ticker: tk,
		})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		r.Update(k, 5)
		clk.Advance(time.Hour) // time alone does not rotate a ticked rotator
		if got := r.Rotations(); got != 0 {
			t.Errorf("gens=%d: Rotations after an hour without ticks = %d, want 0", gens, got)
		}
		for i := uint32(1); i < gens; i++ {
			tk.Tick()
			if got := r.Rotations(); got != int64(i) {
				t.Errorf("gens=%d: Rotations after %d ticks = %d", gens, i, got)
			}
			if got := r.Query(k); got != 5 {
				t.Errorf("gens=%d: after %d ticks Query = %v, want 5", gens, i, got)
			}
		}
		tk.Tick()
		if got := r.Query(k); got != 0 {
			t.Errorf("gens=%d: after %d ticks Query = %v, want 0", gens, gens, got)
		}
		r.Close()
		r.Close()
		before := r.Rotations()
		tk.Tick() // after Stop: does nothing
		if got := r.Rotations(); got != before {
			t.Errorf("Tick after Close rotated: %d -> %d", before, got)
		}
		// Operations keep working after Close.
		r.Update(k, 1)
		if got := r.Query(k); got != 1 {
			t.Errorf("after Close: %v, want 1", got)
		}
	}
}

// Concurrent Close calls and Ticks: no deadlock, no leak (goleak in
// TestMain), exactly the ticks before Close rotate.
func TestAudit30ConcurrentCloseAndTicks(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for range 5 {
			tk := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Ticker: tk})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				tk.Tick()
			}
			if got := r.Rotations(); got != 3 {
				t.Errorf("Rotations = %d, want 3", got)
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(r.Close)
				wg.Go(tk.Tick)
				wg.Go(func() { r.Update([]byte("x"), 1) })
			}
			wg.Wait()
			n := r.Rotations()
			if n < 3 || n > 7 {
				t.Errorf("Rotations = %d, want 3..7", n)
			}
			tk.Tick()
			if got := r.Rotations(); got != n {
				t.Errorf("rotated after Close: %d -> %d", n, got)
			}
		}
	})
}

// Without a Ticker: rotation every Period, lazily; a write at the end of a
// period lives until Generations periods after that period began, never
// longer than Generations x Period after it.
func TestAudit30LazyRotationLifetime(t *testing.T) {
	const P = 10 * time.Second
	for _, gens := range []uint32{2, 3, 4} {
		clk := grudgetest.NewFakeClock()
		r, err := grudge.NewRotator(grudge.RotatorConfig{
			Sketch:      grudge.Config{Hi: 100, Clock: clk},
			Generations: gens, Period: P,
		})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		clk.Advance(P - time.Millisecond)
		r.Update(k, 7)
		last := clk.Now()
		// Walk millisecond by millisecond around each boundary.
		for i := 1; i <= int(gens); i++ {
			clk.Set(time.UnixMilli(0).Add(time.Duration(i)*P - time.Millisecond))
			if got := r.Query(k); got != 7 && i < int(gens) {
				t.Errorf("gens=%d: just before boundary %d: %v, want 7", gens, i, got)
			}
			if got := r.Rotations(); got != int64(i-1) {
				t.Errorf("gens=%d: Rotations just before boundary %d = %d", gens, i, got)
			}
			clk.Set(time.UnixMilli(0).Add(time.Duration(i) * P))
			got := r.Query(k)
			if i < int(gens) && got != 7 {
				t.Errorf("gens=%d: at boundary %d: %v, want 7", gens, i, got)
			}
			if i == int(gens) && got != 0 {
				t.Errorf("gens=%d: at boundary %d: %v, want 0", gens, i, got)
			}
			if got := r.Rotations(); got != int64(i) {
				t.Errorf("gens=%d: Rotations at boundary %d = %d", gens, i, got)
			}
			if got != 0 && clk.Now().Sub(last) > time.Duration(gens)*P {
				t.Errorf("gens=%d: score alive %v after its write, above %v", gens, clk.Now().Sub(last), time.Duration(gens)*P)
			}
		}
		r.Close() // no-op for a lazy rotator
	}
}

// A clock jump over k periods counts k rotations, without taking time
// proportional to k (Period 1ms, a jump of ten years).
func TestAudit30LazyHugeJump(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch: grudge.Config{Hi: 100, Clock: clk}, Generations: 3, Period: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	r.Update(k, 1)
	done := make(chan int64, 1)
	jump := 10 * 365 * 24 * time.Hour
	go func() {
		clk.Advance(jump)
		done <- r.Rotations()
	}()
	select {
	case n := <-done:
		if want := int64(jump / time.Millisecond); n != want {
			t.Errorf("Rotations after a %v jump at Period 1ms = %d, want %d", jump, n, want)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("Rotations did not return within 15 s after a 10-year jump")
	}
	if got := r.Query(k); got != 0 {
		t.Errorf("score after 10 years = %v, want 0", got)
	}
	r.Update(k, 2)
	if got := r.Query(k); got != 2 {
		t.Errorf("fresh write after jump: %v, want 2", got)
	}
}

// TryUpdate across a rotation boundary: the promoted generation was written
// all along, so the budget carries over; it clears after Generations periods.
func TestAudit30TryUpdateAcrossBoundary(t *testing.T) {
	for _, ticked := range []bool{false, true} {
		clk := grudgetest.NewFakeClock()
		var tk *grudgetest.FakeTicker
		cfg := grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100, Clock: clk}, Generations: 2, Period: 10 * time.Second}
		if ticked {
			tk = grudgetest.NewFakeTicker()
			cfg.Ticker = tk
		}
		r, err := grudge.NewRotator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rotate := func() {
			clk.Advance(10 * time.Second)
			if ticked {
				tk.Tick()
			}
		}
		k := []byte("k")
		for i := range 5 {
			if !r.TryUpdate(k, 1, 5) {
				t.Fatalf("ticked=%v: TryUpdate %d denied", ticked, i)
			}
		}
		if r.TryUpdate(k, 1, 5) {
			t.Errorf("ticked=%v: 6th TryUpdate admitted", ticked)
		}
		rotate()
		if r.TryUpdate(k, 1, 5) {
			t.Errorf("ticked=%v: after one rotation the budget reset (Query %v); the promoted generation was written all along", ticked, r.Query(k))
		}
		if got := r.Query(k); got != 5 {
			t.Errorf("ticked=%v: after one rotation Query = %v, want 5", ticked, got)
		}
		rotate()
		if got := r.Query(k); got != 0 {
			t.Errorf("ticked=%v: after two rotations Query = %v, want 0", ticked, got)
		}
		if !r.TryUpdate(k, 5, 5) {
			t.Errorf("ticked=%v: after two rotations TryUpdate(5,5) denied", ticked)
		}
		r.Close()
	}
}

// Decay over huge Advances (days to years) matches decay.Apply of the
// float64 law within float32 rounding, in one step or many.
func TestAudit30HugeAdvanceDecay(t *testing.T) {
	laws := []struct {
		name string
		d    grudge.Decay
		hi   float64
		v    float64
	}{
		{"Linear", grudge.Linear(1), 1e9, 1e8},
		{"Exp", grudge.Exponential(1e-8), 1e9, 1e6},
		{"ExpSlow", grudge.Exponential(1e-9), 1e9, 1e6},
	}
	steps := []time.Duration{24 * time.Hour, 25 * 24 * time.Hour, 49 * 24 * time.Hour, 365 * 24 * time.Hour, 3 * 365 * 24 * time.Hour}
	for _, l := range laws {
		for _, step := range steps {
			for _, nSteps := range []int{1, 3} {
				clk := grudgetest.NewFakeClock()
				clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				s, err := grudge.New(grudge.Config{CellsPerLevel: 1024, Hi: l.hi, Decay: l.d, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				k := []byte("k")
				s.Update(k, l.v)
				want := s.Query(k)
				for range nSteps {
					clk.Advance(step)
					want = l.d.Apply(want, step.Milliseconds())
					got := s.Query(k)
					tol := 1e-6*math.Max(1, math.Abs(want)) + 1e-6
					if math.Abs(got-want) > tol || got < want-1e-9 {
						t.Errorf("%s step %v x%d: got %v, want %v (decay.Apply)", l.name, step, nSteps, got, want)
					}
				}
				// Also a write between long idles.
				s.Update(k, 1)
				got := s.Query(k)
				if want2 := want + 1; math.Abs(got-want2) > 1e-6*math.Max(1, want2)+1e-6 {
					t.Errorf("%s step %v: after write %v, want %v", l.name, step, got, want2)
				}
			}
		}
	}
	_ = decay.None
}

// A FakeClock set backwards counts as no time passing; moving forward again
// decays only from the latest reading already seen.
func TestAudit30ClockBackwards(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	clk.Set(time.Unix(1_000_000, 0))
	s, _ := grudge.New(grudge.Config{Hi: 1000, Decay: grudge.Linear(1), Clock: clk})
	k := []byte("k")
	s.Update(k, 100)
	clk.Set(time.Unix(1, 0)) // years back
	if got := s.Query(k); got != 100 {
		t.Errorf("after Set backwards: %v, want 100", got)
	}
	s.Update(k, 10)
	if got := s.Query(k); got != 110 {
		t.Errorf("write after Set backwards: %v, want 110", got)
	}
	clk.Set(time.Unix(1_000_010, 0)) // 10 s past the first write
	if got := s.Query(k); got != 100 {
		t.Errorf("10 s after the high-water mark: %v, want 100", got)
	}
	clk.Set(time.Unix(-5_000_000, 0)) // before the epoch
	s.Update(k, 1)
	if got := s.Query(k); got != 101 {
		t.Errorf("before the epoch: %v, want 101", got)
	}
	clk.Set(time.Unix(1_000_020, 0))
	if got := s.Query(k); got != 91 {
		t.Errorf("back after the epoch: %v, want 91", got)
	}
}
