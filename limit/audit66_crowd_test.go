package limit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66CrowdedOneSided overfills a tiny engine of either kind with
// far more keys at their limit than it holds, from several goroutines,
// over several rounds of drain, plus one hot key every goroutine hammers.
// Package doc, "Error side": "a collision can only deny a key early,
// never admit it past its own limit", and "Under contention on one key,
// strict decisions never admit past the burst on either engine". So each
// key's admissions up to round r are at most burst + floor(rate x
// elapsed), and the engine must report its crowding (Stats.Saturation >
// 0, denied fresh keys) rather than hold more than it can.
func TestAudit66CrowdedOneSided(t *testing.T) {
	type eng struct {
		name string
		opts []limit.Option
	}
	engs := []eng{
		{"buckets", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(40, 0.5)}},
		{"countmin", []limit.Option{limit.WithSize(2, 64)}},
		{"countmin-cu", []limit.Option{limit.WithSize(2, 64), limit.WithConservativeUpdate(true)}},
	}
	const (
		burst   = 5
		keys    = 3000
		workers = 6
		rounds  = 4
		stepMs  = 300 // 3 tokens at 10/s
	)
	for _, e := range engs {
		t.Run(e.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(5_000_000)
				l, err := limit.New(10, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(7)}, e.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]atomic.Int64, keys+1) // keys[keys] is the hot key
				name := func(i int) string {
					if i == keys {
						return "hot"
					}
					return fmt.Sprintf("user-%d", i)
				}
				for r := 0; r < rounds; r++ {
					var wg sync.WaitGroup
					for w := 0; w < workers; w++ {
						wg.Add(1)
						go func(w int) {
							defer wg.Done()
							tm := l.Now()
							for i := w; i < keys; i += workers {
								for j := 0; j < burst+2; j++ {
									if l.AllowN(tm, name(i), 1) {
										got[i].Add(1)
									}
								}
								if l.AllowN(tm, name(keys), 1) {
									got[keys].Add(1)
								}
							}
							// and a Decide / Reserve mix on the hot key
							for j := 0; j < 20; j++ {
								if d := l.DecideN(tm, "hot", 1); d.Allowed {
									got[keys].Add(1)
								}
								if rv := l.ReserveN(tm, "hot", 1); rv.OK() {
									if rv.DelayFrom(tm) == 0 {
										got[keys].Add(1)
									} else {
										rv.Cancel()
									}
								}
							}
						}(w)
					}
					wg.Wait()
					bound := int64(burst + r*stepMs/100)
					over := 0
					for i := range got {
						if g := got[i].Load(); g > bound {
							if over < 5 {
								t.Errorf("round %d: key %s admitted %d times, above its own limit %d", r, name(i), g, bound)
							}
							over++
						}
					}
					if over > 0 {
						t.Fatalf("%d keys admitted past their own bucket", over)
					}
					if r < rounds-1 {
						clk.Advance(stepMs * 1e6)
					}
				}
				st := l.Stats()
				if st.Saturation <= 0 {
					t.Errorf("Stats.Saturation = %v with %d keys at their limit in a tiny engine, want > 0", st.Saturation, keys)
				}
				// fresh keys: some must be denied (the engine is over capacity).
				den := 0
				for i := 0; i < 2000; i++ {
					if !l.PeekN(l.Now(), fmt.Sprintf("fresh-%d", i), 1).Allowed {
						den++
					}
				}
				t.Logf("saturation %.4f, fresh denied %d/2000", st.Saturation, den)
			})
		})
	}
}
