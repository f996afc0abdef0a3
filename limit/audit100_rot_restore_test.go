package limit_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

const a100LimitEnv = "GRUDGE_A100_ROT_LIMIT_CHILD"

// a100LimitChild runs body in a child process (60 s timeout; killed after testchild.Bound), so that a
// limiter promoting for ever near the end of int64 time fails the test
// rather than hanging the run; in the child it runs body itself.
func a100LimitChild(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	testchild.Isolate(t, a100LimitEnv, body)
}

// a100CountMin is New(10, 20) on the count-min (2 generations, Period
// 40 s, MaxDebt 40 tokens: 4 s to drain) on a fake clock at ms.
func a100CountMin(t *testing.T, ms int64) (*limit.Limiter, *limittest.FakeClock) {
	t.Helper()
	c := limittest.NewFakeClock()
	c.Set(ms)
	l, err := limit.New(10, 20, limit.WithClock(c), limit.WithEngine(limit.CountMin), limit.WithSize(2, 1024),
		limit.WithGenerations(2), limit.WithPeriod(40*time.Second), limit.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

// TestAudit100RotFixedCountMinRestoreFarClock (audit 100; fixed at stop 59, the text below says
// what was wrong): a count-min limiter
// saved and restored with no downtime on a clock past 2^61 ms admits a
// key the never-stopped limiter denies. limit/doc.go: "the restored
// limiter decides as the never-stopped one would at the same wall time"
// and "A count-min's rotation deadline moves the same way". The key is
// drained to its burst 1 ms before a deadline (its debt in both
// generations), the deadline promotes (the debt now in the primary
// only), and the limiter is saved and restored at that instant: the
// rotator's restore loses its deadline's time left there (wall times
// bounded to +-2^61 ms), the restored primary retires on the first
// access, and the key's debt is amnestied 1 ms after it was made
// (where "Rotation and amnesty" says a debt is never amnestied when
// (G-1) x Period x rate >= MaxDebt, as here: 40 s x 10/s >= 40).
func TestAudit100RotFixedCountMinRestoreFarClock(t *testing.T) {
	for _, s := range []int64{1_765_000_000_000, 1 << 62, math.MaxInt64 - 100_000} {
		l, clk := a100CountMin(t, s)
		p := l.Period().Milliseconds()
		clk.Set(s + p - 1)
		for l.Allow("k") {
		}
		clk.Set(s + p)
		l.Allow("other")
		var b bytes.Buffer
		if _, err := l.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		l2, _ := a100CountMin(t, s+p)
		if _, err := l2.ReadFrom(&b); err != nil {
			t.Fatal(err)
		}
		if orig, got := l.Allow("k"), l2.Allow("k"); orig || got {
			t.Errorf("clock %d: a key at its burst 1 ms ago: the original Allow %v, the restored one (no downtime) %v (Tokens %v, the original's %v); want false for both",
				s, orig, got, l2.Tokens("k"), l.Tokens("k"))
		}
	}
}

// TestAudit100RotCountMinEndOfTime: a count-min limiter on a clock at
// the end of int64 time (built within a Period of MaxInt64: its deadline
// saturated; or jumping there from MinInt64) returns, admits exactly
// its burst and then denies, and refills at its rate: decisions on the
// safe side, no hang.
func TestAudit100RotCountMinEndOfTime(t *testing.T) {
	a100LimitChild(t, func(t *testing.T) {
		for _, s := range []int64{math.MaxInt64 - 10_000, math.MinInt64} {
			l, clk := a100CountMin(t, s)
			clk.Set(math.MaxInt64 - 1000)
			n := 0
			for l.Allow("k") {
				n++
				if n > 20 {
					break
				}
			}
			if n != 20 {
				t.Fatalf("start %d: %d admitted at MaxInt64-1000 ms, want the burst, 20", s, n)
			}
			clk.Set(math.MaxInt64)
			// 1000 ms at 10/s: 10 tokens back.
			n = 0
			for l.Allow("k") {
				n++
				if n > 10 {
					break
				}
			}
			if n != 10 {
				t.Fatalf("start %d: %d admitted at MaxInt64 1 s later, want 10", s, n)
			}
			for range 50 {
				if l.Allow("k") {
					t.Fatalf("start %d: admitted past the burst at MaxInt64", s)
				}
			}
		}
	})
}
