package core

import (
	"fmt"
	"sync"
)

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

// String names the aggregator.
func (a Aggregator) String() string {
	switch a {
	case Min:
		return "Min"
	case Max:
		return "Max"
	case Mean:
		return "Mean"
	}
	return fmt.Sprintf("Aggregator(%d)", uint8(a))
}

// Aggregate applies a to scores (len >= 1). It does not allocate.
func (a Aggregator) Aggregate(scores []float64) float64 {
	r := scores[0]
	if a == Min { // the default, first
		for _, v := range scores[1:] {
			if v < r {
				r = v
			}
		}
		return r
	}
	switch a {
	case Max:
		for _, v := range scores[1:] {
			if v > r {
				r = v
			}
		}
	case Mean:
		for _, v := range scores[1:] {
			r += v
		}
		n := float64(len(scores))
		if r-r != 0 { // the sum overflowed although every score is finite
			r = 0
			for _, v := range scores {
				r += v / n
			}
			return r
		}
		r /= n
	default:
		for _, v := range scores[1:] {
			if v < r {
				r = v
			}
		}
	}
	return r
}

// scratchPool holds the copies CustomAggregate hands to a custom
// aggregator, so the slow path does not allocate in the steady state.
var scratchPool = sync.Pool{New: func() any { return new([MaxLevels]float64) }}

// CustomAggregate returns f(scores) where f sees a pooled copy of scores
// (len(scores) <= MaxLevels), so that scores itself never escapes: callers
// keep it on their stack and the built-in path stays allocation-free. It
// is how both implementations honour Config.AggregateFunc.
func CustomAggregate(f func(scores []float64) float64, scores []float64) float64 {
	buf := scratchPool.Get().(*[MaxLevels]float64)
	n := copy(buf[:], scores)
	r := f(buf[:n])
	scratchPool.Put(buf)
	return r
}
