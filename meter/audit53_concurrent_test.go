package meter_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a53Jumper moves clk through jumps (2^24, 2^29, 2^31, 2^32 ms and
// backward steps in between), sleeping between moves, counting them in
// moves, and closes done after the last one.
func a53Jumper(clk *sketchtest.FakeClock, jumps []int64, done chan<- struct{}, moves *atomic.Int64) {
	defer close(done)
	for _, j := range jumps {
		time.Sleep(100 * time.Microsecond)
		clk.Set(clk.NowMillis() + j)
		moves.Add(1)
	}
}

// a53Running reports whether done is still open.
func a53Running(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// TestAudit53InflightConservedAcrossHugeJumps: Inflight's counts are
// conserved while the clock jumps by 2^24, 2^29 (a horizon sweep), 2^31,
// 2^32 ms (the stamp wraps) and steps back, concurrently with 6 workers
// doing Acquire, TryAcquire(max 3) and (double) Release on a 2 x 8 sketch
// where everything collides, at GOMAXPROCS 1, 2, 4 and 8 under -race:
// every key's Count is 0 at the end, at least 1 while the worker holds a
// guard of it, and the TryAcquire-only keys never have more than 3
// guards out at once. Inflight: "The counts are exact integers through
// collisions", "every +1 is matched by its -1", TryAcquire "exactly
// under contention".
func TestAudit53InflightConservedAcrossHugeJumps(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a53T0)
		in, err := meter.NewInflight(0, meter.WithClock(clk), meter.WithSize(2, 8), meter.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		jumps := []int64{1 << 24, 1 << 29, -7, 1 << 31, 1 << 32, 1<<29 + 1, -1 << 20, 1<<32 + 1<<31, 1 << 29, 1 << 32}
		done := make(chan struct{})
		var wg sync.WaitGroup
		var moves atomic.Int64
		go a53Jumper(clk, jumps, done, &moves)
		var out [4]atomic.Int64 // guards out per TryAcquire-only key
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var held []*meter.Guard
				for i := 0; i < 1500 || a53Running(done); i++ {
					k := fmt.Sprintf("free%d", (w+i)%5)
					switch i % 4 {
					case 0, 1:
						g := in.Acquire(k)
						if in.Count(k) < 1 {
							t.Errorf("Count(%q) < 1 while a guard is held", k)
						}
						held = append(held, g)
					case 2:
						j := (w + i) % 4
						tk := fmt.Sprintf("try%d", j)
						if g := in.TryAcquire(tk, 3); g != nil {
							if n := out[j].Add(1); n > 3 {
								t.Errorf("%d guards of %q out at once, max 3", n, tk)
							}
							out[j].Add(-1)
							g.Release()
							g.Release()
						}
					case 3:
						if len(held) > 0 {
							g := held[0]
							held = held[1:]
							g.Release()
							g.Release()
						}
					}
				}
				for _, g := range held {
					g.Release()
				}
			}()
		}
		wg.Wait()
		<-done
		if moves.Load() < int64(len(jumps)) {
			t.Logf("only %d of %d clock moves during the race", moves.Load(), len(jumps))
		}
		for _, k := range []string{"free0", "free1", "free2", "free3", "free4", "try0", "try1", "try2", "try3"} {
			if c := in.Count(k); c != 0 {
				t.Errorf("after every guard was released and %d clock jumps, Count(%q) = %d; want 0", moves.Load(), k, c)
			}
		}
	})
}

// TestAudit53NoveltyOnceAcrossHugeJumps: 6 racers call Seen on 40 keys
// each (the same 40, in shifted orders) while the clock jumps by 2^24,
// 2^29, 2^31 and 2^32 ms through a rotation deadline (T = 2^36 ms,
// PeriodWindows 1, the clock started 2^32 ms before the deadline, so
// every mark is younger than T at the end), at GOMAXPROCS 1, 2, 4, 8:
// each key is told new exactly once, every racer's Contains right after
// its own Seen says seen, and at the end every key is seen.
// meter/novelty.go: "exactly one is told it is new", "no false
// negatives within T", "rotation adds no false negative".
func TestAudit53NoveltyOnceAcrossHugeJumps(t *testing.T) {
	const tms = int64(1) << 36
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for round := range 3 {
			clk := sketchtest.NewFakeClock()
			clk.Set(a53T0)
			nv, err := meter.NewNovelty(time.Duration(tms)*time.Millisecond, meter.WithClock(clk), meter.WithSize(4, 2048),
				meter.WithSeed(uint64(round)), meter.WithPeriodWindows(1))
			if err != nil {
				t.Fatal(err)
			}
			clk.Set(a53T0 + tms - 1<<32) // 2^32 ms before the deadline
			jumps := []int64{1 << 24, 1 << 29, -3, 1 << 31, 1<<31 - 1<<29, 1 << 29, 1 << 32}
			done := make(chan struct{})
			var wg sync.WaitGroup
			var moves atomic.Int64
			go a53Jumper(clk, jumps, done, &moves)
			var news [40]atomic.Int32
			for w := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 40 {
						j := (i + 7*w) % 40
						k := fmt.Sprintf("k%d", j)
						if !nv.Seen(k) {
							news[j].Add(1)
						}
						if !nv.Contains(k) {
							t.Errorf("Contains(%q) false right after Seen", k)
						}
						time.Sleep(100 * time.Microsecond)
					}
				}()
			}
			wg.Wait()
			<-done
			if moves.Load() < int64(len(jumps)) {
				t.Logf("round %d: only %d of %d clock moves during the race", round, moves.Load(), len(jumps))
			}
			for j := range news {
				if n := news[j].Load(); n != 1 {
					t.Errorf("round %d: key k%d told new %d times across %d clock jumps; want exactly 1", round, j, n, moves.Load())
				}
				if !nv.Contains(fmt.Sprintf("k%d", j)) {
					t.Errorf("round %d: k%d unseen at the end", round, j)
				}
			}
		}
	})
}

// TestAudit53RateConcurrentAcrossHugeJumps: 4 workers add 500 batches of
// 1..7 events of one key each (plus a shared key) while the clock jumps
// by up to 2^32 ms at a time across a deadline (window 2^36 ms,
// PeriodWindows 1, started 2^32 ms before the deadline), at GOMAXPROCS 1,
// 2, 4, 8 under -race. At the end, with S events of a key in all and the
// clock moved D ms since the first, PerSecond is within [S x
// e^(-D/window), S] per window (2e-5 relative up): the primary after the
// deadline is the generation built at New, which saw every event ("The
// sketch only errs upward"); the estimate is never above the events'
// undecayed sum.
func TestAudit53RateConcurrentAcrossHugeJumps(t *testing.T) {
	const wms = int64(1) << 36
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a53T0)
		r, err := meter.NewRate(time.Duration(wms)*time.Millisecond, meter.WithClock(clk), meter.WithSize(4, 2048),
			meter.WithSeed(5), meter.WithPeriodWindows(1))
		if err != nil {
			t.Fatal(err)
		}
		start := a53T0 + wms - 1<<32
		clk.Set(start)
		jumps := []int64{1 << 24, 1 << 29, -3, 1 << 31, 1<<31 - 1<<29, 1 << 29, 1 << 32}
		done := make(chan struct{})
		var wg sync.WaitGroup
		var moves atomic.Int64
		go a53Jumper(clk, jumps, done, &moves)
		var sums [5]atomic.Int64
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 500 || a53Running(done); i++ {
					n := int64(i%7 + 1)
					k, j := fmt.Sprintf("w%d", w), w
					if i%3 == 0 {
						k, j = "shared", 4
					}
					r.ObserveAt(clk.Now(), k, float64(n))
					sums[j].Add(n)
					if i%50 == 0 {
						time.Sleep(50 * time.Microsecond)
					}
				}
			}()
		}
		wg.Wait()
		<-done
		span := clk.NowMillis() - start
		if moves.Load() < int64(len(jumps)) {
			t.Logf("only %d of %d clock moves during the race", moves.Load(), len(jumps))
		}
		perWindow := 1 / (float64(wms) / 1000)
		for j, k := range []string{"w0", "w1", "w2", "w3", "shared"} {
			s := float64(sums[j].Load())
			got := r.PerSecond(k)
			lo := s * math.Exp(-float64(span)/float64(wms)) * perWindow
			hi := s * perWindow * (1 + 2e-5)
			if got < lo*(1-1e-9) || got > hi {
				t.Errorf("PerSecond(%q) = %v, want in [%v, %v] (%v events, clock moved %d ms, %d jumps)", k, got, lo, hi, s, span, moves.Load())
			}
		}
	})
}
