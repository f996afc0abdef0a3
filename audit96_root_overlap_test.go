package grudge_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// a96Place returns a 64-bit hash from the top bytes of h1 and h2 (with
// M = 256 a level's cell is the top byte of h1 + l*h2, h2 forced odd)
// and low bits that pick no cell but vary the key's TryUpdate stripe.
func a96Place(top1, top2, low1, low2 uint32) uint64 {
	return uint64(top2<<24|low2|1)<<32 | uint64(top1<<24|low1)
}

// TestAudit96RootTryUpdateMaxPartialOverlapExact: TryUpdate "atomically
// with respect to every other TryUpdate touching those cells" (sketch.go)
// for keys that share only some cells, on different stripes. Under Max,
// 8 keys sharing their level-0 cell X (each with its own level-1 cell, or
// in a second layout sharing X at level 1) all read X as their aggregate,
// so a serial history admits exactly 1000 in total with TryUpdate(ki, 1,
// 1000); 8 goroutines race, at GOMAXPROCS 1, 2 and 8.
func TestAudit96RootTryUpdateMaxPartialOverlapExact(t *testing.T) {
	// Key i of 8. Two levels: X (cell 0) shared at level 0, or at level 1
	// (h1 on cell 16+8i, a step back to 0), the other cell the key's own.
	// Three levels: X at level 0, a cell shared by a pair at level 1, and
	// the key's own at level 2 (the pair's mates differ by the carry of
	// 2 x h2's low bits), so a commit that wrote X can conflict on the
	// pair's cell and roll X back.
	layouts := map[string]struct {
		levels uint32
		shared int // the level of X
		place  func(i uint32) uint64
	}{
		"X at level 0":  {2, 0, func(i uint32) uint64 { return a96Place(0, 16+8*i, i, 0) }},
		"X at level 1":  {2, 1, func(i uint32) uint64 { return a96Place(16+8*i, 256-16-8*i, i, 0) }},
		"X, pairs, own": {3, 0, func(i uint32) uint64 { return a96Place(0, 16+8*(i/2), i, (i%2)<<23) }},
	}
	for name, lay := range layouts {
		for _, procs := range []int{1, 2, 8} {
			t.Run(fmt.Sprintf("%s/P=%d", name, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				table := a96Hash{}
				for i := range uint32(8) {
					table[fmt.Sprint("k", i)] = lay.place(i)
				}
				s, err := grudge.New(grudge.Config{Levels: lay.levels, CellsPerLevel: 256, Hi: 1e6, Aggregator: grudge.Max,
					Clock: grudgetest.NewFakeClock(), Hasher: func(uint64) grudge.Hasher { return table }})
				if err != nil {
					t.Fatal(err)
				}
				x := s.QueryDetailed([]byte("k0")).CellIndexes
				own := map[uint32]bool{}
				for i := range 8 {
					c := s.QueryDetailed([]byte(fmt.Sprint("k", i))).CellIndexes
					last := c[len(c)-1-lay.shared*(len(c)-1)] // the key's own cell: the other end from X
					if c[lay.shared] != x[lay.shared] || own[last] {
						t.Fatalf("layout: k%d at %v, k0 at %v", i, c, x)
					}
					own[last] = true
				}
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						k := []byte(fmt.Sprint("k", g))
						for range 200 {
							if s.TryUpdate(k, 1, 1000) {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if n := admitted.Load(); n != 1000 {
					t.Fatalf("%d admitted, want exactly 1000", n)
				}
				for i := range 8 {
					if q := s.Query([]byte(fmt.Sprint("k", i))); q != 1000 {
						t.Fatalf("Query(k%d) = %v after the race, want 1000 (the shared cell)", i, q)
					}
				}
			})
		}
	}
}
