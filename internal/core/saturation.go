package core

import "math"

// DefaultSaturationCells is the number of cells per level Saturation
// reads by default: 16,384 (128 KiB per level, read in order).
const DefaultSaturationCells = 1 << 14

// Saturation estimates the probability that a fresh key (one never
// written) is refused delta under limit now: that its aggregate plus
// delta exceeds limit. With Min aggregation (the only one it answers
// for; it returns NaN for the others) a fresh key's cells are those of
// keys it collides with, one per level, drawn independently, so the
// probability is the product over levels of the share of cells whose
// score plus delta exceeds limit: the Bloom filter's false-positive rate,
// measured instead of modelled. Each share is read from cells
// consecutive cells of the level (all of them if the row is shorter),
// from an offset drawn from seed: the hash spreads keys independently of
// the index, so a run of cells is as good a sample as any, and reads in
// order. It never writes and does not allocate.
func (s *Sketch) Saturation(delta, limit float64, cells int, seed uint64) float64 {
	if s.agg != Min || s.aggFunc != nil {
		return math.NaN()
	}
	if cells <= 0 {
		cells = DefaultSaturationCells
	}
	m := int(s.m)
	cells = min(cells, m)
	now := s.stamp(s.nowMillis())
	theta := limit - delta
	p := 1.0
	for l := range int(s.levels) {
		start := int(SplitMix64(&seed) >> 32 * uint64(m) >> 32)
		row := s.cells[l*s.stride : l*s.stride+m]
		over := 0
		for i := range cells {
			j := start + i
			if j >= m {
				j -= m
			}
			if s.rules.Value(row[j].Load(), now) > theta {
				over++
			}
		}
		p *= float64(over) / float64(cells)
	}
	return p
}

// Saturation is Sketch.Saturation on the primary generation, the one
// every read answers from.
func (r *Rotator) Saturation(delta, limit float64, cells int, seed uint64) float64 {
	return r.cur.Load().gens[0].Saturation(delta, limit, cells, seed)
}
