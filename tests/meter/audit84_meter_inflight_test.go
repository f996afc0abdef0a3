package meter_test

// Audit 84 (meter): Inflight against an exact oracle (per key, the number
// of guards acquired and not yet released).
//
// meter/inflight.go: "Count is an upper bound on the key's true in-flight
// count ..., so a collision can refuse a key early but never admit it past
// max"; "The counts are exact integers through collisions at any
// maxLimit"; "Release gives the acquisition back; only the first call
// does anything. Release on a nil Guard (a refused TryAcquire) or a zero
// Guard does nothing."; "N goroutines racing TryAcquire(k, 100) without
// releasing get exactly 100 guards."

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit84MeterInflightOracle: random Acquire, TryAcquire (max 1 to
// 7), Release (once, twice, on nil and zero Guards) over 10 keys in
// tiny and large sketches, with a fake clock jumping hours to years (the
// sketch has a clock; its counts must not move). After every operation:
// Count(k) >= the true count of every key; without collisions Count is
// exact; an admitted TryAcquire leaves the key's true count <= max and a
// refused one saw Count >= max; once every guard is released, every Count
// is exactly 0 and every key admits max again.
func TestAudit84MeterInflightOracle(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	sizes := [][2]uint32{{1, 1}, {2, 2}, {3, 5}, {4, 1 << 12}}
	for si, sz := range sizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84meterT0)
			in, err := meter.NewInflight(7, meter.WithClock(clk), meter.WithSeed(uint64(si)+1), meter.WithSize(sz[0], sz[1]))
			if err != nil {
				t.Fatal(err)
			}
			exact := sz[1] >= 1<<12
			rng := rand.New(rand.NewPCG(84, 2000+uint64(si)))
			truth := map[string]int{}
			held := map[string][]*meter.Guard{}
			released := []*meter.Guard{}
			verify := func(step int) {
				for _, k := range keys {
					c := in.Count(k)
					if c < truth[k] || (exact && c != truth[k]) {
						t.Fatalf("step %d: Count(%q) = %d, true %d (exact %v)", step, k, c, truth[k], exact)
					}
				}
			}
			for step := range testsize.Pick(4000, 400) {
				if rng.IntN(50) == 0 {
					clk.Advance(time.Duration([]int64{1, 1 << 29, 3 * 365 * 86400 * 1000, -5000}[rng.IntN(4)]) * time.Millisecond)
				}
				k := keys[rng.IntN(len(keys))]
				switch rng.IntN(7) {
				case 0:
					held[k] = append(held[k], in.Acquire(k))
					truth[k]++
				case 1, 2:
					max := 1 + rng.IntN(7)
					before := in.Count(k)
					g := in.TryAcquire(k, max)
					if g == nil {
						if before < max {
							t.Fatalf("step %d: TryAcquire(%q, %d) refused at Count %d (true %d)", step, k, max, before, truth[k])
						}
						g.Release() // nil Guard: nothing
					} else {
						truth[k]++
						held[k] = append(held[k], g)
						if truth[k] > max {
							t.Fatalf("step %d: TryAcquire(%q, %d) admitted past max: true %d", step, k, max, truth[k])
						}
					}
				case 3, 4, 5:
					if hs := held[k]; len(hs) > 0 {
						i := rng.IntN(len(hs))
						g := hs[i]
						held[k] = append(hs[:i], hs[i+1:]...)
						g.Release()
						truth[k]--
						if rng.IntN(2) == 0 {
							g.Release()
						}
						released = append(released, g)
					}
				default:
					if len(released) > 0 {
						released[rng.IntN(len(released))].Release() // again: nothing
					}
					var z meter.Guard
					z.Release()
				}
				verify(step)
			}
			for _, k := range keys {
				for _, g := range held[k] {
					g.Release()
					g.Release()
				}
				truth[k] = 0
			}
			verify(-1)
			for _, k := range keys {
				if c := in.Count(k); c != 0 {
					t.Fatalf("all released: Count(%q) = %d", k, c)
				}
			}
			// every key admits max again, each alone
			for _, k := range keys {
				var gs []*meter.Guard
				for range 7 {
					g := in.TryAcquire(k, 7)
					if g == nil {
						t.Fatalf("all released: TryAcquire(%q, 7) refused after %d", k, len(gs))
					}
					gs = append(gs, g)
				}
				if in.TryAcquire(k, 7) != nil {
					t.Fatalf("%q admitted an 8th", k)
				}
				for _, g := range gs {
					g.Release()
				}
			}
		})
	}
}

// TestAudit84MeterInflightConcurrentConserved: 8 goroutines each run
// rounds of Acquire / TryAcquire(k, 3) / Release (twice) on colliding keys
// in 1x1 and 2x3 sketches, while one goroutine reads Count. A guard is
// counted (held) after its admission and uncounted before its Release, so
// the held count is at most the true one: in 1x1 (every key in one cell)
// the total held under TryAcquire(_, 3) alone never exceeds 3; Count never
// reads below 0; at the end every Count is exactly 0.
func TestAudit84MeterInflightConcurrentConserved(t *testing.T) {
	for _, sz := range [][2]uint32{{1, 1}, {2, 3}} {
		in, err := meter.NewInflight(3, meter.WithSeed(9), meter.WithSize(sz[0], sz[1]))
		if err != nil {
			t.Fatal(err)
		}
		const G, rounds = 8, 400
		var held atomic.Int64
		var bad atomic.Value
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var rd sync.WaitGroup
		rd.Add(1)
		go func() {
			defer rd.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 4 {
					if c := in.Count(fmt.Sprint("k", i)); c < 0 {
						bad.Store(fmt.Sprintf("Count = %d", c))
					}
				}
			}
		}()
		for g := range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(84, uint64(g)))
				for range rounds {
					k := fmt.Sprint("k", rng.IntN(4))
					if gd := in.TryAcquire(k, 3); gd != nil {
						if h := held.Add(1); sz[1] == 1 && h > 3 {
							bad.Store(fmt.Sprintf("1x1: %d held under TryAcquire(_, 3)", h))
						}
						held.Add(-1)
						gd.Release()
						gd.Release()
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		rd.Wait()
		if b := bad.Load(); b != nil {
			t.Fatalf("%dx%d: %v", sz[0], sz[1], b)
		}
		// a second phase with Acquire (no max) mixed in
		var wg2 sync.WaitGroup
		for g := range G {
			wg2.Add(1)
			go func() {
				defer wg2.Done()
				for i := range rounds {
					k := fmt.Sprint("k", (g+i)%4)
					var gd *meter.Guard
					if i%2 == 0 {
						gd = in.Acquire(k)
					} else {
						gd = in.TryAcquire(k, 3)
					}
					gd.Release()
					gd.Release()
				}
			}()
		}
		wg2.Wait()
		for i := range 4 {
			if c := in.Count(fmt.Sprint("k", i)); c != 0 {
				t.Fatalf("%dx%d: quiescent Count(k%d) = %d, want 0", sz[0], sz[1], i, c)
			}
		}
	}
}

// TestAudit84MeterInflightPanics: TryAcquire's documented panics start
// "meter:" (max < 1, max above maxLimit), and the zero Inflight panics
// with its own message.
func TestAudit84MeterInflightPanics(t *testing.T) {
	in, err := meter.NewInflight(5, meter.WithSeed(1), meter.WithSize(1, 8))
	if err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{0, -1, 6, 1 << 40} {
		func() {
			defer func() {
				r := recover()
				if s, ok := r.(string); !ok || !strings.HasPrefix(s, "meter:") {
					t.Errorf("TryAcquire(k, %d): panic %v, want one starting meter:", max, r)
				}
			}()
			in.TryAcquire("k", max)
		}()
	}
	if c := in.Count("k"); c != 0 {
		t.Fatalf("refused panicking calls left Count %d", c)
	}
	var z meter.Inflight
	func() {
		defer func() {
			if r := recover(); fmt.Sprint(r) != "meter: zero Inflight; use NewInflight" {
				t.Errorf("zero Inflight: panic %v", r)
			}
		}()
		z.Count("k")
	}()
}
