package core

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// frozenClock never moves: no decay, no lazy rotation.
type frozenClock struct{}

func (frozenClock) NowMillis() int64 { return 1_000_000 }

// TestRotatorTryUpdateExactAcrossRotations: 8 goroutines race
// TryUpdate(k, 1, 1000) on a frozen clock while another goroutine
// rotates twice mid-race (at 300 and 600 admitted). Three generations
// all built at New, so each primary of the race has seen every write
// since the start: exactly 1000 admitted, and the final primary holds
// 1000 (docs/design.md, "TryUpdate across promotions"). For the
// default and the conservative sketch (whose TryUpdate holds its stripe
// through cuWrite), at GOMAXPROCS 1, 2 and 8.
func TestRotatorTryUpdateExactAcrossRotations(t *testing.T) {
	for _, cu := range []bool{false, true} {
		for _, procs := range []int{1, 2, 8} {
			t.Run(fmt.Sprintf("conservative=%v/procs=%d", cu, procs), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				for rep := range 10 {
					r, err := NewRotator(RotatorConfig{
						Sketch:      Config{Levels: 4, CellsPerLevel: 64, Hi: 1e9, Clock: frozenClock{}, Seed: uint64(rep), Conservative: cu},
						Generations: 3, Period: time.Hour, Manual: true,
					})
					if err != nil {
						t.Fatal(err)
					}
					var admitted atomic.Int64
					var wg sync.WaitGroup
					rotate := make(chan struct{}, 2)
					wg.Go(func() {
						for range 2 {
							<-rotate
							r.Rotate()
						}
					})
					for range 8 {
						wg.Go(func() {
							for r.TryUpdateString("k", 1, 1000) {
								if n := admitted.Add(1); n == 300 || n == 600 {
									rotate <- struct{}{}
								}
							}
						})
					}
					wg.Wait()
					if got := admitted.Load(); got != 1000 {
						t.Fatalf("rep %d: admitted %d across 2 rotations, want exactly 1000", rep, got)
					}
					if p := r.Stats().Promotions; p != 2 {
						t.Fatalf("rep %d: %d promotions, want 2", rep, p)
					}
					if q := r.QueryString("k"); q != 1000 {
						t.Fatalf("rep %d: the primary holds %v, want 1000", rep, q)
					}
				}
			})
		}
	}
}
