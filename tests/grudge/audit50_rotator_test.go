package grudge_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"go.uber.org/goleak"
)

// a50ChanTicker is a user's Ticker without TickHandled: a buffered
// channel the test feeds, a Stop counter, and an option to close C.
type a50ChanTicker struct {
	c     chan time.Time
	stops atomic.Int32
}

func (k *a50ChanTicker) C() <-chan time.Time { return k.c }
func (k *a50ChanTicker) Stop()               { k.stops.Add(1) }

// a50RealTicker wraps a *time.Ticker, as docs/migrating.md says to.
type a50RealTicker struct{ *time.Ticker }

func (k a50RealTicker) C() <-chan time.Time { return k.Ticker.C }

// a50WaitRotations polls Rotations until it reaches want (no timing
// assertion: a generous bound only guards against a hang).
func a50WaitRotations(t *testing.T, r *grudge.Rotator, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.Rotations() < want {
		if time.Now().After(deadline) {
			t.Fatalf("Rotations() = %d, want %d", r.Rotations(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAudit50CloseLeavesNoGoroutine: NewRotator with a Ticker starts one
// goroutine; Close stops it (docs/migrating.md: "Close idempotent, leaves
// no goroutine"). Checked with goleak after each of several rotators, for
// the FakeTicker, a user's channel ticker, a wrapped *time.Ticker, a
// ticker whose channel is closed before Close, and a NewRotator that
// fails (it must start nothing).
func TestAudit50CloseLeavesNoGoroutine(t *testing.T) {
	base := goleak.IgnoreCurrent()
	sk := grudge.Config{Lo: 0, Hi: 100, Clock: grudgetest.NewFakeClock()}
	t.Run("fake", func(t *testing.T) {
		for i := range 10 {
			ft := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: sk, Ticker: ft})
			if err != nil {
				t.Fatal(err)
			}
			for range i {
				ft.Tick()
			}
			if got := r.Rotations(); got != int64(i) {
				t.Fatalf("after %d ticks Rotations() = %d", i, got)
			}
			r.Close()
			r.Close()
			if !ft.Stopped() {
				t.Fatal("Close did not stop the FakeTicker")
			}
			goleak.VerifyNone(t, base)
		}
	})
	t.Run("channel", func(t *testing.T) {
		k := &a50ChanTicker{c: make(chan time.Time, 16)}
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: sk, Ticker: k, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			k.c <- time.Time{}
		}
		a50WaitRotations(t, r, 5)
		r.Close()
		r.Close()
		r.Close()
		if n := k.stops.Load(); n != 1 {
			t.Errorf("three Closes called the Ticker's Stop %d times, want 1", n)
		}
		goleak.VerifyNone(t, base)
	})
	t.Run("closed-channel", func(t *testing.T) {
		k := &a50ChanTicker{c: make(chan time.Time, 4)}
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: sk, Ticker: k})
		if err != nil {
			t.Fatal(err)
		}
		k.c <- time.Time{}
		close(k.c)
		a50WaitRotations(t, r, 1)
		goleak.VerifyNone(t, base) // the goroutine returned on the closed channel
		r.Close()
		if n := k.stops.Load(); n != 1 {
			t.Errorf("Close after the tick channel closed called Stop %d times, want 1", n)
		}
		if got := r.Rotations(); got != 1 {
			t.Errorf("Rotations() = %d, want 1", got)
		}
	})
	t.Run("real", func(t *testing.T) {
		tk := time.NewTicker(time.Millisecond)
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: sk, Ticker: a50RealTicker{tk}})
		if err != nil {
			t.Fatal(err)
		}
		a50WaitRotations(t, r, 3)
		r.Close()
		n := r.Rotations()
		time.Sleep(20 * time.Millisecond)
		if m := r.Rotations(); m != n {
			t.Errorf("Rotations() moved from %d to %d after Close", n, m)
		}
		goleak.VerifyNone(t, base)
	})
	t.Run("invalid", func(t *testing.T) {
		for _, cfg := range []grudge.RotatorConfig{
			{Sketch: grudge.Config{Lo: 1, Hi: 0}, Ticker: grudgetest.NewFakeTicker()},
			{Sketch: sk, Generations: 1, Ticker: grudgetest.NewFakeTicker()},
			{Sketch: sk, Generations: 5000, Ticker: grudgetest.NewFakeTicker()},
		} {
			if r, err := grudge.NewRotator(cfg); err == nil || r != nil {
				t.Fatalf("NewRotator(%+v) = %v, %v; want an error", cfg, r, err)
			}
		}
		goleak.VerifyNone(t, base)
	})
}

// TestAudit50ConcurrentCloseAndTraffic: Close from 6 goroutines at once,
// racing Ticks and every method, at several GOMAXPROCS under -race: every
// Close returns, Stop is called once, no goroutine remains, the methods
// keep working after Close, and no rotation happens after Close returns,
// even with the clock far past an explicit short Period.
func TestAudit50ConcurrentCloseAndTraffic(t *testing.T) {
	base := goleak.IgnoreCurrent()
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 5 {
			clk := grudgetest.NewFakeClock()
			ft := grudgetest.NewFakeTicker()
			r, err := grudge.NewRotator(grudge.RotatorConfig{
				Sketch: grudge.Config{Lo: 0, Hi: 1e6, Clock: clk}, Generations: 3,
				Period: time.Millisecond, Ticker: ft,
			})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var admitted atomic.Int64
			stop := make(chan struct{})
			for w := range 4 {
				wg.Go(func() {
					k := []byte{byte(w)}
					for {
						select {
						case <-stop:
							return
						default:
						}
						r.Update(k, 1)
						_ = r.Query(k)
						_ = r.UpdateAndQuery(k, 0)
						if r.TryUpdate([]byte("t"), 1, 1e5) {
							admitted.Add(1)
						}
						_ = r.QueryDetailed(k)
						_ = r.Rotations()
					}
				})
			}
			for range 3 {
				wg.Go(func() {
					for range 5 {
						ft.Tick()
					}
				})
			}
			var cw sync.WaitGroup
			for range 6 {
				cw.Go(r.Close)
			}
			cw.Wait()
			if !ft.Stopped() {
				t.Fatal("Close returned without stopping the ticker")
			}
			after := r.Rotations()
			clk.Advance(10 * time.Hour) // far past the 1 ms Period
			k := []byte("after")
			r.Update(k, 7)
			if got := r.Query(k); got != 7 {
				t.Errorf("round %d: Update(7)/Query after Close = %v", round, got)
			}
			if !r.TryUpdate(k, 1, 8) || r.TryUpdate(k, 1, 8) {
				t.Errorf("round %d: TryUpdate after Close not exact", round)
			}
			close(stop)
			wg.Wait()
			if got := r.Rotations(); got != after {
				t.Errorf("round %d: Rotations() %d at Close, %d after a 10 h clock jump and traffic (Period 1 ms, ticker closed): want no rotation after Close", round, after, got)
			}
			if got := r.Rotations(); got > 15 {
				t.Errorf("round %d: %d rotations from at most 15 ticks", round, got)
			}
		}
		goleak.VerifyNone(t, base)
	})
}

// TestAudit50TicksInOrderAcrossGenerations: with N=3 and one FakeTicker,
// write key i once between tick i and tick i+1. After tick j the primary
// is the generation built at tick j-2, which holds every write since it
// was born, so key i reads 1 exactly for i >= j-2 (None decay), 0 before.
// That holds only if the rotator performed exactly one rotation per tick,
// in order.
func TestAudit50TicksInOrderAcrossGenerations(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	ft := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Lo: 0, Hi: 100, Clock: clk, CellsPerLevel: 1 << 16},
		Generations: 3, Ticker: ft,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	key := func(i int) []byte { return []byte{'k', byte(i)} }
	const ticks = 40
	for j := range ticks {
		r.Update(key(j), 1) // written while tick j's set is current
		clk.Advance(37 * time.Minute)
		ft.Tick()
		if got := r.Rotations(); got != int64(j+1) {
			t.Fatalf("after %d ticks Rotations() = %d", j+1, got)
		}
		// After j+1 ticks, the primary was born at tick j-1 (the newest at
		// tick j+1 minus 2): it saw writes j-1.. (written after its birth
		// at tick j-1: key j was written before tick j, i.e. after tick j-1).
		for i := 0; i <= j; i++ {
			want := 0.0
			if i >= j-1 {
				want = 1
			}
			if got := r.Query(key(i)); got != want {
				t.Fatalf("after %d ticks, key %d reads %v, want %v", j+1, i, got, want)
			}
		}
	}
}
