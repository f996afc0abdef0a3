package grudge_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// grudgeFace is what the root Sketch and Rotator share (grudge's methods).
type grudgeFace interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	UpdateAndQuery(key []byte, delta float64) float64
	TryUpdate(key []byte, delta, limit float64) bool
	QueryDetailed(key []byte) grudge.Result
}

// scorer adapts the root types to sketch.Scorer for the conformance
// suite: grudge has no string twins (they view the string's bytes,
// without allocating) and returns a Result from QueryDetailed.
type scorer struct{ g grudgeFace }

func view(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (a scorer) Update(k []byte, d float64)                 { a.g.Update(k, d) }
func (a scorer) Query(k []byte) float64                     { return a.g.Query(k) }
func (a scorer) UpdateAndQuery(k []byte, d float64) float64 { return a.g.UpdateAndQuery(k, d) }
func (a scorer) TryUpdate(k []byte, d, l float64) bool      { return a.g.TryUpdate(k, d, l) }
func (a scorer) UpdateString(k string, d float64)           { a.g.Update(view(k), d) }
func (a scorer) QueryString(k string) float64               { return a.g.Query(view(k)) }
func (a scorer) UpdateAndQueryString(k string, d float64) float64 {
	return a.g.UpdateAndQuery(view(k), d)
}
func (a scorer) TryUpdateString(k string, d, l float64) bool { return a.g.TryUpdate(view(k), d, l) }
func (a scorer) QueryDetailed(k []byte) sketch.Detail {
	r := a.g.QueryDetailed(k)
	d := sketch.Detail{Score: r.Aggregate}
	for l, s := range r.LevelScores {
		d.Levels = append(d.Levels, sketch.LevelDetail{Level: uint32(l), Index: r.CellIndexes[l], Score: s})
	}
	return d
}

// rootConfig maps the suite's native config to the root package's.
func rootConfig(cfg sketch.Config) grudge.Config {
	agg := map[sketch.Aggregator]grudge.Aggregator{sketch.Min: grudge.Min, sketch.Max: grudge.Max, sketch.Mean: grudge.Mean}[cfg.Aggregator]
	rc := grudge.Config{Levels: cfg.Levels, CellsPerLevel: cfg.CellsPerLevel, Decay: cfg.Decay, Lo: cfg.Lo, Hi: cfg.Hi, Aggregator: agg}
	if cfg.Clock != nil {
		rc.Clock = cfg.Clock.(*sketchtest.FakeClock)
	}
	return rc
}

// TestConformance runs the project's contract suite on the root package:
// the sketch, the lazy rotator and the ticker-driven one.
func TestConformance(t *testing.T) {
	t.Run("impl=sketch", func(t *testing.T) {
		sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			s, err := grudge.New(rootConfig(cfg))
			if err != nil {
				t.Fatal(err)
			}
			return scorer{s}
		})
	})
	// The lazy rotator rotates on the clock: the rotators' suite.
	t.Run("impl=rotator/lazy", func(t *testing.T) {
		sketchtest.TestRotator(t, func(t testing.TB, cfg sketch.Config, n uint32, period time.Duration) sketch.Scorer {
			r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: rootConfig(cfg), Generations: n, Period: period})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			return closer{scorer{r}, r}
		})
	})
	// The ticker-driven one rotates on ticks only: the Scorer suite
	// (no tick, no rotation), its goroutine stopped by Close.
	t.Run("impl=rotator/ticker", func(t *testing.T) {
		sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: rootConfig(cfg), Period: 24 * time.Hour, Ticker: grudgetest.NewFakeTicker()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			return scorer{r}
		})
	})
}

// closer is a scorer with the rotator's Close, for the suite's Close check.
type closer struct {
	scorer
	r *grudge.Rotator
}

func (c closer) Close() { c.r.Close() }
