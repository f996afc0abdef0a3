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

// TestAudit83AddUpSweep: random histories near the rounding edges, on
// bounds no float32 holds and on the float32 extremes, agree with the
// local sketch (values; signed zeros aside, see the NegZero finding).
func TestAudit83AddUpSweep(t *testing.T) {
	e := newEnv(t, "go-redis", "standalone")
	ctx := context.Background()
	clk := sketchtest.NewFakeClock()
	clk.Set(5_000_000)
	rng := rand.New(rand.NewPCG(83, 83))
	for bi, b := range [][2]float64{{-0.1, 0.1}, {-1e12, 1e12}, {-math.MaxFloat32, math.MaxFloat32}, {0, 1e-30}, {-1e-38, 1e-38}, {-3, 16777217}} {
		cfg := Config{Name: fmt.Sprint("a83sw", bi), Levels: 2, CellsPerLevel: 4, Lo: b[0], Hi: b[1], Decay: decay.None(), Seed: 5, Clock: clk}
		rs := e.sketch(t, cfg)
		ls, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 4, Lo: b[0], Hi: b[1], Decay: decay.None(), Seed: 5, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 250 {
			key := fmt.Sprint("k", rng.IntN(5))
			est := ls.Query([]byte(key))
			var delta float64
			switch rng.IntN(7) {
			case 0:
				delta = math.Ldexp(1+rng.Float64(), math.Ilogb(est+1e-300)-53-rng.IntN(40))
			case 1:
				delta = b[1] * (0.3 + rng.Float64())
			case 2:
				delta = -est + math.Ldexp(rng.Float64(), math.Ilogb(est+1e-300)-60)
			case 3:
				delta = math.Ldexp(1, rng.IntN(300)-150)
			case 4:
				delta = math.MaxFloat64 * rng.Float64()
			case 5:
				f := float32(est)
				delta = float64(math.Nextafter32(f, float32(math.Inf(1)))) - est + math.Ldexp(1, math.Ilogb(est+1e-300)-55)*float64(1-2*rng.IntN(2))
			default:
				delta = b[0] * rng.Float64()
			}
			if rng.IntN(3) == 0 {
				delta = -delta
			}
			if math.IsNaN(delta) || math.IsInf(delta, 0) {
				continue
			}
			got, err := rs.UpdateAndQuery(ctx, key, delta)
			if err != nil {
				t.Fatal(err)
			}
			if want := ls.UpdateAndQuery([]byte(key), delta); got != want {
				t.Fatalf("bounds %v op %d: UpdateAndQuery(%s, %v) at %v: server %v, local %v", b, i, key, delta, est, got, want)
			}
		}
	}
}
