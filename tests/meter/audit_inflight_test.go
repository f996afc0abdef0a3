package meter_test

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditInflightLongIdle: Inflight's counts do not decay ("no decay")
// across any idle time: guards held through 1 ms, 30 days (past the
// 32-bit stamp horizon, 2^31 ms) and 3 years, in one jump or with the
// meter touched every few days (horizon sweeps re-base every cell), still
// count, and their Releases bring every key back to exactly 0.
func TestAuditInflightLongIdle(t *testing.T) {
	const day = 24 * time.Hour
	for _, steps := range []bool{false, true} {
		for _, idle := range []time.Duration{time.Millisecond, 30 * day, 3 * 365 * day} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			in, err := meter.NewInflight(0, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(8))
			if err != nil {
				t.Fatal(err)
			}
			var gs []*meter.Guard
			for range 3 {
				gs = append(gs, in.Acquire("k"))
			}
			gs = append(gs, in.TryAcquire("j", 1))
			if steps {
				for left := idle; left > 0; left -= 5 * day {
					clk.Advance(min(5*day, left))
					in.Count("other")
				}
			} else {
				clk.Advance(idle)
			}
			if c, d := in.Count("k"), in.Count("j"); c != 3 || d != 1 {
				t.Fatalf("steps=%v idle %v: counts %d, %d, want 3, 1", steps, idle, c, d)
			}
			if in.TryAcquire("j", 1) != nil {
				t.Fatalf("steps=%v idle %v: j admitted past max 1", steps, idle)
			}
			for _, g := range gs {
				g.Release()
			}
			if c, d := in.Count("k"), in.Count("j"); c != 0 || d != 0 {
				t.Fatalf("steps=%v idle %v: after releases %d, %d, want 0", steps, idle, c, d)
			}
		}
	}
}

// TestAuditInflightConcurrentRelease: Release is idempotent under
// concurrency too ("A Guard is safe for concurrent use; Release is
// idempotent"): 8 goroutines releasing the same guard take exactly one
// count back, at GOMAXPROCS 1, 2 and 8.
func TestAuditInflightConcurrentRelease(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 8} {
		runtime.GOMAXPROCS(procs)
		in, _ := meter.NewInflight(0, meter.WithSize(2, 64), meter.WithSeed(1))
		for round := range 200 {
			keep := in.Acquire("k")
			g := in.Acquire("k")
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(g.Release)
			}
			wg.Wait()
			if c := in.Count("k"); c != 1 {
				t.Fatalf("procs=%d round %d: count %d after 8 concurrent Releases of one guard, want 1", procs, round, c)
			}
			keep.Release()
		}
	}
}

// TestAuditInflightBalance: N goroutines each doing k Acquires and k
// TryAcquires and releasing all of them (interleaved with each other's
// releases), on roomy and on fully colliding cells, at GOMAXPROCS 1, 2
// and 8: every key reads back exactly 0, and while the goroutines hold
// their guards each key's Count is at least what it holds.
func TestAuditInflightBalance(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const N, k = 8, 200
	for _, procs := range []int{1, 2, 8} {
		runtime.GOMAXPROCS(procs)
		for _, cells := range []uint32{1, 1024} {
			in, _ := meter.NewInflight(0, meter.WithSize(3, cells), meter.WithSeed(uint64(procs)))
			var held [N][]*meter.Guard
			var wg sync.WaitGroup
			for g := range N {
				wg.Go(func() {
					key := fmt.Sprint("k", g%3)
					for i := range k {
						held[g] = append(held[g], in.Acquire(key))
						if gd := in.TryAcquire(key, 1<<20); gd != nil {
							held[g] = append(held[g], gd)
						}
						if i%3 == 2 { // release an older one
							held[g][0].Release()
							held[g] = held[g][1:]
						}
					}
				})
			}
			wg.Wait()
			var want [3]int
			for g := range N {
				want[g%3] += len(held[g])
			}
			for i := range 3 {
				if c := in.Count(fmt.Sprint("k", i)); c < want[i] || (cells > 1 && c != want[i]) {
					t.Fatalf("procs=%d cells=%d: Count(k%d) = %d holding %d", procs, cells, i, c, want[i])
				}
			}
			for g := range N {
				wg.Go(func() {
					for _, gd := range held[g] {
						gd.Release()
					}
				})
			}
			wg.Wait()
			for i := range 3 {
				if c := in.Count(fmt.Sprint("k", i)); c != 0 {
					t.Fatalf("procs=%d cells=%d: Count(k%d) = %d after every release", procs, cells, i, c)
				}
			}
		}
	}
}

// TestAuditInflightBadMax: TryAcquire panics with a "meter:" message on
// any max outside 1..maxLimit (huge and negative ones included) and
// counts nothing; max = maxLimit is accepted.
func TestAuditInflightBadMax(t *testing.T) {
	in, _ := meter.NewInflight(0, meter.WithSize(2, 64))
	for _, max := range []int{-1, math.MinInt, 1<<24 + 1, math.MaxInt} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "meter: ") {
					t.Errorf("TryAcquire(k, %d): panic %q", max, s)
				}
			}()
			in.TryAcquire("k", max)
		}()
	}
	if c := in.Count("k"); c != 0 {
		t.Fatalf("refused TryAcquires counted %d", c)
	}
	g := in.TryAcquire("k", 1<<24)
	if g == nil || in.Count("k") != 1 {
		t.Fatal("TryAcquire at maxLimit refused")
	}
	g.Release()
}
