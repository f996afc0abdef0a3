package sketch_test

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type audit84coreTryStep struct {
	update     bool // Update(delta) instead of a TryUpdate
	delta, lim float64
	want       bool
	after      float64 // Query after the step (NaN: do not check)
}

// TestAudit84CoreTryUpdateBoundaries: API.md: "the decision is aggregate +
// delta <= limit even when limit > Hi (scores stay clamped at Hi)", a
// float64 compare as the reference's; checked on the lock-free sketch,
// the reference, and the rotator, through the short and the At forms.
func TestAudit84CoreTryUpdateBoundaries(t *testing.T) {
	nan := math.NaN()
	p60 := math.Ldexp(1, 60)
	cases := []struct {
		name   string
		lo, hi float64
		d      decay.Decay
		agg    sketch.Aggregator
		steps  []audit84coreTryStep
	}{
		{"limitAboveHi", 0, 10, nil, sketch.Min, []audit84coreTryStep{
			{update: true, delta: 50, after: 10},
			{delta: 5, lim: 15, want: true, after: 10},
			{delta: 5, lim: math.Nextafter(15, 0), want: false, after: 10},
			{delta: 0, lim: 10, want: true, after: 10},
			{delta: 0, lim: math.Nextafter(10, 0), want: false, after: 10},
			{delta: 1e300, lim: math.MaxFloat64, want: true, after: 10},
		}},
		{"exactSum", 0, 100, nil, sketch.Min, []audit84coreTryStep{
			{delta: 3, lim: 3, want: true, after: 3},
			{delta: 0.25, lim: 3.25, want: true, after: 3.25},
			{delta: 0.25, lim: 3.4999999, want: false, after: 3.25},
			{delta: 0.25, lim: 3.5, want: true, after: 3.5},
		}},
		{"roundsDownToLimit", 0, 100, nil, sketch.Min, []audit84coreTryStep{
			{delta: 1, lim: 1, want: true, after: 1},
			{delta: math.Ldexp(1, -53), lim: 1, want: true, after: nan}, // 1 + 2^-53 == 1 in float64
		}},
		{"bigRoundsDown", 0, math.Ldexp(1, 100), nil, sketch.Min, []audit84coreTryStep{
			{update: true, delta: p60, after: p60},
			{delta: 1, lim: p60, want: true, after: nan},
		}},
		{"negative", -5, 5, nil, sketch.Min, []audit84coreTryStep{
			{delta: -10, lim: -10, want: true, after: -5},
			{delta: -10, lim: math.Nextafter(-15, -20), want: false, after: -5},
			{delta: -10, lim: -15, want: true, after: -5},
			{delta: 3, lim: -2, want: true, after: -2},
			{delta: 0, lim: -2, want: true, after: -2},
			{delta: 0, lim: -2.5, want: false, after: -2},
		}},
		{"hiPointOne", 0, 0.1, nil, sketch.Min, []audit84coreTryStep{
			{update: true, delta: 1, after: 0.1},
			{delta: 0, lim: 0.1, want: true, after: 0.1},
			{delta: 1e-18, lim: 0.1, want: true, after: 0.1},
			{delta: 1e-16, lim: 0.1, want: false, after: 0.1},
		}},
		{"infHi", 0, math.Inf(1), decay.Exponential(1e-3), sketch.Min, []audit84coreTryStep{
			{update: true, delta: math.MaxFloat64, after: nan},
			{delta: 1, lim: math.MaxFloat64, want: true, after: nan},
			{delta: 1, lim: 1e30, want: false, after: nan},
		}},
		{"meanLimitAboveHi", -10, 10, nil, sketch.Mean, []audit84coreTryStep{
			{update: true, delta: 8, after: 8},
			{delta: 8, lim: 16, want: true, after: 10},
			{delta: -30, lim: -20, want: true, after: -10},
		}},
	}
	type impl struct {
		name string
		mk   func(cfg sketch.Config) audit84coreAt
	}
	impls := []impl{
		{"lockfree", func(cfg sketch.Config) audit84coreAt { s, _ := sketch.New(cfg); return s }},
		{"reference", func(cfg sketch.Config) audit84coreAt { s, _ := reference.New(cfg); return s }},
		{"rotator", func(cfg sketch.Config) audit84coreAt {
			r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: 3, Period: time.Hour})
			if err != nil {
				panic(err)
			}
			return r
		}},
	}
	for _, c := range cases {
		for _, im := range impls {
			for _, at := range []bool{false, true} {
				clk := sketchtest.NewFakeClock()
				clk.Set(5000)
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 1 << 12, Lo: c.lo, Hi: c.hi, Decay: c.d, Aggregator: c.agg, Clock: clk}
				s := im.mk(cfg)
				if s == nil {
					t.Fatalf("%s: cannot build %s", c.name, im.name)
				}
				for i, st := range c.steps {
					if st.update {
						s.UpdateString("k", st.delta)
					} else {
						var got bool
						if at {
							got = s.TryUpdateAt(clk.Now(), "k", st.delta, st.lim)
						} else {
							got = s.TryUpdate([]byte("k"), st.delta, st.lim)
						}
						if got != st.want {
							t.Errorf("%s/%s/at=%v step %d: TryUpdate(k, %v, %v) = %v; want %v (score before: see previous step)",
								c.name, im.name, at, i, st.delta, st.lim, got, st.want)
						}
					}
					q := s.QueryString("k")
					if math.IsNaN(q) || math.IsInf(q, 0) {
						t.Fatalf("%s/%s step %d: Query %v", c.name, im.name, i, q)
					}
					if !math.IsNaN(st.after) && q != st.after {
						t.Errorf("%s/%s/at=%v step %d: Query = %v; want %v", c.name, im.name, at, i, q, st.after)
					}
				}
			}
		}
	}
}
