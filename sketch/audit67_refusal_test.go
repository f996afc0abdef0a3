package sketch_test

import (
	"errors"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit67RefusalOnlyWhereListed: docs/snapshots.md, "Consistency
// under concurrent updates": a clock jump during the encode refuses the
// snapshot (ErrTakeAgain) only for a cell "that can only be recorded more
// than 2^24 ms after T (a credit; a custom law's score; one whose
// read-back value passes Hi so far ...)" or for stamps spanning more than
// 2^31 ms. A sketch under None, or under a slow Linear/Exponential with
// room under Hi, with a write after a jump of 5 h or 12 days (2^30 ms),
// is taken, and restored on a clock at T it reads at least the updates
// before T plus the write from T on; a jump past 2^31 ms is taken too when
// nothing re-bases the stamps (a write, no sweep); a credit's or a custom law's write past 2^24 ms.
func TestAudit67RefusalOnlyWhereListed(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	cases := []struct {
		name   string
		d      decay.Decay
		lo, hi float64
		delta  float64
		jump   int64
		refuse bool
		pre    float64
	}{
		{"none 5h", decay.None(), 0, 1e9, 3, 5 * 3_600_000, false, 0},
		{"none 2^30", decay.None(), 0, 1e9, 3, 1 << 30, false, 0},
		{"none 2^31+1000", decay.None(), 0, 1e9, 3, 1<<31 + 1000, false, 0}, // no re-base: the stamps span less
		{"linear slow 5h", decay.Linear(1e-3), 0, 1e9, 3, 5 * 3_600_000, false, 0},
		{"exp slow 5h", decay.Exponential(1e-6), 0, 1e9, 3, 5 * 3_600_000, false, 0},
		{"credit 5h", decay.Linear(1e-4), -100, 1e9, 1, 5 * 3_600_000, true, -10},
		{"credit 4h", decay.Linear(1e-4), -100, 1e9, 1, 4 * 3_600_000, false, -10},
		{"custom 5h", customExp56{1e-6}, 0, 1e9, 3, 5 * 3_600_000, true, 0},
		{"custom 4h", customExp56{1e-6}, 0, 1e9, 3, 4 * 3_600_000, false, 0},
	}
	for _, c := range cases {
		if c.pre == 0 {
			c.pre = 10
		}
		cfg := func(k sketch.Clock) sketch.Config {
			return sketch.Config{Levels: 2, CellsPerLevel: 64, Seed: 3, Decay: c.d, Lo: c.lo, Hi: c.hi, Clock: k}
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(t0 - 1000)
		s, _ := sketch.New(cfg(clk))
		s.UpdateString("k", c.pre)
		clk.Set(t0)
		w := &testhook.Writer{Hook: func() {
			clk.Set(t0 + c.jump)
			s.UpdateString("k", c.delta)
		}}
		_, err := s.WriteTo(w)
		if (err != nil) != c.refuse || err != nil && !errors.Is(err, sketch.ErrTakeAgain) {
			t.Errorf("%s: WriteTo error %v, want refused (ErrTakeAgain): %v", c.name, err, c.refuse)
			continue
		}
		if err != nil {
			continue
		}
		rclk := sketchtest.NewFakeClock()
		rclk.Set(t0)
		r, _ := sketch.New(cfg(rclk))
		if err := r.UnmarshalBinary(w.Buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		for _, q := range []int64{0, c.jump / 2, c.jump, c.jump + 1000} {
			rclk.Set(t0 + q)
			clk.Set(max(t0+q, t0+c.jump))
			got := r.QueryString("k")
			var want float64
			if q >= c.jump {
				want = s.QueryString("k")
			} else if c.pre > 0 {
				want = c.pre * 0.999 // at least the update before T (slow laws: 0.1% decay at most)
			} else {
				want = c.pre // a credit drains toward 0: at least its value at T
			}
			if got < want-1e-9 {
				t.Errorf("%s: restored at T, read at T+%d: %v, below %v", c.name, q, got, want)
			}
		}
	}
}
