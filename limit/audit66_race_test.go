package limit_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit66RaceSetBurstTierExactDebt: at one instant, goroutines race
// Allow under the limiter's policy (while another goroutine flips
// SetBurst between 4 and 10) and under a Tier of half the rate (burst 5:
// each request costs 2 of New's tokens against 10 of them). Strict
// decisions "never admit past the burst on either engine", and "a
// decision racing them uses the old policy or the new one, never a mix"
// (doc.go). Every admission adds its cost to one debt (in New's tokens,
// 1 per default admission, 2 per tier admission), never above 10; after
// the race, topping up with the default policy at burst 10 fills the
// debt to exactly 10: the admitted cost must total exactly 10.
func TestAudit66RaceSetBurstTierExactDebt(t *testing.T) {
	for _, e := range []struct {
		name string
		opts []limit.Option
	}{
		{"buckets", []limit.Option{limit.WithEngine(limit.Buckets)}},
		{"countmin", []limit.Option{limit.WithEngine(limit.CountMin)}},
	} {
		t.Run(e.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for rep := 0; rep < 30; rep++ {
					clk := sketchtest.NewFakeClock()
					clk.Set(9_000_000)
					l, err := limit.New(10, 10, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(uint64(rep)), limit.WithMaxDebt(20)}, e.opts...)...)
					if err != nil {
						t.Fatal(err)
					}
					tier, err := l.Tier("half", 5, 5)
					if err != nil {
						t.Fatal(err)
					}
					if !tier.Exact() || !l.Exact() {
						t.Fatal("not exact")
					}
					var cost atomic.Int64
					var wg sync.WaitGroup
					stop := make(chan struct{})
					flipped := make(chan struct{})
					go func() {
						defer close(flipped)
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							b := 4
							if i%2 == 1 {
								b = 10
							}
							if err := l.SetBurst(b); err != nil {
								t.Error(err)
								return
							}
						}
					}()
					for w := 0; w < 6; w++ {
						wg.Add(1)
						go func(w int) {
							defer wg.Done()
							for j := 0; j < 30; j++ {
								if w%2 == 0 {
									if d := l.Decide("k"); d.Allowed {
										cost.Add(1)
										if d.Burst != 4 && d.Burst != 10 {
											t.Errorf("Decision.Burst %d", d.Burst)
										}
									}
								} else if tier.Allow("k") {
									cost.Add(2)
								}
							}
						}(w)
					}
					wg.Wait()
					close(stop)
					<-flipped
					if err := l.SetBurst(10); err != nil {
						t.Fatal(err)
					}
					for k := 0; k < 100 && l.Allow("k"); k++ {
						cost.Add(1)
					}
					if got := cost.Load(); got != 10 {
						t.Fatalf("rep %d: admitted cost %d New tokens at one instant, want exactly 10 (burst 10)", rep, got)
					}
					if tk := l.TokensAt(l.Now(), "k"); tk != 0 {
						t.Fatalf("rep %d: TokensAt %v, want 0", rep, tk)
					}
				}
			})
		})
	}
}
