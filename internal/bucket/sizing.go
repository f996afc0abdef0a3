package bucket

import (
	"fmt"
	"math"
	"unsafe"
)

// The capacity model (docs/capacity.md, "Sizing"). Keys arrive at their
// limit, each taking a free slot in the less occupied of its two lines
// (two choices with lines of b = 14 slots); a key whose lines are both
// full evicts an entry, and the line it evicts from gets a floor at the
// limit, unless one of the two already has one (the victim rule prefers
// such a line). A fresh key is then denied when one of its lines has a
// floor, or when its fingerprint matches one of the entries of its lines
// (probability 1/65535 per entry). In the fluid limit (Mitzenmacher,
// "The power of two choices in randomized load balancing", 2001), with
// tau keys per line, s_i the fraction of lines holding at least i keys
// and r the fraction with a floor:
//
//	ds_i/dtau = s_{i-1}^2 - s_i^2      (i = 1..b, s_0 = 1)
//	dr/dtau   = (s_b - r)^2            (both lines full, neither floored)
//	P(fresh denied) = 1 - (1-r)^2 (1 - 1/65535)^(2 sum_i s_i)
//
// and a key gets its whole burst unless it was denied on arrival, so the
// share that got it is 1 minus the mean of P(denied) over the arrivals.

// fluid integrates the model to tau keys per line and returns the fresh
// denial probability there, the share of the tau keys that got their
// burst on arrival, and r, the share of lines with a floor.
func fluid(tau float64) (deny, got, r float64) {
	const b = SlotsPerLine
	const step = 1.0 / 256
	var s [b + 1]float64
	s[0] = 1
	denyAt := func() float64 {
		occ := 0.0
		for i := 1; i <= b; i++ {
			occ += s[i]
		}
		return 1 - (1-r)*(1-r)*math.Exp(2*occ*math.Log1p(-1.0/65535))
	}
	integral := 0.0
	for t := 0.0; t < tau; {
		h := math.Min(step, tau-t)
		integral += h * denyAt()
		// Explicit midpoint (second order): ample at this step for the
		// smooth profiles of the model.
		var mid [b + 1]float64
		mid[0] = 1
		for i := 1; i <= b; i++ {
			mid[i] = s[i] + h/2*(s[i-1]*s[i-1]-s[i]*s[i])
		}
		rm := r + h/2*(s[b]-r)*(s[b]-r)
		for i := 1; i <= b; i++ {
			s[i] += h * (mid[i-1]*mid[i-1] - mid[i]*mid[i])
		}
		r = math.Min(r+h*(mid[b]-rm)*(mid[b]-rm), s[b])
		t += h
	}
	deny = denyAt()
	if tau <= 0 {
		return deny, 1, r
	}
	return deny, 1 - integral/tau, r
}

// PredictDenial returns the model's probability that a fresh key asking
// for one token is denied by an engine of lines lines holding keys keys
// at their limit, and the share of those keys that got their whole
// burst on arrival.
func PredictDenial(keys, lines int) (deny, got float64) {
	if lines <= 0 {
		return 1, 0
	}
	deny, got, _ = fluid(float64(keys) / float64(lines))
	return deny, got
}

// Fits reports whether an engine of lines lines holding keys keys at
// their limit denies at most a share deny of fresh keys, as Suggest and
// limit's Capacity size it: the model's mean rate at most deny/2 (the
// margin for what a mean-field limit leaves out), and few enough floored
// lines in all but one engine in a thousand. A floored line denies about
// 2/lines of fresh keys on its own, so in a small engine the mean says
// little: at 80 lines one unlucky eviction denies 2.5% of fresh keys
// while the mean is 0.05%. Floors fall as rare, nearly independent
// events: their count is taken as Poisson with the model's mean (r x
// lines, r the share of floored lines), and its tail beyond the count
// that would deny deny, 1 - (1 - h/lines)^2 <= deny, must be at most
// FloorTail. (Fingerprint matches, the model's other denials, spread
// evenly over the lines: no such granularity.)
func Fits(keys, lines int, deny float64) bool {
	if lines <= 0 {
		return false
	}
	d, _, r := fluid(float64(keys) / float64(lines))
	if !(d <= deny/2) {
		return false
	}
	// P(denied) = 1 - (1-h/lines)^2 (1-fp) with h floored lines and fp
	// the fingerprint matches' share, (1-fp) = (1-d)/(1-r)^2.
	mu := r * float64(lines)
	keep := (1 - d) / ((1 - r) * (1 - r)) // 1 - fp
	hmax := math.Floor((1 - math.Sqrt((1-deny)/keep)) * float64(lines))
	return poissonTail(mu, hmax) <= FloorTail
}

// FloorTail is the share of engines sized by Fits that may deny more than
// their target because of floors (the Poisson tail Fits allows).
const FloorTail = 1e-3

// poissonTail returns P(X > n) for X Poisson of mean mu.
func poissonTail(mu, n float64) float64 {
	if n >= mu+12*math.Sqrt(mu)+12 {
		return 0 // beyond twelve deviations: below any tail asked for
	}
	if mu <= 0 {
		return 0
	}
	// P(X <= n) summed from i = 0 in log space.
	sum, lmu := 0.0, math.Log(mu)
	for i := 0.0; i <= n; i++ {
		lg, _ := math.Lgamma(i + 1)
		sum += math.Exp(-mu + i*lmu - lg)
	}
	return max(0, 1-sum)
}

// engineBytes is Engine.Bytes for an engine of lines lines.
func engineBytes(lines int) int { return (lines+1)*LineBytes + int(unsafe.Sizeof(Engine{})) }

// LinesFor returns the most lines an engine can have within bytes of
// memory (Engine.Bytes: its lines, one line of alignment slack and its
// struct), at least 2.
func LinesFor(bytes int) int {
	return max((bytes-int(unsafe.Sizeof(Engine{})))/LineBytes-1, 2)
}

// Geometry is a size for an engine.
type Geometry struct {
	Lines int     // Config.Lines
	Bytes int     // the memory the engine will hold (Engine.Bytes: the lines, one line of alignment, its struct)
	Deny  float64 // the predicted fresh-key denial rate at the capacity asked
	Got   float64 // the predicted share of the keys that get their burst
}

// Suggest returns the smallest engine that holds keys keys at their
// limit with a fresh-key denial rate of at most deny (Fits): the model
// is asked for half of deny, a margin for what a mean-field limit leaves
// out (the measured rates at the sizes it picks are in docs/capacity.md;
// the margin costs about 1% of memory, the rate falls that steeply), and
// a small engine is grown until one unlucky floor cannot break the
// target but in one engine of 1/FloorTail. It returns an error for keys
// < 1 or deny outside (0, 1).
func Suggest(keys int, deny float64) (Geometry, error) {
	if keys < 1 {
		return Geometry{}, fmt.Errorf("bucket: Suggest: keys must be >= 1; got %d", keys)
	}
	if !(deny > 0 && deny < 1) {
		return Geometry{}, fmt.Errorf("bucket: Suggest: deny must be in (0, 1); got %v", deny)
	}
	// At least one slot per key: keys/SlotsPerLine + 1 lines, which
	// cannot overflow (keys + SlotsPerLine - 1 did, for keys near MaxInt,
	// and the search then ran for ever at 2 lines).
	if keys/SlotsPerLine >= 1<<32-1 {
		return Geometry{}, fmt.Errorf("bucket: Suggest: %d keys at a denial rate of %v need more than 2^32 lines", keys, deny)
	}
	ok := func(lines int) bool { return Fits(keys, lines, deny) }
	lo, hi := 2, max(2, keys/SlotsPerLine+1)
	const most = 1<<32 - 1 // the most lines an engine has
	for !ok(hi) {
		lo = hi + 1
		if hi >= most {
			return Geometry{}, fmt.Errorf("bucket: Suggest: %d keys at a denial rate of %v need more than 2^32 lines", keys, deny)
		}
		hi = min(2*hi, most) // the last step tries the largest engine itself (audit 119)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	d, g := PredictDenial(keys, hi)
	return Geometry{Lines: hi, Bytes: engineBytes(hi), Deny: d, Got: g}, nil
}

// CountMinGeometry is a size for the count-min rotator limit uses today.
type CountMinGeometry struct {
	Levels      uint32  // sketch.Config.Levels
	Cells       uint32  // sketch.Config.CellsPerLevel
	Generations int     // the rotator's generations (memory is per generation)
	Bytes       int     // Generations x Levels x Cells x 8
	Deny        float64 // predicted fresh-key denial rate
	Got         float64 // predicted share of the keys that got their burst
}

// CountMinKeysPerCell returns the keys at their limit per cell at which
// the Bloom formula (1 - e^(-keys/cells))^levels equals deny: the formula
// inverted, -ln(1 - deny^(1/levels)). A count-min of cells cells per
// level holds cells times that many keys at a denial rate of at most
// deny. 1 - deny^(1/levels) is computed as -expm1(ln(deny)/levels): Pow
// rounds deny^(1/levels) to 1 for a deny near 1, which made the share 0
// and the answer infinite.
func CountMinKeysPerCell(deny float64, levels uint32) float64 {
	return -math.Log(-math.Expm1(math.Log(deny) / float64(levels)))
}

// PredictCountMinDenial returns the count-min's predicted fresh-key
// denial rate with keys keys at their limit in levels rows of cells
// cells (every generation holds all of them: the keys arrived within a
// period): a fresh key is denied when each of its cells holds a key at
// its limit, (1 - e^(-keys/cells))^levels, the Bloom filter's false
// positive rate, plus what double hashing adds (countMinPairs); and the
// share of keys that got their burst (the mean of
// that rate over the arrivals).
func PredictCountMinDenial(keys int, levels, cells uint32) (deny, got float64) {
	fp := func(n float64) float64 { return countMinRate(n, levels, cells) }
	deny = fp(float64(keys))
	const steps = 512
	sum := 0.0
	for i := range steps {
		sum += fp((float64(i) + 0.5) / steps * float64(keys))
	}
	return deny, 1 - sum/steps
}

// countMinRate is PredictCountMinDenial's rate alone (no integral) for n
// keys: the Bloom formula plus countMinPairs, at most 1.
func countMinRate(n float64, levels, cells uint32) float64 {
	return min(1, math.Pow(-math.Expm1(-n/float64(cells)), float64(levels))+countMinPairs(n, levels, cells))
}

// countMinPairs is what double hashing adds to the Bloom formula for n
// keys: core.Index derives a key's L cells from two 32-bit values, so a
// fresh key lands on all L cells of one held key when both values are
// near that key's, about 1/(M^2 (L-1)) per held key, not the formula's
// 1/M^L. n/(M^2 (L-1)) bounded the excess a simulation with core.Index
// measured (audit 42: 50 keys in 7 x 69 cells, 1.13% against the
// formula's 0.97%, this term 0.175%; 2,000 keys in 7 x 2,700, 0.0025%
// against 0.0046%); it matters only for small sketches. 0 for one level.
func countMinPairs(n float64, levels, cells uint32) float64 {
	if levels < 2 {
		return 0
	}
	m := float64(cells)
	return n / (m * m * float64(levels-1))
}

// CountMinCapacity returns the most keys at their limit levels rows of
// cells cells hold with a predicted fresh-key denial rate
// (PredictCountMinDenial) of at most deny.
func CountMinCapacity(deny float64, levels, cells uint32) int {
	ok := func(n int) bool { return countMinRate(float64(n), levels, cells) <= deny }
	// The Bloom formula alone is an upper bound on the answer.
	hi := int(math.Min(math.Floor(float64(cells)*CountMinKeysPerCell(deny, levels)), math.MaxInt/2)) + 1
	if ok(hi) {
		return hi
	}
	lo := 0 // ok(0): no key, no denial
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// SuggestCountMin returns the smallest count-min (Levels 1..8, as the
// sketch allows) holding keys keys at their limit with a predicted
// fresh-key denial rate of at most deny, for a rotator of generations
// generations. The optimum is the Bloom filter's: about
// log2(1/deny) levels of keys/ln 2 cells, 1.44 log2(1/deny) cells per
// key and generation.
func SuggestCountMin(keys int, deny float64, generations int) (CountMinGeometry, error) {
	if keys < 1 {
		return CountMinGeometry{}, fmt.Errorf("bucket: SuggestCountMin: keys must be >= 1; got %d", keys)
	}
	if !(deny > 0 && deny < 1) {
		return CountMinGeometry{}, fmt.Errorf("bucket: SuggestCountMin: deny must be in (0, 1); got %v", deny)
	}
	if generations < 1 {
		return CountMinGeometry{}, fmt.Errorf("bucket: SuggestCountMin: generations must be >= 1; got %d", generations)
	}
	var best CountMinGeometry
	for l := uint32(1); l <= 8; l++ {
		// At least one cell.
		m := max(1, math.Ceil(float64(keys)/CountMinKeysPerCell(deny, l)))
		if m > 1<<30 {
			continue
		}
		c := uint32(m)
		rate := func(c uint32) float64 { return countMinRate(float64(keys), l, c) }
		if rate(c) > deny {
			// The Bloom formula's size is too small once double hashing's
			// pairs (countMinPairs) are counted (a small sketch): gallop up
			// to a size that holds, then bisect.
			lo, step := c, max(1, c/64)
			for c = lo + step; rate(c) > deny; c = lo + step {
				if uint64(lo)+uint64(2*step) > 1<<30 {
					c = 0
					break
				}
				lo, step = c, 2*step
			}
			if c == 0 {
				continue
			}
			for c-lo > 1 { // rate(lo) > deny >= rate(c)
				if mid := lo + (c-lo)/2; rate(mid) <= deny {
					c = mid
				} else {
					lo = mid
				}
			}
		}
		for c > 1 && rate(c-1) <= deny {
			c--
		}
		bytes := generations * int(l) * int(c) * 8
		if best.Levels == 0 || bytes < best.Bytes {
			d, g := PredictCountMinDenial(keys, l, c)
			best = CountMinGeometry{Levels: l, Cells: c, Generations: generations, Bytes: bytes, Deny: d, Got: g}
		}
	}
	if best.Levels == 0 {
		return best, fmt.Errorf("bucket: SuggestCountMin: %d keys at a denial rate of %v need more than 2^30 cells per level", keys, deny)
	}
	return best, nil
}
