// Package common holds the options packages limit and meter share (the
// clock, the hash, the size, the memory bound, prefetch): each package
// wraps Options in its own Option type and documents its With functions.
package common

import (
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/conv"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Options is the shared part of limit's and meter's options. The zero
// value is the defaults before Finish.
type Options struct {
	Clock      sketch.Clock         // nil: the sketch's monotonic clock
	Seed       uint64               // the hash seed when Seeded
	Seeded     bool                 // WithSeed was given
	Levels     uint32               // L; 0: sketch.DefaultLevels
	Cells      uint32               // M; 0: sketch.DefaultCellsPerLevel
	MaxBytes   int64                // cap on the cells of all sketches; 0: sketch.DefaultMaxBytes
	Hasher     sketch.HasherFactory // nil: sketch.SipHash()
	NoPrefetch bool                 // WithPrefetch(false)
}

// Finish checks MaxBytes and the memory of gens sketches of the chosen
// size, and fills in the defaults: MaxBytes, a secret seed from
// crypto/rand, SipHash. An error is a *sketch.ConfigError prefixed pkg;
// label names the number of sketches in its message ("Generations", or
// the count). Levels and cells beyond the sketch's own limits are left to
// the sketch's validation.
func (c *Options) Finish(pkg, label string, gens uint32) error {
	if c.MaxBytes < 0 {
		return core.ConfigErr(pkg, "MaxBytes", c.MaxBytes, "MaxBytes must be >= 0 (0 means %d); got %d", int64(core.DefaultMaxBytes), c.MaxBytes)
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = core.DefaultMaxBytes
	}
	levels, cells := c.Levels, c.Cells
	if levels == 0 {
		levels = core.DefaultLevels
	}
	if cells == 0 {
		cells = core.DefaultCellsPerLevel
	}
	if levels <= core.MaxLevels && cells <= core.MaxCellsPerLevel {
		if n := int64(gens) * core.CellBytes(levels, cells); n > c.MaxBytes {
			return core.ConfigErr(pkg, "Size", n, "%s x Levels x CellsPerLevel = %d x %d x %d needs %d bytes of cells, above MaxBytes %d; raise WithMaxBytes or shrink the size", label, gens, levels, cells, n, c.MaxBytes)
		}
	}
	if !c.Seeded {
		c.Seed = core.RandomSeed()
	}
	if c.Hasher == nil {
		c.Hasher = sketch.SipHash()
	}
	return nil
}

// Sketch returns the engine configuration of one sketch under these
// options, with the given law, bounds and aggregator, on clock (the
// options' Clock, or a Timebase the caller shares).
func (c *Options) Sketch(law decay.Decay, lo, hi float64, agg core.Aggregator, clock core.Clock) core.Config {
	return core.Config{
		Levels: c.Levels, CellsPerLevel: c.Cells,
		Decay: law, Lo: lo, Hi: hi, Aggregator: agg,
		Hasher: conv.Hasher(c.Hasher), Seed: c.Seed, Clock: clock, MaxBytes: c.MaxBytes,
	}
}
