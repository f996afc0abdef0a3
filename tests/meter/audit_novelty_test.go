package meter_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// hookHasher is XXH3 that calls hook (when set) before hashing a key,
// for the generation built as the factory's gen-th call.
type hookHasher struct {
	sketch.Hasher
	hook func(key string)
}

func (h hookHasher) Sum64(key []byte) uint64 {
	if h.hook != nil {
		h.hook(string(key))
	}
	return h.Hasher.Sum64(key)
}

func (h hookHasher) Sum64String(key string) uint64 {
	if h.hook != nil {
		h.hook(key)
	}
	return h.Hasher.Sum64String(key)
}

// hookFactory returns a factory whose gen-th built hasher (0: the first
// generation, 1: the second, ...) calls hook.
func hookFactory(gen int, hook func(string)) sketch.HasherFactory {
	var n atomic.Int64
	return func(seed uint64) sketch.Hasher {
		h := hookHasher{Hasher: sketch.XXH3()(seed)}
		if int(n.Add(1))-1 == gen {
			h.hook = hook
		}
		return h
	}
}

// TestAuditNoveltyOnceAcrossPromotion: "of N goroutines racing Seen on
// a key not seen within T, exactly one is told it is new". Two callers
// race Seen on a fresh key while the rotator promotes: A is admitted by
// the primary and, before its increment reaches the second generation
// (held there through the hasher, with prefetch off, which hashes the
// younger generation only after the primary admitted), B's Seen reads
// A's increment in the primary and is told "seen"; then the deadline
// passes and a promotion makes the second generation the primary. A's
// rotator TryUpdate sees the set changed, rolls back and decides again
// on the new primary, which B's mark saturated: A is told "seen" too.
// Neither caller is told the key is new.
func TestAuditNoveltyOnceAcrossPromotion(t *testing.T) {
	const T = time.Second
	{
		const prefetch = false // the hook needs the younger generation hashed after the admission
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		var armed atomic.Bool
		reached := make(chan struct{})
		release := make(chan struct{})
		hook := func(key string) {
			if key == "k" && armed.CompareAndSwap(true, false) {
				close(reached)
				<-release
			}
		}
		n, err := meter.NewNovelty(T, meter.WithClock(clk), meter.WithSize(2, 1024), meter.WithSeed(7),
			meter.WithPrefetch(prefetch), meter.WithHasher(hookFactory(1, hook)))
		if err != nil {
			t.Fatal(err)
		}
		// Just before the first deadline (Period 16 T after creation).
		clk.Advance(16*T - time.Millisecond)
		armed.Store(true)
		var aSeen bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			aSeen = n.Seen("k") // A: admitted by the primary, then held
		}()
		<-reached
		bSeen := n.Seen("k") // B, racing A
		clk.Advance(time.Millisecond)
		// Any access past the deadline promotes; the promotion waits
		// for A, which holds its stripe of the primary until its
		// increment is in every generation, so it runs on its own and
		// A is released while it waits.
		promoted := make(chan struct{})
		go func() { defer close(promoted); n.Contains("other") }()
		time.Sleep(20 * time.Millisecond)
		close(release)
		<-done
		<-promoted
		fresh := 0
		for _, seen := range []bool{aSeen, bSeen} {
			if !seen {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("prefetch=%v: %d of 2 racing callers told a never-seen key is new (A seen=%v, B seen=%v), want exactly 1",
				prefetch, fresh, aSeen, bSeen)
		}
	}
}

// TestAuditNoveltyPeriodModel: "With rotation (Period = 16 T by default,
// at least T) ... rotation adds no false negative": with PeriodWindows
// 1, 1.5 and 2 (rotations every few operations) and every key colliding
// or not, a key marked less than T ago is always seen, and with roomy
// cells a key not marked within T (plus a rounding slack) is not.
func TestAuditNoveltyPeriodModel(t *testing.T) {
	// Roomy cells: 2^14 per level. With Kirsch-Mitzenmacher indexing two
	// keys share every level with probability about 1/M^2 per generation
	// (core.Index), 1e-6 at 2^10: often enough, over rapid's generations
	// of three keys, to show a genuine collision as a false positive.
	for _, cells := range []uint32{1, 1 << 14} {
		for _, periods := range []float64{1, 1.5, 2} {
			t.Run(fmt.Sprintf("cells=%d/periods=%v", cells, periods), func(t *testing.T) {
				rapid.Check(t, func(rt *rapid.T) {
					within := time.Duration(rapid.IntRange(1, 2000).Draw(rt, "withinMs")) * time.Millisecond
					clk := sketchtest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					n, err := meter.NewNovelty(within, meter.WithClock(clk), meter.WithSize(levelsFor(cells), cells),
						meter.WithSeed(rapid.Uint64().Draw(rt, "seed")), meter.WithPrefetch(rapid.Bool().Draw(rt, "prefetch")),
						meter.WithPeriodWindows(periods))
					if err != nil {
						rt.Fatal(err)
					}
					last := map[string]int64{}
					keys := []string{"a", "b", "c"}
					T := within.Milliseconds()
					slack := int64(2) + T/1000
					for range rapid.IntRange(1, 150).Draw(rt, "ops") {
						clk.Advance(time.Duration(rapid.IntRange(0, int(3*T/2)).Draw(rt, "gap")) * time.Millisecond)
						k := rapid.SampledFrom(keys).Draw(rt, "key")
						at, ok := last[k]
						age := clk.NowMillis() - at
						modelSeen := ok && age < T
						contains := n.ContainsAt(clk.Now(), k)
						got := n.SeenAt(clk.Now(), k)
						if contains != got {
							rt.Fatalf("%q age %dms: Contains %v but Seen %v", k, age, contains, got)
						}
						if modelSeen && !got {
							rt.Fatalf("false negative: %q marked %dms ago, T=%v, Period=%v T", k, age, within, periods)
						}
						if cells > 1 && got && (!ok || age > T+slack) {
							rt.Fatalf("false positive without collisions: %q age %dms (marked before: %v), T=%v", k, age, ok, within)
						}
						last[k] = clk.NowMillis()
					}
				})
			})
		}
	}
}

// TestAuditNoveltyLongWithin: a Novelty whose T (40 and 400 days) is
// past the sketch's 32-bit stamp horizon (2^31 ms, 24.8 days) keeps a
// mark for T and no longer, whether the meter idles in one jump or is
// touched every day (horizon sweeps and re-bases in between), but for
// the documented hair of upward float32 rounding (each re-base rounds
// up once; the existing model tests allow T/1000).
func TestAuditNoveltyLongWithin(t *testing.T) {
	const day = 24 * time.Hour
	for _, within := range []time.Duration{40 * day, 400 * day} {
		for _, steps := range []bool{false, true} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			n, err := meter.NewNovelty(within, meter.WithClock(clk), meter.WithSize(2, 256), meter.WithSeed(4))
			if err != nil {
				t.Fatal(err)
			}
			if n.Seen("k") {
				t.Fatal("fresh key seen")
			}
			advance := func(d time.Duration) {
				if !steps {
					clk.Advance(d)
					return
				}
				for left := d; left > 0; left -= day {
					clk.Advance(min(day, left))
					n.Contains("other")
				}
			}
			advance(within - time.Minute)
			if !n.Contains("k") {
				t.Errorf("T=%v steps=%v: not seen a minute before T", within, steps)
			}
			advance(time.Minute + within/1000)
			if n.Contains("k") {
				t.Errorf("T=%v steps=%v: still seen T/1000 after T", within, steps)
			}
			if n.Seen("k") {
				t.Errorf("T=%v steps=%v: Seen after T", within, steps)
			}
			if !n.Seen("k") {
				t.Errorf("T=%v steps=%v: not seen right after its mark", within, steps)
			}
		}
	}
}

// TestAuditNoveltyBackwardsClock: a backwards clock step counts as zero
// elapsed: a mark made at the latest time used stays seen, for T
// measured from that time, however far the clock goes back.
func TestAuditNoveltyBackwardsClock(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	n, _ := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(4, 1024), meter.WithSeed(2))
	t0 := clk.NowMillis()
	n.Seen("k")
	clk.Set(t0 - 365*24*3600*1000)
	if !n.Contains("k") || !n.Seen("k") {
		t.Fatal("a backwards step lost the mark")
	}
	clk.Set(t0 + 999)
	if !n.Contains("k") {
		t.Fatal("not seen 999 ms after its mark")
	}
	clk.Set(t0 + 1001)
	if n.Contains("k") {
		t.Fatal("seen 1001 ms after its mark (T = 1 s)")
	}
}

// TestAuditNoveltyOnceAtDeadlineDefault: the same violation as
// TestAuditNoveltyOnceAcrossPromotion on the default path (prefetch on,
// SipHash, no hook), reached by scheduling alone: each round, two
// goroutines call Seen on a fresh key while a third moves the fake clock
// 1 ms across a rotation deadline (Period = T = 100 ms, so the callers'
// times differ by at most 1 ms, far below T) and touches the meter. With
// 4 x 4096 cells a false positive is ~1e-13 per round, so any round
// where no caller, or both, is told "new" breaks "exactly one is told
// it is new". On the 2-core development VM about 1 round in 800 has no
// caller told new; the test stops at the first such round or after 2 s.
func TestAuditNoveltyOnceAtDeadlineDefault(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 8} {
		runtime.GOMAXPROCS(procs)
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		c0 := clk.NowMillis()
		n, _ := meter.NewNovelty(100*time.Millisecond, meter.WithClock(clk), meter.WithSize(4, 4096), meter.WithPeriodWindows(1))
		stop := time.Now().Add(time.Second)
		for round := 0; time.Now().Before(stop); round++ {
			key := fmt.Sprint("m", round)
			clk.Set(c0 + 100*int64(round+1) - 1) // 1 ms before the next deadline
			var fresh atomic.Int64
			var wg, ready sync.WaitGroup
			ready.Add(3)
			start := make(chan struct{})
			for g := range 3 {
				wg.Go(func() {
					ready.Done()
					<-start
					if g == 2 {
						clk.Advance(time.Millisecond)
						n.Contains("other") // promotes
						return
					}
					if !n.Seen(key) {
						fresh.Add(1)
					}
				})
			}
			ready.Wait()
			close(start)
			wg.Wait()
			if f := fresh.Load(); f != 1 {
				t.Fatalf("procs=%d round %d: %d of 2 callers racing Seen on a fresh key across a promotion told it is new, want exactly 1", procs, round, f)
			}
		}
	}
}
