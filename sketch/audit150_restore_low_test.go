package sketch_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit150RestoreAtLowEndAgesHold: fed71ea's readFrom stamps a cell
// older than the scale's first millisecond now, decayed once. A snapshot
// taken at 0 ms holds keys of ages 0, 1 ms, 1 s, 2^28, 2^29 - 1, 2^29
// (sweepKeep), 2^30 and 2^31 - 2^20 ms (Linear(0.001): 1e6 drains 1 per
// 1000 s); it is restored on clocks at MinInt64, MinInt64+1,
// MinInt64+2^29 - 1, MinInt64+2^29, MinInt64+2^31 (the restore's wall
// time is before the snapshot's: no downtime). Each key then reads its
// score less its age's drain (within the float32 rounding up), and at
// every 2^27 ms step to 2^32 ms later (an Update each step, so the
// horizon sweeps) never more than that score less the whole elapsed drain
// (and never less: the sketch does not underestimate).
func TestAudit150RestoreAtLowEndAgesHold(t *testing.T) {
	const v, rate = 1e6, 0.001
	ages := []int64{0, 1, 1000, 1 << 28, 1<<29 - 1, 1 << 29, 1 << 30, 1<<31 - 1<<20}
	cfg := sketch.Config{Hi: 1e9, Levels: 2, CellsPerLevel: 256, Decay: decay.Linear(rate), Seed: 150}
	ca := sketchtest.NewFakeClock()
	ca.Set(-ages[len(ages)-1])
	cfg.Clock = ca
	a, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(ages) - 1; i >= 0; i-- {
		ca.Set(-ages[i])
		a.UpdateString(fmt.Sprint("k", i), v)
	}
	ca.Set(0)
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()
	want := func(elapsed int64) float64 { return max(0, v-rate*float64(elapsed)/1000) }
	const tol = 0.25 // float32 steps of 1e6 (0.0625) and a round up or two
	for _, base := range []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 1<<29 - 1, math.MinInt64 + 1<<29, math.MinInt64 + 1<<31} {
		cb := sketchtest.NewFakeClock()
		cb.Set(base)
		cfg.Clock = cb
		b, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatalf("base %d: %v", base, err)
		}
		for step := int64(0); step <= 32; step++ {
			el := step << 27
			cb.Set(base + el)
			b.UpdateString("other", 0)
			for i, age := range ages {
				q, w := b.QueryString(fmt.Sprint("k", i)), want(age+el)
				if q > w+tol || q < w-tol {
					t.Errorf("restored at %d ms, key of age %d ms, %v later: reads %v, want %v", base, age, time.Duration(el)*time.Millisecond, q, w)
				}
			}
		}
	}
}
