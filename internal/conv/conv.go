// Package conv converts between the public configuration types of
// package sketch and the engine's (internal/core), for the packages that
// take a sketch.Config and drive the engine themselves: rotator, the
// reference, redis. Package sketch has its own copy of these few lines
// (it cannot import this package, which imports it); a test checks that
// both normalize alike.
package conv

import (
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Config returns cfg as the engine's configuration.
func Config(cfg sketch.Config) core.Config {
	return core.Config{
		Levels: cfg.Levels, CellsPerLevel: cfg.CellsPerLevel, Decay: cfg.Decay,
		Lo: cfg.Lo, Hi: cfg.Hi,
		Aggregator: core.Aggregator(cfg.Aggregator), AggregateFunc: cfg.AggregateFunc,
		Hasher: Hasher(cfg.Hasher), Seed: cfg.Seed, Clock: cfg.Clock, MaxBytes: cfg.MaxBytes,
	}
}

// Normalized returns cfg with the defaults the engine filled in (n is
// Config(cfg) normalized).
func Normalized(cfg sketch.Config, n core.Config) sketch.Config {
	cfg.Levels, cfg.CellsPerLevel, cfg.Decay, cfg.MaxBytes = n.Levels, n.CellsPerLevel, n.Decay, n.MaxBytes
	if cfg.Hasher == nil {
		cfg.Hasher = sketch.XXH3()
	}
	return cfg
}

// Normalize is core.Config.Normalize of Config(cfg), returning both
// forms: the engine's and the public one with defaults filled in.
func Normalize(cfg sketch.Config) (core.Config, sketch.Config, error) {
	n, err := Config(cfg).Normalize()
	if err != nil {
		return n, cfg, err
	}
	return n, Normalized(cfg, n), nil
}

// Hasher returns f as the engine's hasher factory (nil stays nil: the
// engine's default, XXH3). The hashers it builds are f's own.
func Hasher(f sketch.HasherFactory) core.HasherFactory {
	if f == nil {
		return nil
	}
	return func(seed uint64) core.Hasher { return f(seed) }
}

// LevelDetail builds one level's sketch.LevelDetail (core.Detailed's
// callback).
func LevelDetail(level, index uint32, score float64) sketch.LevelDetail {
	return sketch.LevelDetail{Level: level, Index: index, Score: score}
}

// Detail returns the sketch.Detail of an aggregate and its levels.
func Detail(score float64, levels []sketch.LevelDetail) sketch.Detail {
	return sketch.Detail{Score: score, Levels: levels}
}
