package matrix

import (
	"math"
	"slices"
)

// reservoir keeps a uniform random sample of at most cap(vals) of the
// values added to it (Vitter's Algorithm R), without allocating after
// init. One goroutine owns it.
type reservoir struct {
	vals []int64 // the sample; len grows to cap, then entries are replaced
	seen uint64  // values offered so far
	rng  uint64  // xorshift64 state, never 0
}

func (r *reservoir) init(capacity int, seed uint64) {
	r.vals = make([]int64, 0, capacity)
	r.seen = 0
	r.rng = seed | 1
}

func (r *reservoir) add(v int64) {
	r.seen++
	if len(r.vals) < cap(r.vals) {
		r.vals = append(r.vals, v)
		return
	}
	r.rng ^= r.rng << 13
	r.rng ^= r.rng >> 7
	r.rng ^= r.rng << 17
	if j := r.rng % r.seen; j < uint64(len(r.vals)) {
		r.vals[j] = v
	}
}

// weighted is one sample standing for weight offered values.
type weighted struct {
	v float64
	w float64
}

// mergeReservoirs turns reservoirs into weighted samples (each sample of
// a reservoir weighs seen/len), converting ticks with scale.
func mergeReservoirs(rs []*reservoir, scale float64) []weighted {
	var out []weighted
	for _, r := range rs {
		if len(r.vals) == 0 {
			continue
		}
		w := float64(r.seen) / float64(len(r.vals))
		for _, v := range r.vals {
			out = append(out, weighted{float64(v) * scale, w})
		}
	}
	return out
}

// percentiles returns the nearest-rank q-quantile of the weighted samples
// for each q in qs (0 < q <= 1): the smallest value whose cumulative
// weight reaches q of the total. With unit weights that is the
// ceil(q*n)-th smallest value. NaN for no samples. It sorts s.
func percentiles(s []weighted, qs ...float64) []float64 {
	out := make([]float64, len(qs))
	if len(s) == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	slices.SortFunc(s, func(a, b weighted) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	var total float64
	for _, x := range s {
		total += x.w
	}
	for i, q := range qs {
		// The relative slack keeps q*total from landing a hair above an
		// exact rank through rounding (0.999*1000 > 999).
		target := q * total * (1 - 1e-12)
		var cum float64
		out[i] = s[len(s)-1].v
		for _, x := range s {
			cum += x.w
			if cum >= target {
				out[i] = x.v
				break
			}
		}
	}
	return out
}

// PercentilesOf is percentiles over unit-weight values.
func PercentilesOf(vals []float64, qs ...float64) []float64 {
	s := make([]weighted, len(vals))
	for i, v := range vals {
		s[i] = weighted{v, 1}
	}
	return percentiles(s, qs...)
}
