package grudge_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// /work/shared/API.md: every identifier it lists, with its stated
// signature (compile-time).
var (
	_ func(float64) decay.Decay = decay.Exponential
	_ func(float64) decay.Decay = decay.Linear
	_ func() decay.Decay        = decay.None
	_ interface {
		Apply(score float64, dtMillis int64) float64
	} = decay.None()

	_ func(sketch.Config) (*sketch.Sketch, error)                    = sketch.New
	_ func(*sketch.Sketch, []byte, float64)                          = (*sketch.Sketch).Update
	_ func(*sketch.Sketch, []byte) float64                           = (*sketch.Sketch).Query
	_ func(*sketch.Sketch, []byte, float64) float64                  = (*sketch.Sketch).UpdateAndQuery
	_ func(*sketch.Sketch, []byte, float64, float64) bool            = (*sketch.Sketch).TryUpdate
	_ func(*sketch.Sketch, []byte) sketch.Detail                     = (*sketch.Sketch).QueryDetailed
	_ func(*sketch.Sketch, string, float64)                          = (*sketch.Sketch).UpdateString
	_ func(*sketch.Sketch, string) float64                           = (*sketch.Sketch).QueryString
	_ func(*sketch.Sketch, string, float64) float64                  = (*sketch.Sketch).UpdateAndQueryString
	_ func(*sketch.Sketch, string, float64, float64) bool            = (*sketch.Sketch).TryUpdateString
	_ func(*sketch.Sketch, time.Time, string, float64)               = (*sketch.Sketch).UpdateAt
	_ func(*sketch.Sketch, time.Time, string) float64                = (*sketch.Sketch).QueryAt
	_ func(*sketch.Sketch, time.Time, string, float64) float64       = (*sketch.Sketch).UpdateAndQueryAt
	_ func(*sketch.Sketch, time.Time, string, float64, float64) bool = (*sketch.Sketch).TryUpdateAt
	_ sketch.Clock                                                   = (*sketchtest.FakeClock)(nil)
	_ interface{ NowMillis() int64 }                                 = sketch.Clock(nil)
	_ sketch.Scorer                                                  = (*sketch.Sketch)(nil)
	_ sketch.Scorer                                                  = (*reference.Sketch)(nil)
	_ sketch.Scorer                                                  = (*rotator.Rotator)(nil)
	_ func(sketch.Config) (*reference.Sketch, error)                 = reference.New
	_                                                                = reference.NewRotator
	_ error                                                          = (*sketch.ConfigError)(nil)
	_                                                                = sketch.ErrInvalidConfig
	_ sketch.Aggregator                                              = sketch.Min
	_ sketch.Aggregator                                              = sketch.Max
	_ sketch.Aggregator                                              = sketch.Mean
	_ sketch.HasherFactory                                           = sketch.XXH3()
	_ sketch.HasherFactory                                           = sketch.SipHash()

	_ func(rotator.Config) (*rotator.Rotator, error) = rotator.New
	_ func(*rotator.Rotator)                         = (*rotator.Rotator).Close

	_ func() *sketchtest.FakeClock                = sketchtest.NewFakeClock
	_ func(*sketchtest.FakeClock, time.Duration)  = (*sketchtest.FakeClock).Advance
	_ func(*sketchtest.FakeClock) time.Time       = (*sketchtest.FakeClock).Now
	_                                             = (*sketchtest.FakeClock).Set
	_ func(*testing.T, sketchtest.Factory)        = sketchtest.TestScorer
	_ func(*testing.T, sketchtest.RotatorFactory) = sketchtest.TestRotator

	// grudge (root)
	_ func(grudge.Config) (*grudge.Sketch, error)          = grudge.New
	_ func(grudge.RotatorConfig) (*grudge.Rotator, error)  = grudge.NewRotator
	_ func(*grudge.Rotator)                                = (*grudge.Rotator).Close
	_ func(*grudge.Rotator) int64                          = (*grudge.Rotator).Rotations
	_ func(*grudge.Sketch, []byte, float64)                = (*grudge.Sketch).Update
	_ func(*grudge.Sketch, []byte) float64                 = (*grudge.Sketch).Query
	_ func(*grudge.Sketch, []byte, float64) float64        = (*grudge.Sketch).UpdateAndQuery
	_ func(*grudge.Sketch, []byte, float64, float64) bool  = (*grudge.Sketch).TryUpdate
	_ func(*grudge.Sketch, []byte) grudge.Result           = (*grudge.Sketch).QueryDetailed
	_ func(*grudge.Rotator, []byte, float64)               = (*grudge.Rotator).Update
	_ func(*grudge.Rotator, []byte) float64                = (*grudge.Rotator).Query
	_ func(*grudge.Rotator, []byte, float64) float64       = (*grudge.Rotator).UpdateAndQuery
	_ func(*grudge.Rotator, []byte, float64, float64) bool = (*grudge.Rotator).TryUpdate
	_ func(*grudge.Rotator, []byte) grudge.Result          = (*grudge.Rotator).QueryDetailed
	_ func(float64) grudge.Decay                           = grudge.Exponential
	_ func(float64) grudge.Decay                           = grudge.Linear
	_ grudge.Decay                                         = grudge.None()
	_ grudge.Aggregator                                    = grudge.Min
	_ grudge.Aggregator                                    = grudge.Max
	_ grudge.Aggregator                                    = grudge.Mean
	_ grudge.Aggregator                                    = func([]float64) float64 { return 0 }
	_ grudge.HasherFactory                                 = grudge.SipHash()
	_ grudge.HasherFactory                                 = grudge.Murmur3()
	_ interface{ Now() time.Time }                         = grudge.Clock(nil)
	_ grudge.Clock                                         = grudgetest.NewFakeClock()
	_ grudge.Ticker                                        = grudgetest.NewFakeTicker()
	_ func(*grudgetest.FakeClock, time.Duration)           = (*grudgetest.FakeClock).Advance
	_ func(*grudgetest.FakeClock, time.Time)               = (*grudgetest.FakeClock).Set
	_ func(*grudgetest.FakeTicker)                         = (*grudgetest.FakeTicker).Tick
)

// API.md's field lists, by composite literal.
var (
	_ = sketch.Config{Levels: 4, CellsPerLevel: 1, Decay: decay.None(), Lo: 0, Hi: 1,
		Aggregator: sketch.Min, Hasher: sketch.SipHash(), Seed: 1, Clock: sketchtest.NewFakeClock()}
	_ = rotator.Config{Sketch: sketch.Config{}, Generations: 2, Period: time.Second}
	_ = grudge.Config{Levels: 1, CellsPerLevel: 1, Decay: grudge.None(), Lo: 0, Hi: 1,
		Aggregator: grudge.Min, Hasher: grudge.Murmur3(), Clock: grudgetest.NewFakeClock()}
	_ = grudge.RotatorConfig{Sketch: grudge.Config{}, Generations: 2, Period: time.Second, Ticker: grudgetest.NewFakeTicker()}
)

// API.md:30-31 and sketch.Config: Levels 0 means 4, at most 8;
// CellsPerLevel 0 means 100_000; rotator Generations 0 means 2.
func TestAudit72ConfigDefaults(t *testing.T) {
	s, err := sketch.New(sketch.Config{Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := s.QueryDetailed([]byte("k"))
	if len(d.Levels) != 4 {
		t.Errorf("API.md:30: Levels 0 gave %d levels, want 4", len(d.Levels))
	}
	if _, err := sketch.New(sketch.Config{Levels: 9, Hi: 1}); !errors.Is(err, sketch.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "sketch:") {
		t.Errorf("API.md:30: Levels 9: %v", err)
	}
	if _, err := sketch.New(sketch.Config{Hi: math.Inf(1)}); err == nil {
		t.Errorf("API.md:34: Hi=+Inf with no decay accepted")
	}
	if _, err := sketch.New(sketch.Config{Hi: 1, Decay: decay.Linear(math.NaN())}); err == nil || !strings.Contains(err.Error(), "Decay") {
		t.Errorf("API.md:25: Linear(NaN) error %v does not name the field", err)
	}
	clk := sketchtest.NewFakeClock()
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 10, Clock: clk}, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Stats().Allocated; n != 2 {
		t.Errorf("API.md:113: Generations 0 gave %d, want 2", n)
	}
	if _, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 10}, Generations: 1, Period: time.Second}); err == nil {
		t.Errorf("API.md:113: Generations 1 accepted")
	}
	// rotator/doc.go:85-86: Period at least 1 ms, counted in whole ms rounded up.
	if _, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 10}, Period: 900 * time.Microsecond}); err == nil {
		t.Errorf("rotator/doc.go:85: Period 0.9 ms accepted")
	}
	clk2 := sketchtest.NewFakeClock()
	r2, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 10, Clock: clk2}, Period: 2900 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	r2.UpdateString("a", 1)
	clk2.Advance(2 * time.Millisecond)
	r2.QueryString("a")
	p0 := r2.Stats().Promotions
	clk2.Advance(time.Millisecond) // 3 ms: first deadline if Period is 3 ms
	r2.QueryString("a")
	if p1 := r2.Stats().Promotions; p0 != 0 || p1 != 1 {
		t.Errorf("rotator/doc.go:86: Period 2.9 ms: promotions %d at 2 ms, %d at 3 ms; want 0 then 1", p0, p1)
	}
}

// grudge (root) doc.go:59-61: error prefixes.
func TestAudit72RootErrorPrefixes(t *testing.T) {
	_, err := grudge.New(grudge.Config{Levels: 9, Hi: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "sketch: ") || !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Errorf("doc.go:59: New error %v", err)
	}
	_, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Generations: 2})
	if err == nil || !strings.HasPrefix(err.Error(), "rotator: ") || !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Errorf("doc.go:60: NewRotator error %v", err)
	}
	_, err = grudge.SuggestLevels(0, 0, 0)
	if err == nil || !strings.HasPrefix(err.Error(), "grudge: ") {
		t.Errorf("doc.go:61: SuggestLevels error %v", err)
	}
	n, err := grudge.SuggestLevels(1_000_000, 10, 1e-9)
	if err == nil && n > 8 {
		t.Errorf("doc.go:53: SuggestLevels answered %d > 8", n)
	}
}
