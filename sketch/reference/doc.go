// Package reference is the mutex reference: a faithful, simple
// re-implementation of grudge (github.com/satmihir/grudge) with the
// sketch.Scorer methods of package sketch and their At forms, float64 scores, int64 timestamps and a sync.Mutex
// per cell, and grudge's rotator (one sync.RWMutex, a ticker goroutine).
// It is public on purpose: users A/B against it, and it is the oracle of
// this module's differential tests. Production code should use the
// lock-free sketch.Sketch and rotator.Rotator.
//
// For the same Config (Seed, Hasher, Levels, CellsPerLevel) a reference
// sketch maps a key to the same cells as sketch.New does, so the two can
// be compared cell for cell; a reference rotator's generations hash under
// the seeds rotator.New derives. The semantics are sketch's (see its
// package documentation), with scores kept in float64: Min aggregation
// never under-estimates (up to float64 rounding: decay rounds to nearest
// and is written back at every access, as grudge's is, so a key read
// often under Exponential decay drifts below the law, by a fraction of
// an ulp a read that adds up: 251 ulps (a relative 5e-14) after a
// thousand reads, 4.5e-12 after 100,000; the lock-free sketch rounds
// up), TryUpdate is atomic with respect to every other
// operation on the key's cells, NaN or ±Inf deltas panic with a message
// that starts "sketch:", a backwards clock step counts as no time. A
// nil Config.Clock means the wall clock, as in grudge.
package reference
