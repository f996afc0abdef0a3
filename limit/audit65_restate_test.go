package limit_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a65T0 = int64(1_700_000_000_000)

func a65Limiter(t *testing.T, c *sketchtest.FakeClock) *limit.Limiter {
	t.Helper()
	l, err := limit.New(1000, 1000, limit.WithEngine(limit.CountMin), limit.WithSize(2, 4096),
		limit.WithPeriod(60*24*time.Hour), limit.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAudit65FixedLimiterSweptDebtRestoredAsZero (fixed in stop 47: a
// drained 0 is read back by the drain, rate x lead, past MaxDebt here,
// so the snapshot is refused, ErrTakeAgain; a snapshot taken never
// restores a key below its debt): limit/persist.go
// WriteTo refuses only "a debt near MaxDebt" after a jump over 2^24 ms,
// and docs/snapshots.md promises a cell re-stamped during the encode is
// stated never below the truth from T on ("a score of 0 is 0 at every
// instant: age 0"; migrating.md Stop 47: "never below the truth from T
// on"); docs/readings.md: a throttled key is "still throttled after it,
// drained by the downtime and never more". A count-min limiter (1000/s,
// burst 1000, Period 60 days) has taken 900 of k at T; during the encode
// (before the first generation's header) the clock jumps 2^30 + 1000 ms
// and a TokensAt of another key (a read) runs the horizon sweep, which
// re-stamps k's cells with their drained debt, 0. The snapshot is taken;
// restored on a clock at T, k is granted 1000 tokens at T where the
// never-saved limiter (a twin that did not jump) grants 100.
func TestAudit65FixedLimiterSweptDebtRestoredAsZero(t *testing.T) {
	c, tc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	c.Set(a65T0)
	tc.Set(a65T0)
	l, twin := a65Limiter(t, c), a65Limiter(t, tc)
	l.AllowN(c.Now(), "k", 900)
	twin.AllowN(tc.Now(), "k", 900)
	w := &testhook.Writer{N: 3, Hook: func() {
		c.Set(a65T0 + 1<<30 + 1000)
		l.TokensAt(c.Now(), "other")
	}}
	if _, err := l.WriteTo(w); err != nil {
		if !errors.Is(err, sketch.ErrTakeAgain) {
			t.Fatalf("WriteTo: %v", err)
		}
		return // refused, as documented
	}
	rc := sketchtest.NewFakeClock()
	rc.Set(a65T0)
	r := a65Limiter(t, rc)
	if _, err := r.ReadFrom(bytes.NewReader(w.Buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, want := r.AllowN(rc.Now(), "k", 101), twin.AllowN(tc.Now(), "k", 101); got != want {
		t.Errorf("restored on a clock at T: AllowN(k, 101) = %v; the never-saved twin at T: %v (debt 900 of burst 1000 leaves 100 tokens) "+
			"(snapshots.md \"a score of 0 is 0 at every instant: age 0\"; migrating.md Stop 47 \"never below the truth from T on\")", got, want)
	}
}

// TestAudit65FixedSmallDebtAfterJumpRefused (fixed in the docs, stop 47:
// persist.go now says "any debt once the jump passes 2^24 ms plus the
// time MaxDebt takes to drain to it"; the refusal is sound). The audit
// quoted limit/persist.go WriteTo
// says the count-min engine refuses a snapshot when "the clock jumps over
// 2^24 ms with a cell written or re-stamped after it that only its stamp
// can state, a debt near MaxDebt", and migrating.md Stop 47: "a
// count-min limiter's small debt ... is now taken". A debt of 1 (MaxDebt
// 2000) written one day after T during the encode is refused: read back
// over the day by the drain (1000/s) it passes MaxDebt, so it is stated
// at MaxDebt only 1999 ms before its stamp, 86,398 s after T. Any debt
// written after a jump past 2^24 ms + MaxDebt's drain time (2 s) is
// refused, however small (docs/snapshots.md states that rule exactly;
// the godoc's "a debt near MaxDebt" does not).
func TestAudit65FixedSmallDebtAfterJumpRefused(t *testing.T) {
	c := sketchtest.NewFakeClock()
	c.Set(a65T0)
	l := a65Limiter(t, c)
	l.AllowN(c.Now(), "k", 10)
	w := &testhook.Writer{N: 3, Hook: func() {
		c.Set(a65T0 + 86_400_000)
		l.AllowN(c.Now(), "w", 1)
	}}
	if _, err := l.WriteTo(w); !errors.Is(err, sketch.ErrTakeAgain) {
		t.Errorf("WriteTo = %v; want ErrTakeAgain: a debt of 1 (MaxDebt %v) written after a 1-day jump (limit/persist.go: \"any debt once the jump passes 2^24 ms plus the time MaxDebt takes to drain to it\")", err, l.MaxDebt())
	}
}
