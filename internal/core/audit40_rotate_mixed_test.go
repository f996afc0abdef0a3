package core

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type a40Clock struct{ ms atomic.Int64 }

func (c *a40Clock) NowMillis() int64 { return c.ms.Load() }

// Rotate "may be called on any rotator. Safe for concurrent use:
// concurrent calls each rotate once": mixed with lazy promotions on a
// moving clock, every Rotate counts one promotion and one period, and
// nothing panics (-race).
func TestAudit40RotateMixedWithLazy(t *testing.T) {
	clk := &a40Clock{}
	clk.ms.Store(1000)
	r, err := NewRotator(RotatorConfig{
		Sketch:      Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Clock: clk, Seed: 3},
		Generations: 3, Period: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var rotates atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				switch {
				case w == 0 && i%10 == 0:
					clk.ms.Add(3)
				case w == 1 && i%7 == 0:
					r.Rotate()
					rotates.Add(1)
				default:
					r.UpdateString("k", 1)
					r.TryUpdateString("t", 1, 50)
				}
			}
		}(w)
	}
	wg.Wait()
	st := r.Stats()
	if st.Promotions < uint64(rotates.Load()) || st.Periods < st.Promotions {
		t.Fatalf("stats %+v with %d Rotate calls", st, rotates.Load())
	}
	if st.Allocated < 3+st.Promotions {
		t.Fatalf("allocated %d < 3 + promotions %d", st.Allocated, st.Promotions)
	}
}
