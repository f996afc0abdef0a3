package grudge

import (
	"github.com/lfgrudge/grudge/sketch"
)

// Sketch is a decaying-score count-min sketch: L levels of M cells, each a
// packed float32 score and age updated lock-free. It is a thin face over
// *sketch.Sketch with grudge's method set. The zero value is not usable:
// build one with New (its methods but Native, which returns nil, panic
// with "grudge: zero Sketch; use New"). All methods are safe for concurrent use; Update,
// Query, UpdateAndQuery and TryUpdate do not allocate (with a built-in
// Aggregator), QueryDetailed allocates its result.
type Sketch struct {
	s *sketch.Sketch
}

// New builds a Sketch for cfg, hashing under a freshly drawn random seed.
// An invalid cfg yields the core's error unchanged (prefix "sketch: ",
// naming the field and the value).
func New(cfg Config) (*Sketch, error) {
	s, err := sketch.New(cfg.native(newSeed()))
	if err != nil {
		return nil, err
	}
	return &Sketch{s: s}, nil
}

// Native returns the lock-free sketch underneath, for its native API
// (string keys, the At forms taking a time.Time, Sizes).
func (s *Sketch) Native() *sketch.Sketch { return s.s }

// Update decays the key's L cells to now and adds delta to each, clamped
// to [Lo, Hi]. It panics if delta is NaN or ±Inf.
func (s *Sketch) Update(key []byte, delta float64) {
	if s.s == nil {
		panic(errZeroSketch)
	}
	s.s.Update(key, delta)
}

// Query returns the key's aggregated score, decayed to now. It only reads.
func (s *Sketch) Query(key []byte) float64 {
	if s.s == nil {
		panic(errZeroSketch)
	}
	return s.s.Query(key)
}

// UpdateAndQuery is Update followed by the aggregate of the updated cells,
// in one pass.
func (s *Sketch) UpdateAndQuery(key []byte, delta float64) float64 {
	if s.s == nil {
		panic(errZeroSketch)
	}
	return s.s.UpdateAndQuery(key, delta)
}

// TryUpdate adds delta to the key's cells only if aggregate + delta <=
// limit, atomically with respect to every other TryUpdate touching those
// cells, and reports whether it did. Any finite limit is accepted, above
// Hi too (scores stay clamped at Hi). It panics if delta or limit is NaN
// or ±Inf.
func (s *Sketch) TryUpdate(key []byte, delta, limit float64) bool {
	if s.s == nil {
		panic(errZeroSketch)
	}
	return s.s.TryUpdate(key, delta, limit)
}

// QueryDetailed returns the aggregate with each level's cell index and
// decayed score. It allocates.
func (s *Sketch) QueryDetailed(key []byte) Result { return resultOf(s.native().QueryDetailed(key)) }

// Result is the per-level view of one key, as QueryDetailed returns it.
type Result struct {
	// Aggregate is what Query would have returned.
	Aggregate float64
	// LevelScores holds each level's decayed cell score, in level order.
	LevelScores []float64
	// CellIndexes holds each level's cell index in [0, CellsPerLevel).
	CellIndexes []uint32
}

func resultOf(d sketch.Detail) Result {
	r := Result{
		Aggregate:   d.Score,
		LevelScores: make([]float64, len(d.Levels)),
		CellIndexes: make([]uint32, len(d.Levels)),
	}
	for i, l := range d.Levels {
		r.LevelScores[i] = l.Score
		r.CellIndexes[i] = l.Index
	}
	return r
}

// errZeroSketch is the panic of the zero Sketch's methods. The hot ones
// check s.s themselves (through a helper, TryUpdate no longer inlined:
// audit 126).
const errZeroSketch = "grudge: zero Sketch; use New"

// native returns the sketch underneath, or panics on the zero Sketch.
func (s *Sketch) native() *sketch.Sketch {
	if s.s == nil {
		panic(errZeroSketch)
	}
	return s.s
}
