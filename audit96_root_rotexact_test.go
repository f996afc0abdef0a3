package grudge_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// TestAudit96RootTryUpdateExactAcrossManyRotations: Rotator.TryUpdate
// "applies delta to every generation only if the primary's aggregate +
// delta <= limit, exactly across concurrent callers and rotations"
// (rotator.go), and doc.go: "TryUpdate is exact: N goroutines racing
// TryUpdate(k, 1, 1000) admit exactly 1000". With N generations all born
// at NewRotator, the primary after up to N-1 rotations was written all
// along (migrating.md: "the promoted generation was written all along"),
// so even N-1 rotations landing inside the race keep the count exact:
// 1000 admitted over 16 goroutines x 150 calls, with Generations 3 and 4,
// rotations driven by a FakeTicker (ticked from another goroutine while
// the race runs) or lazily by FakeClock advances of one Period each.
// Updates of other keys run alongside (writers outside the stripe).
func TestAudit96RootTryUpdateExactAcrossManyRotations(t *testing.T) {
	for _, gens := range []uint32{3, 4} {
		for _, mode := range []string{"ticker", "lazy"} {
			t.Run(fmt.Sprintf("N=%d/%s", gens, mode), func(t *testing.T) {
				clk := grudgetest.NewFakeClock()
				cfg := grudge.RotatorConfig{
					Sketch:      grudge.Config{Levels: 4, CellsPerLevel: 4096, Hi: 1e6, Clock: clk},
					Generations: gens,
					Period:      time.Minute,
				}
				var tk *grudgetest.FakeTicker
				if mode == "ticker" {
					tk = grudgetest.NewFakeTicker()
					cfg.Ticker = tk
				}
				r, err := grudge.NewRotator(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				var admitted, calls atomic.Int64
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range int64(gens - 1) {
						for calls.Load() < 300*(i+1) {
							runtime.Gosched()
						}
						if tk != nil {
							tk.Tick()
						} else {
							clk.Advance(time.Minute)
						}
					}
				}()
				for g := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						other := []byte(fmt.Sprintf("other%d", g))
						for range 150 {
							if r.TryUpdate([]byte("k"), 1, 1000) {
								admitted.Add(1)
							}
							r.Update(other, 1)
							calls.Add(1)
						}
					}()
				}
				wg.Wait()
				if got := r.Rotations(); got != int64(gens-1) {
					t.Fatalf("Rotations = %d, want %d", got, gens-1)
				}
				if n := admitted.Load(); n != 1000 {
					t.Fatalf("%d admitted across %d rotations, want exactly 1000", n, gens-1)
				}
				if q := r.Query([]byte("k")); q != 1000 {
					t.Fatalf("Query = %v after the race, want 1000", q)
				}
			})
		}
	}
}
