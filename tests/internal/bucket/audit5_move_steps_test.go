package bucket_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit5MoveStepsAloneWriter: long moves of many steps (design.md,
// "Moving a line's time", 3: "each step after the first expires the
// entry that bounded it, so a move takes at most 15 steps") racing with
// writers of keys alone. Linear(1000, 60) (1,023 ticks a ms, a slack of
// 4,155 ticks, about 4 ms): after each round the test sets filler keys
// to debts 4 ms apart (2, 6, ..., 46 ms), so that the next round's
// first move of each line, after a gap of 100 ms to an hour, takes about
// a step per filler. In each round, 8 goroutines each write only their
// own key (TryUpdate / TryUpdateAt / TryReserveAt of 1 token against a
// limit of 59), 16 times: every key is alone (distinct fingerprints, 20
// keys in 28 slots) and written by one goroutine only, so each answer
// must be the exact bucket's for the debt its goroutine tracks: a
// request with room is admitted ("For one key it is exact under
// contention"; limit: "every decision ... is that of the rational
// bucket"). Each own key must also read exactly its debt at the round's
// start and end, and each filler its drained debt (0) at the round's
// start.
//
// Observed (under -race at GOMAXPROCS 2 and 8, every run): a request of
// a key no other goroutine writes, with room (often at a debt of 0 of a
// limit of 59), is denied; its debt stays exact (the write was undone).
// An instrumented copy of op.go attributes every such denial to do's
// "conflicts < maxConflicts" exit: four validations in a row that found
// a line's lw changed (op.go, conflict: "hdrLW(h) != wantLW[l]"), here
// by the steps of the other goroutines' long moves of the key's lines,
// although none of those writes touched the key or was at a later time
// than the request's own.
func TestAudit5MoveStepsAloneWriter(t *testing.T) {
	law := bucket.Linear(1000, 60)
	L := a5LawOf(t, law)
	gaps := []time.Duration{100 * time.Millisecond, 61 * time.Millisecond, time.Second, time.Hour, 65 * time.Millisecond}
	const G = 8
	a5Procs(t, func(t *testing.T) {
		for _, lines := range []int{2, 3} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 34)
			e := a5Engine(t, lines, law, clk, uint64(7+lines))
			taken := map[uint16]bool{}
			own := a5Keys(e, G, "own", taken)
			fill := a5Keys(e, 12, "fill", taken)
			dOwn := make([]uint64, G)
			for r := range reps(150, 30) {
				X := clk.Now()
				for i, k := range fill {
					if q := e.QueryAt(X, k); q != 0 {
						t.Fatalf("lines %d round %d: filler %d reads %v after a gap longer than its debt", lines, r, i, q)
					}
				}
				for i, k := range own {
					if q, w := e.QueryAt(X, k), L.val(dOwn[i]); q != w {
						t.Fatalf("lines %d round %d: own key %d reads %v at the round's start, want %v", lines, r, i, q, w)
					}
				}
				var mu sync.Mutex
				var errs []string
				race(G, 1, func(g, _ int) bool {
					for i := range 16 {
						d := dOwn[g]
						var ok bool
						switch i % 3 {
						case 0:
							ok = e.TryUpdate(own[g], 1, 59)
						case 1:
							ok = e.TryUpdateAt(X, own[g], 1, 59)
						case 2:
							_, ok = e.TryReserveAt(X.Add(-time.Millisecond), own[g], 1, 59)
						}
						if want := d+L.u <= 59*L.u; ok != want {
							mu.Lock()
							errs = append(errs, fmt.Sprintf("own key %d (written by this goroutine only), request %d: admitted %v at a debt of %v tokens, limit 59", g, i, ok, L.val(d)))
							mu.Unlock()
							return false
						}
						if ok {
							dOwn[g] += L.u
						}
					}
					return false
				})
				if len(errs) > 0 {
					t.Fatalf("lines %d round %d (after a gap of %v): %s", lines, r, gaps[(r+len(gaps)-1)%len(gaps)], strings.Join(errs, "; "))
				}
				for i, k := range own {
					if q, w := e.QueryAt(X, k), L.val(dOwn[i]); q != w {
						t.Fatalf("lines %d round %d: own key %d reads %v after the round, want %v", lines, r, i, q, w)
					}
				}
				// Fillers at debts 2, 6, ..., 46 ms (1 token = 1 ms here).
				for i, k := range fill {
					e.UpdateAt(X, k, float64(2+4*i))
				}
				gap := gaps[r%len(gaps)]
				clk.Advance(gap)
				for i := range dOwn {
					dOwn[i] = L.drain(dOwn[i], gap.Milliseconds())
				}
			}
		}
	})
}
