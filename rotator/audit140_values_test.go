package rotator_test

// Audit 140: rotator.Config values at their ends: what Config reports,
// what a refusal names, and the lifetime at a fractional-ms Period.

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit140ConfigEnds: Generations 0 means 2, 2 and 1024 are taken as
// given (all built up front: Stats().Allocated); Period is reported as
// given, fractional ms included; refusals name the field with the value
// given.
func TestAudit140ConfigEnds(t *testing.T) {
	sc := sketch.Config{Hi: 1, Levels: 1, CellsPerLevel: 1}
	for _, c := range []struct {
		gens, want uint32
		period     time.Duration
	}{
		{0, 2, time.Millisecond},
		{2, 2, 1500 * time.Microsecond},
		{1024, 1024, math.MaxInt64},
		{3, 3, time.Millisecond + 1},
	} {
		r, err := rotator.New(rotator.Config{Sketch: sc, Generations: c.gens, Period: c.period})
		if err != nil {
			t.Errorf("Generations %d Period %v: %v", c.gens, c.period, err)
			continue
		}
		cfg := r.Config()
		if cfg.Generations != c.want || cfg.Period != c.period || r.Stats().Allocated != uint64(c.want) {
			t.Errorf("Generations %d Period %v: Config %d, %v, Allocated %d; want %d, %v, %d", c.gens, c.period, cfg.Generations, cfg.Period, r.Stats().Allocated, c.want, c.period, c.want)
		}
	}
	for _, c := range []struct {
		cfg   rotator.Config
		field string
		value any
	}{
		{rotator.Config{Sketch: sc, Period: time.Millisecond - 1}, "Period", time.Millisecond - 1},
		{rotator.Config{Sketch: sc, Period: math.MinInt64}, "Period", time.Duration(math.MinInt64)},
		{rotator.Config{Sketch: sc, Period: time.Second, Generations: 1}, "Generations", uint32(1)},
		{rotator.Config{Sketch: sc, Period: time.Second, Generations: 1025}, "Generations", uint32(1025)},
		{rotator.Config{Sketch: sketch.Config{Hi: 1, Levels: 9}, Period: time.Second}, "Levels", uint32(9)},
	} {
		_, err := rotator.New(c.cfg)
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) || ce.Field != c.field || ce.Value != c.value {
			t.Errorf("%+v: %v; want a *ConfigError naming %s with value %v", c.cfg, err, c.field, c.value)
		}
	}
}

// TestAudit140FractionalPeriodLifetime: with a Period of 1.5 ms (counted as
// 2 ms) and 3 generations, a write at 0 is read until 3 x 2 ms and gone
// then, after 3 periods.
func TestAudit140FractionalPeriodLifetime(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk}, Generations: 3, Period: 1500 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("k", 1)
	for ms := int64(1); ms <= 7; ms++ {
		clk.Set(ms)
		want := 1.0
		if ms >= 6 {
			want = 0
		}
		if got := r.QueryString("k"); got != want {
			t.Errorf("at %d ms: reads %v, want %v (a write at 0 lives 3 x 2 ms)", ms, got, want)
		}
	}
	if st := r.Stats(); st.Periods != 3 {
		t.Errorf("after 7 ms at a 2 ms Period: %d periods, want 3", st.Periods)
	}
}
