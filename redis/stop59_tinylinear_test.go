package redis

import (
	"context"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestTinyLinearRateMatchesLocal: a Linear rate below 2^-900 a second
// takes linearAt's tinyLinearAt on the server too (sketch.lua, stop 59):
// a credit of -1 under Linear(5e-324) moves its float32 step toward 0
// after a millisecond (it stayed at -1, below the exact -1 + 5e-327,
// audits 98 and 99), and the server reads what the local sketch reads,
// bit for bit, for both signs and a few ages.
func TestTinyLinearRateMatchesLocal(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for i, c := range []struct {
		rate, start float64
		ms          int64
	}{
		{5e-324, -1, 1}, {5e-324, 1, 1}, {0x1p-901, -0x1p-149, 1000}, {0x1p-901, 0x1p-149, 1000},
		{1e-300, -0.5, 1 << 30}, {1e-300, 0.5, 1 << 30},
	} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		d := decay.Linear(c.rate)
		rs := e.sketch(t, Config{Name: "tiny" + string(rune('a'+i)), Levels: 1, CellsPerLevel: 4, Lo: -1, Hi: 1, Decay: d, Seed: 3, Clock: clk})
		ls, err := sketch.New(sketch.Config{Levels: 1, CellsPerLevel: 4, Lo: -1, Hi: 1, Decay: d, Seed: 3, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Update(ctx, "k", c.start); err != nil {
			t.Fatal(err)
		}
		ls.Update([]byte("k"), c.start)
		clk.Set(1_000_000 + c.ms)
		srv, err := rs.UpdateAndQuery(ctx, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		loc := ls.UpdateAndQuery([]byte("k"), 0)
		if math.Float64bits(srv) != math.Float64bits(loc) {
			t.Errorf("Linear(%g), %v then %d ms: server %v, local %v", c.rate, c.start, c.ms, srv, loc)
		}
		if c.start == -1 && c.ms == 1 && !(srv > -1) {
			t.Errorf("Linear(%g): a credit of -1 a millisecond later reads %v on the server, below the exact -1 + 5e-327", c.rate, srv)
		}
	}
}
