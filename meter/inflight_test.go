package meter_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/meter"
)

// TestInflightClamp: two keys in one cell, maxLimit 4. Key a holds 4, so
// the shared cell is at maxLimit; b's Acquire makes it 5. With Hi =
// maxLimit the clamp threw that +1 away: once a released its 4, b read 0
// and TryAcquire(b, 4) let it hold 5 (15 in the run). Now b
// counts 1 and gets exactly 3 more.
func TestInflightClamp(t *testing.T) {
	in, err := meter.NewInflight(4, meter.WithSize(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	var as []*meter.Guard
	for range 4 {
		as = append(as, in.TryAcquire("a", 4))
	}
	b := []*meter.Guard{in.Acquire("b")}
	if in.Count("b") != 5 {
		t.Fatalf("shared cell counts %d, want 5", in.Count("b"))
	}
	for _, g := range as {
		g.Release()
	}
	if c := in.Count("b"); c != 1 {
		t.Fatalf("b counts %d after a's releases, holding 1", c)
	}
	for in.TryAcquire("b", 4) != nil {
		b = append(b, nil)
	}
	if len(b) != 4 {
		t.Fatalf("b holds %d guards with TryAcquire(b, 4)", len(b))
	}
}

// held is one guard a stress goroutine holds, for key index k.
type held struct {
	k int
	g *meter.Guard
}

// TestInflightCollideStress: colliding keys (1 or 2 cells per level, 1
// or 2 levels) at maxLimit 4, 5 and the default, under contention at
// GOMAXPROCS 1, 2 and 8, with unconditional Acquires on one key: no key
// ever holds more than its max through TryAcquire, Count is at least the
// true count whenever the goroutines pause (guards held across pauses),
// and every key counts 0 once all guards are released.
func TestInflightCollideStress(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rounds, ops := 20, 400
	if testing.Short() {
		rounds, ops = 5, 200
	}
	keys := []string{"a", "b", "c", "d", "e"}
	const max, free = 4, 4 // key "e" also takes unconditional Acquires
	for _, procs := range []int{1, 2, 8} {
		for _, cfg := range []struct {
			levels, cells uint32
			maxLimit      int
		}{{1, 1, 4}, {2, 2, 4}, {1, 1, 0}, {2, 1, 5}} {
			runtime.GOMAXPROCS(procs)
			t.Run(fmt.Sprintf("procs=%d/L=%d/M=%d/max=%v", procs, cfg.levels, cfg.cells, cfg.maxLimit), func(t *testing.T) {
				in, err := meter.NewInflight(cfg.maxLimit, meter.WithSize(cfg.levels, cfg.cells), meter.WithSeed(9))
				if err != nil {
					t.Fatal(err)
				}
				var count [5]atomic.Int64 // true in-flight count per key
				var over atomic.Int64
				mine := make([][]held, 8) // goroutine g's guards, kept across rounds
				for range rounds {
					var wg sync.WaitGroup
					for g := range mine {
						wg.Go(func() {
							for i := range ops {
								k := (g + i) % len(keys)
								switch {
								case k == free && i%5 == 0:
									count[k].Add(1)
									mine[g] = append(mine[g], held{k, in.Acquire(keys[k])})
								case i%3 != 2:
									if gd := in.TryAcquire(keys[k], max); gd != nil {
										// TryAcquire decided with at most max-1 held
										// (Acquires of the free key aside).
										if h := count[k].Add(1); h > max && k != free {
											over.Add(1)
										}
										mine[g] = append(mine[g], held{k, gd})
									}
								case len(mine[g]) > 0:
									j := i % len(mine[g])
									count[mine[g][j].k].Add(-1)
									mine[g][j].g.Release()
									mine[g] = append(mine[g][:j], mine[g][j+1:]...)
								}
							}
						})
					}
					wg.Wait()
					for k, key := range keys {
						if c, h := in.Count(key), count[k].Load(); int64(c) < h {
							t.Fatalf("Count(%q) = %d with %d in flight", key, c, h)
						}
					}
				}
				if over.Load() > 0 {
					t.Fatalf("%d TryAcquires let a key hold more than %d", over.Load(), max)
				}
				for _, gs := range mine {
					for _, h := range gs {
						h.g.Release()
					}
				}
				for _, key := range keys {
					if c := in.Count(key); c != 0 {
						t.Fatalf("Count(%q) = %d with nothing in flight", key, c)
					}
				}
			})
		}
	}
}
