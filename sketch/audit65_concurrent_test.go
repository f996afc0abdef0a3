package sketch_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit65ConcurrentEncodeNeverBelowPreEncode: 16 keys updated with
// positive deltas before T (exact float64 oracle), then saved while
// writers keep adding positive deltas to the same keys and the clock is
// moved forward (1 ms per write, by the writers) during the encode (the
// hook starts them and waits until they have begun). Restored on a clock
// at T, every key reads at least its pre-encode oracle decayed to T and
// to T+500 ms (the updates completed before WriteTo, decayed: the
// promise for non-negative deltas), at several GOMAXPROCS, under -race.
func TestAudit65ConcurrentEncodeNeverBelowPreEncode(t *testing.T) {
	for _, c := range []struct {
		a65Case
		f func(v float64, dt int64) float64
	}{
		{a65Case{name: "Exp 0.7 Hi 40", d: decay.Exponential(0.7), hi: 40}, func(v float64, dt int64) float64 { return v * math.Exp(-0.7*float64(dt)/1000) }},
		{a65Case{name: "Linear 2", d: decay.Linear(2), hi: 1e9}, func(v float64, dt int64) float64 { return math.Max(0, v-2*float64(dt)/1000) }},
		{a65Case{name: "None Hi 50", d: decay.None(), hi: 50}, func(v float64, dt int64) float64 { return v }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for rep := 0; rep < 5; rep++ {
					clk := sketchtest.NewFakeClock()
					clk.Set(a65T0 - 1000)
					s := a65New(t, c.a65Case, clk)
					const keys = 16
					pre := make([]float64, keys)
					for i := range keys {
						v := float64(1 + i)
						s.UpdateString(fmt.Sprint("k", i), v)
						pre[i] = c.f(math.Min(v, c.hi), 1000) // at T
					}
					clk.Set(a65T0)
					var stop atomic.Bool
					var wg sync.WaitGroup
					started := make(chan struct{}, 4)
					w := &testhook.Writer{Hook: func() {
						for g := range 4 {
							wg.Add(1)
							go func() {
								defer wg.Done()
								started <- struct{}{}
								for j := 0; !stop.Load(); j++ {
									if g == 0 && j < 3000 {
										clk.Set(a65T0 + int64(j))
									}
									s.UpdateString(fmt.Sprint("k", (j+g)%keys), 0.25)
								}
							}()
						}
						for range 4 {
							<-started
						}
					}}
					_, err := s.WriteTo(w)
					stop.Store(true)
					wg.Wait()
					if err != nil {
						t.Fatalf("WriteTo: %v", err)
					}
					r, rc := a65Restore(t, c.a65Case, w.Buf.Bytes(), a65T0)
					for _, d := range []int64{0, 500} {
						rc.Set(a65T0 + d)
						for i := range keys {
							want := c.f(pre[i], d)
							if got := r.QueryString(fmt.Sprint("k", i)); got < want*(1-1e-6) {
								t.Errorf("rep %d: k%d at T+%d: restored %v < pre-encode oracle %v", rep, i, d, got, want)
							}
						}
					}
				}
			})
		})
	}
}
