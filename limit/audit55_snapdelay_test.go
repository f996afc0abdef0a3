package limit_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit55FixedLiveLimiterForgetsDebtSpentDuringWriteTo (fixed:
// promotions are no longer held off during WriteTo, which fails instead): a count-min
// limiter of 10/s, burst 10 (Period 2 s, first deadline +2000 ms) is
// saved at +1990 ms; during the encode the clock reaches +3900 ms and k
// spends its whole burst (10 admitted). The promotion that deadline
// called for is delayed until the encode ends, and the newborn generation
// it then builds does not hold that debt. At +4000 ms (100 ms later, one
// token's worth) that newborn is the primary: the SAME live limiter (not a
// restored copy) admits all 10 of k's requests, 20 in 100 ms at 10/s
// burst 10; a twin never saved, given the same requests, admits 1.
// limit/doc.go's token bucket (at most burst + rate x t in any t) and the
// rotator window (sketchtest.TestRotator: a write "reads in full while it
// is younger than (Generations-1) x Period").
func TestAudit55FixedLiveLimiterForgetsDebtSpentDuringWriteTo(t *testing.T) {
	const t0 = 1_700_000_000_000
	mk := func(c *sketchtest.FakeClock) *limit.Limiter {
		l, err := limit.New(10, 10, limit.WithEngine(limit.CountMin), limit.WithClock(c), limit.WithSeed(55),
			limit.WithSize(3, 1024), limit.WithPeriod(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	sc, tc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	sc.Set(t0)
	tc.Set(t0)
	saved, twin := mk(sc), mk(tc)
	sc.Set(t0 + 1990)
	a, b := 0, 0
	if _, err := saved.WriteTo(&testhook.Writer{W: io.Discard, N: 2, Hook: func() {
		sc.Set(t0 + 3900)
		for range 10 {
			if saved.Allow("k") {
				a++
			}
		}
	}}); err != nil && !strings.Contains(err.Error(), "take the snapshot again") {
		t.Fatal(err)
	}
	tc.Set(t0 + 3900)
	for range 10 {
		if twin.Allow("k") {
			b++
		}
	}
	if a != 10 || b != 10 {
		t.Fatalf("burst at +3900: saved %d, twin %d, want 10 each", a, b)
	}
	sc.Set(t0 + 4000)
	tc.Set(t0 + 4000)
	a, b = 0, 0
	for range 10 {
		if saved.Allow("k") {
			a++
		}
		if twin.Allow("k") {
			b++
		}
	}
	if a > b {
		t.Errorf("at +4000 ms, 100 ms after spending the burst of 10 (at 10/s) during WriteTo: the saved live limiter admits %d of 10, "+
			"a never-saved twin %d (want the same: 20 admissions in 100 ms exceed burst + rate x t = 11)", a, b)
	}
}
