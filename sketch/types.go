package sketch

import "github.com/lfgrudge/grudge/internal/core"

// Clock supplies monotonic milliseconds. Sketches read it once per
// operation; a value lower than one seen before counts as zero elapsed
// time. Implementations must be safe for concurrent use.
// sketchtest.FakeClock is one for tests.
type Clock interface{ NowMillis() int64 }

// Scorer is what *Sketch, *rotator.Rotator and the reference
// implementations (sketch/reference) share, so users and benchmarks swap
// implementations without other changes. All methods are safe for
// concurrent use.
type Scorer interface {
	Update(key []byte, delta float64)
	Query(key []byte) float64
	UpdateAndQuery(key []byte, delta float64) float64
	TryUpdate(key []byte, delta, limit float64) bool
	QueryDetailed(key []byte) Detail
	UpdateString(key string, delta float64)
	QueryString(key string) float64
	UpdateAndQueryString(key string, delta float64) float64
	TryUpdateString(key string, delta, limit float64) bool
}

// Detail is the per-level view of one key, as QueryDetailed returns it.
type Detail struct {
	// Score is the aggregate, what Query would have returned.
	Score float64
	// Levels holds one entry per level, in level order.
	Levels []LevelDetail
}

// LevelDetail is one level's cell for a key.
type LevelDetail struct {
	Level uint32  // 0..L-1
	Index uint32  // cell index in the level's row, 0..M-1
	Score float64 // the cell's score, decayed to the time of the call
}

// levelDetail builds one level's entry (core.Detailed's callback).
func levelDetail(level, index uint32, score float64) LevelDetail {
	return LevelDetail{Level: level, Index: index, Score: score}
}

// Sizes is a structure's footprint in bytes.
type Sizes struct {
	// Cells is the memory of the cell arrays as allocated (padding and
	// alignment slack included).
	Cells int
	// Total adds the fixed overhead: the owner struct, stripes, tables.
	Total int
}

// Aggregator combines the L per-level scores of a key into its estimate.
// The zero value is Min.
type Aggregator uint8

const (
	// Min takes the smallest level score (count-min): collisions can only
	// raise it, so with non-negative deltas the estimate never falls below
	// the key's true score (one-sided error), and a hot key shields cold
	// keys only where it shares every level with them.
	Min Aggregator = iota
	// Max takes the largest level score: the most conservative view.
	Max
	// Mean averages the level scores.
	Mean
)

// String names the aggregator: "Min", "Max", "Mean" or "Aggregator(n)".
func (a Aggregator) String() string { return core.Aggregator(a).String() }
