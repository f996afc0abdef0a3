package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit84coreAt is the At surface both implementations share.
type audit84coreAt interface {
	sketch.Scorer
	UpdateAt(t time.Time, key string, delta float64)
	QueryAt(t time.Time, key string) float64
	UpdateAndQueryAt(t time.Time, key string, delta float64) float64
	TryUpdateAt(t time.Time, key string, delta, limit float64) bool
}

// audit84coreTime picks an explicit time of one of the kinds a caller
// may pass: the fake clock's Now, a stored wall time (time.UnixMilli),
// one in the past, one ahead of the clock, the zero Time, one far away.
func audit84coreTime(rng *rand.Rand, clk *sketchtest.FakeClock) time.Time {
	now := clk.NowMillis()
	switch rng.IntN(10) {
	case 0:
		return clk.Now()
	case 1:
		return time.UnixMilli(now)
	case 2:
		return time.UnixMilli(now - rng.Int64N(5000))
	case 3:
		return time.UnixMilli(now + rng.Int64N(5000))
	case 4:
		return time.Time{}
	case 5:
		return time.UnixMilli(now).Add(-time.Duration(rng.Int64N(1e6))) // sub-ms earlier
		// (floor of a fraction before the ms)
	case 6:
		return time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	case 7:
		return time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	case 8:
		return clk.Now().In(time.FixedZone("x", 3600))
	default:
		return time.UnixMilli(now - 1)
	}
}

// audit84coreAdvance moves the clock: mostly small steps, sometimes back,
// sometimes by days or years.
func audit84coreAdvance(rng *rand.Rand, clk *sketchtest.FakeClock) {
	switch r := rng.IntN(100); {
	case r < 40:
	case r < 70:
		clk.Advance(time.Duration(1+rng.IntN(50)) * time.Millisecond)
	case r < 80:
		clk.Advance(time.Duration(rng.Int64N(int64(20 * time.Second))))
	case r < 90:
		clk.Advance(-time.Duration(rng.Int64N(int64(10 * time.Second))))
	case r < 97:
		clk.Advance(time.Duration(rng.Int64N(40*24)) * time.Hour)
	default:
		clk.Advance(time.Duration(1+rng.IntN(3)) * 365 * 24 * time.Hour)
	}
}

// TestAudit84CoreDiffExactIntegers: with decay None or Linear(1000/s) (one
// unit per ms), integer deltas and integer bounds below 2^24, float32 is
// exact, so the lock-free sketch and the reference must agree exactly on
// every result, TryUpdate decisions included, whatever mix of explicit
// times and short forms is used and however the clock moves.
func TestAudit84CoreDiffExactIntegers(t *testing.T) {
	for _, law := range []struct {
		name string
		d    decay.Decay
	}{{"None", decay.None()}, {"Linear1000", decay.Linear(1000)}} {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max} {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("%s/%v/%d", law.name, agg, seed), func(t *testing.T) {
					audit84coreDiffExact(t, law.d, agg, seed)
				})
			}
		}
	}
}

func audit84coreDiffExact(t *testing.T, d decay.Decay, agg sketch.Aggregator, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 84))
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	cfg := sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: d, Lo: -5000, Hi: 20000,
		Aggregator: agg, Seed: seed, Clock: clk}
	lf, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := reference.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var a, b audit84coreAt = lf, rf
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	for i := range 6000 {
		audit84coreAdvance(rng, clk)
		k := keys[rng.IntN(len(keys))]
		delta := float64(rng.IntN(400) - 150)
		limit := float64(rng.IntN(25000) - 5000)
		tt := audit84coreTime(rng, clk)
		var ga, gb any
		op := rng.IntN(10)
		switch op {
		case 0:
			a.UpdateAt(tt, k, delta)
			b.UpdateAt(tt, k, delta)
		case 1:
			ga, gb = a.QueryAt(tt, k), b.QueryAt(tt, k)
		case 2:
			ga, gb = a.UpdateAndQueryAt(tt, k, delta), b.UpdateAndQueryAt(tt, k, delta)
		case 3:
			ga, gb = a.TryUpdateAt(tt, k, delta, limit), b.TryUpdateAt(tt, k, delta, limit)
		case 4:
			a.Update([]byte(k), delta)
			b.Update([]byte(k), delta)
		case 5:
			ga, gb = a.QueryString(k), b.QueryString(k)
		case 6:
			ga, gb = a.UpdateAndQueryString(k, delta), b.UpdateAndQueryString(k, delta)
		case 7:
			ga, gb = a.TryUpdateString(k, delta, limit), b.TryUpdateString(k, delta, limit)
		case 8:
			ga, gb = a.TryUpdate([]byte(k), 0, limit), b.TryUpdate([]byte(k), 0, limit)
		case 9:
			da, db := a.QueryDetailed([]byte(k)), b.QueryDetailed([]byte(k))
			ga, gb = fmt.Sprint(da), fmt.Sprint(db)
		}
		if ga != gb {
			t.Fatalf("step %d op %d key %s delta %v limit %v t=%v (clock %d): lock-free %v, reference %v",
				i, op, k, delta, limit, tt, clk.NowMillis(), ga, gb)
		}
	}
	for _, k := range keys {
		if x, y := a.QueryString(k), b.QueryString(k); x != y {
			t.Fatalf("final %s: lock-free %v, reference %v", k, x, y)
		}
	}
}

// TestAudit84CoreDiffNeverBelow: with Exponential, Linear and a conforming
// custom law, negative and fractional deltas, Lo < 0 < Hi, explicit times
// of every kind and clock jumps up to years, each lock-free cell (L=1, so
// the estimate is the cell) is never below the reference cell that saw the
// same history (docs/precision.md), and stays close to it.
func TestAudit84CoreDiffNeverBelow(t *testing.T) {
	laws := []struct {
		name string
		d    decay.Decay
	}{
		{"Exp", decay.Exponential(0.3)},
		{"ExpFast", decay.Exponential(50)},
		{"Linear", decay.Linear(7.5)},
		{"Custom", audit84coreHalving{}},
	}
	for _, law := range laws {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/%d", law.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 8484))
				clk := sketchtest.NewFakeClock()
				clk.Set(-5_000_000) // a clock that reads negative
				cfg := sketch.Config{Levels: 1, CellsPerLevel: 8, Decay: law.d, Lo: -300, Hi: 700, Seed: seed, Clock: clk}
				lf, _ := sketch.New(cfg)
				rf, _ := reference.New(cfg)
				var a, b audit84coreAt = lf, rf
				for i := range 5000 {
					audit84coreAdvance(rng, clk)
					k := fmt.Sprintf("k%d", rng.IntN(20))
					delta := rng.Float64()*60 - 20
					tt := audit84coreTime(rng, clk)
					switch rng.IntN(4) {
					case 0:
						a.UpdateAt(tt, k, delta)
						b.UpdateAt(tt, k, delta)
					case 1:
						a.UpdateString(k, delta)
						b.UpdateString(k, delta)
					case 2:
						a.UpdateAndQueryAt(tt, k, delta)
						b.UpdateAndQueryAt(tt, k, delta)
					case 3:
						x, y := a.QueryAt(tt, k), b.QueryAt(tt, k)
						audit84coreClose(t, i, k, x, y)
					}
					x, y := a.QueryString(k), b.QueryString(k)
					audit84coreClose(t, i, k, x, y)
				}
			})
		}
	}
}

func audit84coreClose(t *testing.T, i int, k string, lf, ref float64) {
	t.Helper()
	if math.IsNaN(lf) || math.IsInf(lf, 0) {
		t.Fatalf("step %d %s: lock-free read %v", i, k, lf)
	}
	m := math.Max(math.Abs(ref), 1)
	if lf < ref-1e-12*m {
		t.Fatalf("step %d %s: lock-free %v below reference %v", i, k, lf, ref)
	}
	if lf > ref+2e-3*m {
		t.Fatalf("step %d %s: lock-free %v far above reference %v", i, k, lf, ref)
	}
}

// audit84coreHalving is a conforming custom law: the score halves every
// second, computed in closed form so that it composes.
type audit84coreHalving struct{}

func (audit84coreHalving) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1000)
}
