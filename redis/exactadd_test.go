package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestExactAdd: the function's add stores the least float32 at or above
// the exact sum, as the local sketch does (docs/precision.md, "The add is
// exact before the rounding up"): +1 on 2^60, which the double add
// absorbs, steps the cell one float32 (2^37) each time; and on one
// history of deltas chosen to round (far below a double ulp of the
// score, a float32 step plus or minus less than a double ulp, either
// sign, clamps at Lo and Hi), with no decay and a still clock, every
// estimate equals the local sketch's bit for bit (same Config, same
// hashing).
func TestExactAdd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		rs := e.sketch(t, Config{Name: e.ns("exact"), Levels: 1, CellsPerLevel: 16, Hi: 3e38, Clock: clk})
		if err := rs.Update(ctx, "k", 0x1p60); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := rs.Update(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := rs.Query(ctx, "k"); err != nil || got != 0x1p60+3*0x1p37 {
			t.Fatalf("2^60 + 1 + 1 + 1: Query %v, %v; want three float32 steps up, %v", got, err, 0x1p60+3*0x1p37)
		}

		// The edges of the step: from -2^k toward zero (half the quantum
		// of -2^k's binade), from the least negative normal into the
		// subnormals, subnormals, a sum on Lo with the error above it, a
		// sum on Hi with the error above it (no step past Hi), a Hi no
		// float32 holds.
		for i, c := range []struct{ start, delta, lo, hi float64 }{
			{-1024, 0x1p-60, -1e30, 1e30},
			{-0x1p-126, 0x1p-200, -1e30, 1e30},
			{0x1p-149, 0x1p-200, -1e30, 1e30},
			{0, 0x1p-200, -1e30, 1e30},
			{-7, -1 + 0x1p-60, -8, 1e30},
			{-7, -1 - 0x1p-60, -8, 1e30},
			{15, 1 + 0x1p-60, -8, 16},
			{0.05, 0.05 + 0x1p-70, 0, 0.1},
			{0x1p100, 1e14, 0, 3e38},
			{3e38, 1e30, 0, math.MaxFloat32},
		} {
			name := e.ns(fmt.Sprint("edge", i))
			rs := e.sketch(t, Config{Name: name, Levels: 2, CellsPerLevel: 4, Lo: c.lo, Hi: c.hi, Clock: clk})
			ls, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 4, Lo: c.lo, Hi: c.hi, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.Update(ctx, "k", c.start); err != nil {
				t.Fatal(err)
			}
			ls.Update([]byte("k"), c.start)
			got, err := rs.UpdateAndQuery(ctx, "k", c.delta)
			if err != nil {
				t.Fatal(err)
			}
			if want := ls.UpdateAndQuery([]byte("k"), c.delta); math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("edge %d: %v + %v in [%v, %v]: %v on the server, %v locally", i, c.start, c.delta, c.lo, c.hi, got, want)
			}
		}

		const lo, hi = -1e30, 1e30
		cfg := Config{Name: e.ns("exactdiff"), Levels: 3, CellsPerLevel: 8, Lo: lo, Hi: hi, Decay: decay.None(), Seed: 9, Clock: clk}
		rs = e.sketch(t, cfg)
		ls, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 8, Lo: lo, Hi: hi, Decay: decay.None(), Seed: 9, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(49, 1))
		for i := range 400 {
			key := fmt.Sprint("k", rng.IntN(12))
			est := ls.Query([]byte(key))
			ulp32 := 0x1p-149
			if est != 0 {
				ulp32 = math.Abs(float64(math.Nextafter32(float32(est), float32(math.Inf(1)))) - est)
			}
			var delta float64
			switch rng.IntN(6) {
			case 0:
				delta = math.Ldexp(1+rng.Float64(), math.Ilogb(est+1)-54-rng.IntN(30))
			case 1:
				delta = ulp32*float64(1+rng.IntN(3)) + math.Ldexp(1+rng.Float64(), math.Ilogb(est+1)-54-rng.IntN(8))*float64(1-2*rng.IntN(2))
			case 2:
				delta = math.Ldexp(1+rng.Float64(), rng.IntN(60))
			case 3:
				delta = float64(rng.IntN(100))
			case 4:
				delta = 1e30 // clamps at Hi
			default:
				delta = -math.Ldexp(1+rng.Float64(), rng.IntN(104)) // down to Lo at times
			}
			if rng.IntN(3) == 0 {
				delta = -delta
			}
			got, err := rs.UpdateAndQuery(ctx, key, delta)
			if err != nil {
				t.Fatal(err)
			}
			if want := ls.UpdateAndQuery([]byte(key), delta); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("op %d: UpdateAndQuery(%s, %v) at %v = %v on the server, %v locally", i, key, delta, est, got, want)
			}
		}
	})
}
