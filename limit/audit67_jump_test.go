package limit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit67JumpRefusalDocExample: docs/migrating.md, Stop 47: refused
// "when such a cell can only be recorded more than 2^24 ms after T: ...
// a count-min limiter's debt of 10 with MaxDebt 2000 at 1000/s once the
// jump passes 2^24 ms + about 1.99 s"; limit/persist.go: "any debt once
// the jump passes 2^24 ms plus the time MaxDebt takes to drain to it".
// A Period of a day so that no promotion refuses it first: a debt of 10
// written after a jump of 2^24 ms + 1.9 s is taken (and restored at T it
// reads at least 10 tokens of debt from the write on), one after 2^24 ms
// + 2.1 s is refused with sketch.ErrTakeAgain.
func TestAudit67JumpRefusalDocExample(t *testing.T) {
	for _, c := range []struct {
		extra  int64
		refuse bool
	}{{1900, false}, {2100, true}, {-3_600_000, false}} {
		clk := sketchtest.NewFakeClock()
		const t0 = 1_700_000_000_000
		clk.Set(t0)
		l, err := limit.New(1000, 1000, limit.WithClock(clk), limit.WithSeed(1), limit.WithMaxDebt(2000),
			limit.WithEngine(limit.CountMin), limit.WithPeriod(24*time.Hour), limit.WithSize(2, 64))
		if err != nil {
			t.Fatal(err)
		}
		J := int64(1<<24) + c.extra
		w := &testhook.Writer{N: 2, Hook: func() {
			clk.Set(t0 + J)
			l.AllowN(clk.Now(), "k", 10)
		}}
		_, err = l.WriteTo(w)
		if (err != nil) != c.refuse || err != nil && !errors.Is(err, sketch.ErrTakeAgain) {
			t.Errorf("jump 2^24 ms %+d ms: WriteTo error %v, want refused: %v", c.extra, err, c.refuse)
			continue
		}
		if err != nil {
			continue
		}
		rclk := sketchtest.NewFakeClock()
		rclk.Set(t0)
		r, _ := limit.New(1000, 1000, limit.WithClock(rclk), limit.WithSeed(1), limit.WithMaxDebt(2000),
			limit.WithEngine(limit.CountMin), limit.WithPeriod(24*time.Hour), limit.WithSize(2, 64))
		if _, err := r.ReadFrom(&w.Buf); err != nil {
			t.Fatal(err)
		}
		rclk.Set(t0 + J)
		if tk := r.TokensAt(rclk.Now(), "k"); tk > 990 {
			t.Errorf("jump 2^24 ms %+d ms: restored at T, at the write's time the key has %v tokens (want <= 990: its debt of 10)", c.extra, tk)
		}
	}
}
