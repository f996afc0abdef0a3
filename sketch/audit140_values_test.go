package sketch_test

// Audit 140: special values for sketch's Config fields and method
// parameters not swept before: the offending value as reported, Merge's
// overlap at its ends, TryUpdate limits at the float64 ends, At times at
// the ends of the clock.

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit140ConfigErrorNamesFieldAndValue: "An invalid Config is a
// *ConfigError naming the field and the value": for values at the ends of
// each field's type, Field is the field and Value is the value given
// (bit for bit for floats, NaN and -0 included).
func TestAudit140ConfigErrorNamesFieldAndValue(t *testing.T) {
	negZero := math.Copysign(0, -1)
	above := math.Nextafter(math.MaxFloat32, math.Inf(1))
	for _, c := range []struct {
		cfg   sketch.Config
		field string
		value any
	}{
		{sketch.Config{Hi: 1, Levels: 9}, "Levels", uint32(9)},
		{sketch.Config{Hi: 1, Levels: math.MaxUint32}, "Levels", uint32(math.MaxUint32)},
		{sketch.Config{Hi: 1, CellsPerLevel: 1<<30 + 1}, "CellsPerLevel", uint32(1<<30 + 1)},
		{sketch.Config{Hi: 1, CellsPerLevel: math.MaxUint32}, "CellsPerLevel", uint32(math.MaxUint32)},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, MaxBytes: -1}, "MaxBytes", int64(-1)},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, MaxBytes: math.MinInt64}, "MaxBytes", int64(math.MinInt64)},
		{sketch.Config{Hi: 1, Levels: 8, CellsPerLevel: 1 << 30}, "CellsPerLevel", uint32(1 << 30)},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, MaxBytes: 1}, "CellsPerLevel", uint32(16)},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Aggregator: 3}, "Aggregator", sketch.Aggregator(3)},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Aggregator: 255}, "Aggregator", sketch.Aggregator(255)},
		{sketch.Config{Hi: math.NaN(), CellsPerLevel: 16}, "Hi", math.NaN()},
		{sketch.Config{Hi: above, CellsPerLevel: 16}, "Hi", above},
		{sketch.Config{Lo: -above, Hi: 1, CellsPerLevel: 16}, "Lo", -above},
		{sketch.Config{Lo: 5e-324, Hi: 1, CellsPerLevel: 16}, "Lo", 5e-324},
		{sketch.Config{Lo: -1, Hi: -5e-324, CellsPerLevel: 16}, "Hi", -5e-324},
		{sketch.Config{Lo: negZero, Hi: negZero, CellsPerLevel: 16}, "Hi", nil},
		{sketch.Config{Hi: math.Inf(1), CellsPerLevel: 16}, "Hi", math.Inf(1)},
		{sketch.Config{Lo: math.Inf(-1), Hi: 1, CellsPerLevel: 16}, "Lo", math.Inf(-1)},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Decay: decay.Exponential(0)}, "Decay", nil},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Decay: decay.Exponential(-5e-324)}, "Decay", nil},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Decay: decay.Linear(math.NaN())}, "Decay", nil},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Decay: decay.Linear(negZero)}, "Decay", nil},
		{sketch.Config{Hi: 1, CellsPerLevel: 16, Decay: decay.Linear(math.Inf(1))}, "Decay", nil},
	} {
		s, err := sketch.New(c.cfg)
		var ce *sketch.ConfigError
		if s != nil || !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Errorf("%+v: New = %v, %v; want a *ConfigError", c.cfg, s, err)
			continue
		}
		if ce.Field != c.field {
			t.Errorf("%+v: Field %q, want %q (%v)", c.cfg, ce.Field, c.field, err)
		}
		if c.value == nil {
			continue
		}
		if f, ok := c.value.(float64); ok {
			g, ok := ce.Value.(float64)
			if !ok || math.Float64bits(g) != math.Float64bits(f) {
				t.Errorf("%+v: Value %#v, want %v as given", c.cfg, ce.Value, f)
			}
			continue
		}
		if ce.Value != c.value {
			t.Errorf("%+v: Value %#v (%T), want %#v (%T)", c.cfg, ce.Value, ce.Value, c.value, c.value)
		}
	}
}

// TestAudit140MergeOverlapEnds: Merge's overlap "rounded up to whole ms, as
// clocks count" raises every cell by rate x overlap under Linear (1 ns and
// 1 ms raise by one ms of drain, 1.5 ms by two), capped at Hi (MaxInt64
// ns, or a rate of MaxFloat64 a second); other laws ignore it; a
// 5e-324/s rate raises by at least the drain (one float32 step).
func TestAudit140MergeOverlapEnds(t *testing.T) {
	const hi = 1e6
	for _, c := range []struct {
		law           decay.Decay
		ov            time.Duration
		key, neverKey float64
	}{
		{decay.Linear(1000), 0, 8, 0},
		{decay.Linear(1000), 1, 9, 1},
		{decay.Linear(1000), time.Millisecond, 9, 1},
		{decay.Linear(1000), 1500 * time.Microsecond, 10, 2},
		{decay.Linear(1000), math.MaxInt64, hi, hi},
		{decay.Linear(math.MaxFloat64), 1, hi, hi},
		{decay.Exponential(1), math.MaxInt64, 8, 0},
		{decay.None(), math.MaxInt64, 8, 0},
	} {
		clk := sketchtest.NewFakeClock()
		cfg := sketch.Config{Hi: hi, CellsPerLevel: 1024, Decay: c.law, Clock: clk, Seed: 140}
		a, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a.UpdateString("k", 5)
		b.UpdateString("k", 3)
		if err := a.Merge(b, c.ov); err != nil {
			t.Errorf("%v overlap %v: %v", c.law, c.ov, err)
			continue
		}
		if got, never := a.QueryString("k"), a.QueryString("never"); got != c.key || never != c.neverKey {
			t.Errorf("%v overlap %v: merged key %v, unwritten key %v; want %v, %v", c.law, c.ov, got, never, c.key, c.neverKey)
		}
	}
	clk := sketchtest.NewFakeClock()
	cfg := sketch.Config{Hi: 10, CellsPerLevel: 64, Decay: decay.Linear(5e-324), Clock: clk, Seed: 140}
	a, _ := sketch.New(cfg)
	b, _ := sketch.New(cfg)
	a.UpdateString("k", 5)
	b.UpdateString("k", 3)
	if err := a.Merge(b, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if got := a.QueryString("k"); got <= 8 || got > 8+1e-5 {
		t.Errorf("Linear(5e-324), overlap MaxInt64: merged key %v, want just above 8", got)
	}
}

// TestAudit140TryUpdateLimitEnds: "the decision is aggregate + delta <=
// limit" as a float64 compare, for limits and deltas at the float64 ends
// (±MaxFloat64, ±5e-324, -0); scores stay within [Lo, Hi]. ("a
// TryUpdate's aggregate + delta <= limit is a float64 compare, as theirs";
// "Every add stores the least float32 at or above the exact sum".)
func TestAudit140TryUpdateLimitEnds(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	s, err := sketch.New(sketch.Config{Hi: 10, CellsPerLevel: 16, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	negZero := math.Copysign(0, -1)
	for i, c := range []struct {
		delta, limit float64
		admit        bool
		after        float64
	}{
		{0, -5e-324, false, 0},
		{0, negZero, true, 0},
		{negZero, negZero, true, 0},
		{5e-324, 0, false, 0},
		{5e-324, 5e-324, true, math.SmallestNonzeroFloat32}, // rounded up to float32
		{math.MaxFloat64, math.MaxFloat64, true, 10},
		{math.MaxFloat64, math.MaxFloat64, true, 10}, // 10 + MaxFloat64 rounds to MaxFloat64
		{1, 10, false, 10},
		{-math.MaxFloat64, -math.MaxFloat64, true, 0},
		{1, math.MaxFloat64, true, 1},
		// The float64 compare 1 + 5e-324 <= 1 admits, and the add stores
		// the least float32 above the exact sum (both documented): the key
		// then reads one float32 step above the limit, and a zero delta is
		// denied.
		{5e-324, 1, true, 1 + 0x1p-23},
		{0, 1, false, 1 + 0x1p-23},
	} {
		if got := s.TryUpdateString("t", c.delta, c.limit); got != c.admit {
			t.Errorf("step %d: TryUpdate(%v, %v) = %v, want %v", i, c.delta, c.limit, got, c.admit)
		}
		if got := s.QueryString("t"); got != c.after {
			t.Errorf("step %d: after TryUpdate(%v, %v) reads %v, want %v", i, c.delta, c.limit, got, c.after)
		}
	}
}

// TestAudit140AtTimesAtClockEnds: with the clock at either end of int64
// milliseconds, the At forms take the zero time.Time and far times without
// a panic or NaN: a t ahead of the clock is the clock's reading, one
// behind it counts no time.
func TestAudit140AtTimesAtClockEnds(t *testing.T) {
	times := []time.Time{{}, time.Unix(math.MinInt64, 0), time.Unix(math.MaxInt64, 0), time.Unix(0, 0), time.UnixMilli(math.MaxInt64)}
	for _, now := range []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, math.MaxInt64 - 1, math.MaxInt64} {
		for _, tm := range times {
			clk := sketchtest.NewFakeClock()
			clk.Set(now)
			s, err := sketch.New(sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk, Decay: decay.Exponential(1)})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("clock %d, t %v", now, tm)
			s.UpdateAt(tm, "k", 10)
			if got := s.QueryAt(tm, "k"); got != 10 {
				t.Errorf("%s: QueryAt after UpdateAt(10) = %v, want 10", name, got)
			}
			if got := s.QueryString("k"); got != 10 {
				t.Errorf("%s: Query after UpdateAt(10) = %v, want 10 (no time passed on the clock)", name, got)
			}
			if !s.TryUpdateAt(tm, "k", 1, 11) || s.TryUpdateAt(tm, "k", 1, 11) {
				t.Errorf("%s: TryUpdateAt(1, 11) not admitted exactly once", name)
			}
			if got := s.UpdateAndQueryAt(tm, "k", 1); got != 12 {
				t.Errorf("%s: UpdateAndQueryAt = %v, want 12", name, got)
			}
		}
	}
}

// The sweep-due overflow near the clock's end (audit 140) is checked
// without timing in internal/core: TestAudit140FixedSweepDueSaturatesNearClockEnd.
