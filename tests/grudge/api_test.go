package grudge_test

import (
	"time"

	"github.com/lfgrudge/grudge"
)

// The exported surface a grudge v0.1.0 user compiles against, checked by
// the compiler: a signature change here breaks their build.
var (
	_ func(grudge.Config) (*grudge.Sketch, error)              = grudge.New
	_ func(grudge.RotatorConfig) (*grudge.Rotator, error)      = grudge.NewRotator
	_ func(float64) grudge.Decay                               = grudge.Exponential
	_ func(float64) grudge.Decay                               = grudge.Linear
	_ grudge.Decay                                             = grudge.None
	_ func() grudge.Decay                                      = grudge.None
	_ grudge.Aggregator                                        = grudge.Min
	_ grudge.Aggregator                                        = grudge.Max
	_ grudge.Aggregator                                        = grudge.Mean
	_ func() grudge.HasherFactory                              = grudge.Murmur3
	_ func() grudge.HasherFactory                              = grudge.SipHash
	_ func(hotKeys, m uint32, targetP float64) (uint32, error) = grudge.SuggestLevels
	_ func(*grudge.Sketch, []byte, float64)                    = (*grudge.Sketch).Update
	_ func(*grudge.Sketch, []byte) float64                     = (*grudge.Sketch).Query
	_ func(*grudge.Sketch, []byte, float64) float64            = (*grudge.Sketch).UpdateAndQuery
	_ func(*grudge.Sketch, []byte, float64, float64) bool      = (*grudge.Sketch).TryUpdate
	_ func(*grudge.Sketch, []byte) grudge.Result               = (*grudge.Sketch).QueryDetailed
	_ func(*grudge.Rotator, []byte, float64)                   = (*grudge.Rotator).Update
	_ func(*grudge.Rotator, []byte) float64                    = (*grudge.Rotator).Query
	_ func(*grudge.Rotator, []byte, float64) float64           = (*grudge.Rotator).UpdateAndQuery
	_ func(*grudge.Rotator, []byte, float64, float64) bool     = (*grudge.Rotator).TryUpdate
	_ func(*grudge.Rotator, []byte) grudge.Result              = (*grudge.Rotator).QueryDetailed
	_ func(*grudge.Rotator)                                    = (*grudge.Rotator).Close
	_ func(*grudge.Rotator) int64                              = (*grudge.Rotator).Rotations
	_                                                          = grudge.Result{Aggregate: 0, LevelScores: nil, CellIndexes: nil}
	_                                                          = grudge.Config{Levels: 4, CellsPerLevel: 1, Decay: grudge.None, Lo: 0, Hi: 1, Aggregator: grudge.Min, Hasher: grudge.Murmur3(), Clock: grudge.Clock(nil)}
	_                                                          = grudge.RotatorConfig{Sketch: grudge.Config{}, Generations: 2, Period: time.Second, Ticker: grudge.Ticker(nil)}
	_ grudge.HasherFactory                                     = func(seed uint64) grudge.Hasher { return nil }
)
