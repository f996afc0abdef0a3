package limit_test

// audit27: package limit's Buckets engine under a fake clock that steps
// back, by the engine's slack, by exact multiples of the 16-bit residue
// wrap (2^16 ticks: 4,369.07 ms for limit.New(10, 20)), by hours, days and
// 40 days, with 200 keys in a table sized for 5,000: every decision is the
// exact token bucket's (limit/doc.go: "Both engines give the same
// decisions for a key alone in its cells"), so no phantom debt after an
// idle time and no debt forgotten across one.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func TestAudit27BucketsIdleWrapExact(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithEngine(limit.Buckets), limit.WithCapacity(5000, 0.001), limit.WithSeed(27))
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine() != limit.Buckets {
		t.Fatalf("engine %v", l.Engine())
	}
	const nkeys, tokenMs, burstMs = 200, 100, 2000 // 10/s: a token is 100 ms of debt; burst 20
	tat := make([]int64, nkeys)                    // the exact bucket: the ms at which each key's debt is 0
	now := clk.NowMillis()
	rng := rand.New(rand.NewPCG(27, 2))
	steps := []int64{0, 1, 7, 369, 370, 4369, 4370, 8738, 13107, 3_600_000, 86_400_000, 40 * 86_400_000, -1000, -50}
	admits, denials := 0, 0
	for round := 0; round < 400; round++ {
		st := steps[rng.IntN(len(steps))]
		clk.Set(clk.NowMillis() + st)
		now = max(now, clk.NowMillis()) // the limiter's time never goes back
		for range 40 {
			k := rng.IntN(nkeys)
			n := 1 + rng.IntN(6)
			key := fmt.Sprintf("client-%d", k)
			next := max(tat[k], now) + int64(n)*tokenMs
			want := next-now <= burstMs
			got := l.AllowN(clk.Now(), key, n)
			if got != want {
				t.Fatalf("round %d (step %d ms): AllowN(%s, %d) = %v, the exact bucket says %v (debt %d ms)", round, st, key, n, got, want, max(tat[k]-now, 0))
			}
			if got {
				tat[k] = next
				admits++
			} else {
				denials++
			}
		}
	}
	if admits == 0 || denials == 0 {
		t.Fatalf("%d admits, %d denials", admits, denials)
	}
	// Idle past every debt, then a burst of fresh and old keys: each gets
	// its whole burst at once.
	clk.Set(clk.NowMillis() + 5*86_400_000 + 4369)
	for k := 0; k < 2*nkeys; k++ {
		if !l.AllowN(clk.Now(), fmt.Sprintf("client-%d", k), 20) {
			t.Fatalf("after 5 days idle: client-%d denied its burst", k)
		}
	}
}
