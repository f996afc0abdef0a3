package grudge_test

// Contract conformance (audit11): the root package grudge and grudgetest
// as shared/API.md ("grudge (root package) and grudgetest") and issue 12
// state them, written as a grudge v0.1.0 user reading that page would.
// Shapes that do not compile are in audit11_api_contract_grudge_test.go
// behind the audit11contract tag.

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch"
)

// a11Law is a user's own Decay (slow path): halves each second.
type a11Law struct{}

func (a11Law) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 {
		return score
	}
	return score * math.Exp2(-float64(dtMillis)/1000)
}

var (
	_ grudge.Decay                                = a11Law{}
	_ func(float64) grudge.Decay                  = grudge.Exponential
	_ func(float64) grudge.Decay                  = grudge.Linear
	_ grudge.Clock                                = grudgetest.NewFakeClock()
	_ grudge.Ticker                               = grudgetest.NewFakeTicker()
	_ func() *grudgetest.FakeClock                = grudgetest.NewFakeClock
	_ func() *grudgetest.FakeTicker               = grudgetest.NewFakeTicker
	_ func([]float64) float64                     = grudge.Min
	_ grudge.Aggregator                           = func(s []float64) float64 { return s[0] }
	_ func(grudge.Config) (*grudge.Sketch, error) = grudge.New
)

// TestAudit11APIGrudgeSketch: the Config literal as API.md lists it,
// every field with its stated type, a custom aggregator and a custom law,
// and the argument order of TryUpdate.
func TestAudit11APIGrudgeSketch(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	var (
		levels, cells uint32               = 3, 512
		law           grudge.Decay         = grudge.Exponential(1)
		lo, hi        float64              = 0, 1000
		agg           grudge.Aggregator    = grudge.Min
		hasher        grudge.HasherFactory = grudge.SipHash()
		clock         grudge.Clock         = fc
	)
	s, err := grudge.New(grudge.Config{Levels: levels, CellsPerLevel: cells, Decay: law, Lo: lo, Hi: hi, Aggregator: agg, Hasher: hasher, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if !s.TryUpdate([]byte("k"), 4, 5) || s.TryUpdate([]byte("k"), 5, 4) {
		t.Fatal("TryUpdate(key, delta, limit): order not as stated")
	}
	fc.Advance(time.Second)
	if q, want := s.Query([]byte("k")), 4*math.Exp(-1); q < want || q > want*1.0001 {
		t.Errorf("after 1 s of Exponential(1): %v, want %v", q, want)
	}
	r := s.QueryDetailed([]byte("k"))
	if len(r.LevelScores) != int(levels) || len(r.CellIndexes) != int(levels) {
		t.Errorf("QueryDetailed: %+v, want %d levels", r, levels)
	}
	// A custom aggregator (any func) and a custom law work.
	sum := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s
	}
	c, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 512, Decay: a11Law{}, Hi: 1000, Aggregator: sum, Hasher: grudge.Murmur3(), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	c.Update([]byte("k"), 2)
	if q := c.Query([]byte("k")); q != 6 {
		t.Errorf("custom sum aggregator over 3 levels: %v, want 6", q)
	}
	fc.Advance(time.Second)
	if q := c.Query([]byte("k")); q < 3 || q > 3.001 {
		t.Errorf("custom law after 1 s: %v, want 3 (1 per level x 3)", q)
	}
	// nil Clock: real time.
	if _, err := grudge.New(grudge.Config{CellsPerLevel: 16, Hi: 1}); err != nil {
		t.Errorf("nil Clock: %v", err)
	}
	// Errors match ErrInvalidConfig and are *sketch.ConfigError (issue 12).
	_, err = grudge.New(grudge.Config{Lo: 5, Hi: 1})
	var ce *sketch.ConfigError
	if !errors.Is(err, grudge.ErrInvalidConfig) || !errors.As(err, &ce) {
		t.Errorf("Lo=5,Hi=1: %v, want a *ConfigError matching ErrInvalidConfig", err)
	}
}

// TestAudit11APIGrudgeSuggestLevels: grudge's order (hotKeys,
// cellsPerLevel, targetP); the Checked form refuses degenerate input.
func TestAudit11APIGrudgeSuggestLevels(t *testing.T) {
	if got := suggested(grudge.SuggestLevels(100_000, 1000, 0.01)); got != 8 {
		t.Errorf("SuggestLevels(hot=100000, M=1000, 0.01) = %d, want 8", got)
	}
	if got := suggested(grudge.SuggestLevels(1000, 100_000, 0.01)); got != 1 {
		t.Errorf("SuggestLevels(hot=1000, M=100000, 0.01) = %d, want 1", got)
	}
	for _, in := range []struct {
		h, m uint32
		p    float64
	}{{0, 100, 0.01}, {10, 0, 0.01}, {10, 100, 0}, {10, 100, 1}, {10, 100, math.NaN()}} {
		if _, err := grudge.SuggestLevels(in.h, in.m, in.p); err == nil {
			t.Errorf("SuggestLevelsChecked(%d, %d, %v): no error", in.h, in.m, in.p)
		}
	}
}

// TestAudit11APIGrudgeRotatorTicker: "grudgetest.NewFakeTicker() (Tick()
// rotates once; Rotations() read right after sees it)"; with a Ticker,
// rotation follows its ticks; Close stops it and is idempotent.
func TestAudit11APIGrudgeRotatorTicker(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	ft := grudgetest.NewFakeTicker()
	var tk grudge.Ticker = ft
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 128, Hi: 100, Clock: fc},
		Generations: 2,
		Period:      time.Second,
		Ticker:      tk,
	})
	if err != nil {
		t.Fatal(err)
	}
	var _ func() int64 = rot.Rotations
	rot.Update([]byte("k"), 3)
	fc.Advance(10 * time.Second) // time alone does not rotate a ticker-driven rotator
	if n := rot.Rotations(); n != 0 {
		t.Errorf("Rotations %d before any tick", n)
	}
	if q := rot.Query([]byte("k")); q != 3 {
		t.Errorf("Query %v without a tick, want 3", q)
	}
	ft.Tick()
	if n := rot.Rotations(); n != 1 {
		t.Errorf("Rotations right after one Tick = %d, want 1", n)
	}
	if q := rot.Query([]byte("k")); q != 3 {
		t.Errorf("after one tick: %v, want 3 (the younger generation has it)", q)
	}
	ft.Tick()
	if n := rot.Rotations(); n != 2 {
		t.Errorf("Rotations right after two Ticks = %d, want 2", n)
	}
	if q := rot.Query([]byte("k")); q != 0 {
		t.Errorf("after Generations ticks: %v, want 0", q)
	}
	rot.Close()
	rot.Close()
}

// TestAudit11APIGrudgeRotatorLazy: Ticker nil: "rotation every Period
// (lazily, no goroutine)".
func TestAudit11APIGrudgeRotatorLazy(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 128, Hi: 100, Clock: fc},
		Generations: 2,
		Period:      time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rot.Close()
	rot.Update([]byte("k"), 3)
	fc.Advance(1100 * time.Millisecond)
	if q := rot.Query([]byte("k")); q != 3 {
		t.Errorf("after one period: %v, want 3", q)
	}
	if n := rot.Rotations(); n < 1 {
		t.Errorf("Rotations %d after one period and an access", n)
	}
	fc.Advance(2200 * time.Millisecond)
	if q := rot.Query([]byte("k")); q != 0 {
		t.Errorf("after Generations x Period: %v, want 0", q)
	}
}

// TestAudit11APIGrudgetestFakeClock: Now, Advance(time.Duration), Set.
func TestAudit11APIGrudgetestFakeClock(t *testing.T) {
	fc := grudgetest.NewFakeClock()
	var _ func() time.Time = fc.Now
	var _ func(time.Duration) = fc.Advance
	n0 := fc.Now()
	fc.Advance(2 * time.Second)
	if d := fc.Now().Sub(n0); d != 2*time.Second {
		t.Errorf("Advance(2s) moved Now by %v", d)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	fc.Set(at)
	if !fc.Now().Equal(at) {
		t.Errorf("Set(%v): Now = %v", at, fc.Now())
	}
}

// TestAudit11APIGrudgeCloseStopsTicks: "Close() (idempotent, stops
// ticker-driven rotation)"; operations keep working.
func TestAudit11APIGrudgeCloseStopsTicks(t *testing.T) {
	ft := grudgetest.NewFakeTicker()
	rot, err := grudge.NewRotator(grudge.RotatorConfig{
		Sketch:      grudge.Config{Levels: 2, CellsPerLevel: 128, Hi: 100},
		Generations: 2,
		Period:      time.Second,
		Ticker:      ft,
	})
	if err != nil {
		t.Fatal(err)
	}
	ft.Tick()
	if n := rot.Rotations(); n != 1 {
		t.Fatalf("Rotations after one Tick = %d", n)
	}
	rot.Close()
	rot.Close()
	ft.Tick() // dropped: no rotator takes it (returns within about a second)
	if n := rot.Rotations(); n != 1 {
		t.Errorf("Rotations after Close and a Tick = %d, want 1", n)
	}
	rot.Update([]byte("k"), 2)
	if q := rot.Query([]byte("k")); q != 2 {
		t.Errorf("Query after Close = %v, want 2", q)
	}
}
