package ref

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// TestTryUpdateExactAdmissions is the sentinel of TryUpdate's atomicity:
// 50 goroutines race TryUpdate(k, 1, 1000), each retrying until denied;
// without decay exactly 1000 are admitted, every run, at every
// GOMAXPROCS.
func TestTryUpdateExactAdmissions(t *testing.T) {
	const (
		workers = 50
		limit   = 1000
	)
	reps := 20
	if testing.Short() {
		reps = 3
	}
	key := []byte("sentinel")
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			for rep := range reps {
				s, err := New(sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e12, Seed: uint64(rep)})
				if err != nil {
					t.Fatal(err)
				}
				var (
					admitted atomic.Int64
					start    = make(chan struct{})
					wg       sync.WaitGroup
				)
				for range workers {
					wg.Go(func() {
						<-start
						for s.TryUpdate(key, 1, limit) {
							admitted.Add(1)
						}
					})
				}
				close(start)
				wg.Wait()
				if got := admitted.Load(); got != limit {
					t.Fatalf("rep %d: admitted %d, want exactly %d", rep, got, limit)
				}
				if got := s.Query(key); got != limit {
					t.Fatalf("rep %d: Query = %v, want %v", rep, got, float64(limit))
				}
			}
		})
	}
}

// TestTryUpdateDeniedLeavesCells checks that a denied TryUpdate changes no
// score, and that an admitted one applies delta to all L cells.
func TestTryUpdateDeniedLeavesCells(t *testing.T) {
	s := newTestSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 100})
	key := []byte("k")
	s.Update(key, 7)
	before := rawScores(s, key)
	if s.TryUpdate(key, 5, 11) {
		t.Fatal("TryUpdate(5, 11) admitted at score 7")
	}
	if after := rawScores(s, key); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("denied TryUpdate changed cells: %v -> %v", before, after)
	}
	if !s.TryUpdate(key, 5, 12) {
		t.Fatal("TryUpdate(5, 12) denied at score 7 (7+5 <= 12)")
	}
	for l, v := range rawScores(s, key) {
		if v != 12 {
			t.Fatalf("level %d: %v after admitted TryUpdate, want 12", l, v)
		}
	}
}
