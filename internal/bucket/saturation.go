package bucket

import (
	"math"
	"time"

	"github.com/lfgrudge/grudge/sketch"
)

// Saturation returns the estimated probability that a fresh key (one the
// engine has never seen) asking for n now under limit is denied: the
// engine's rate of innocent denials, the figure an operator alerts on
// (docs/capacity.md). It reads Config.SaturationSamples random line
// pairs (4096 by default: about 0.5 MB of memory, a fraction of a
// millisecond) and never writes; it does not allocate.
func (e *Engine) Saturation(n, limit float64) float64 { return e.saturation(e.now(), n, limit) }

// SaturationAt is Saturation at time t.
func (e *Engine) SaturationAt(t time.Time, n, limit float64) float64 {
	return e.saturation(e.at(t), n, limit)
}

// saturation averages, over sampled line pairs drawn as a fresh key's
// would be, the probability that a key with those two lines and a
// uniformly random fingerprint is denied: 1 when the higher floor alone
// denies; otherwise the chance that its fingerprint matches one of the
// entries that would deny it, (denying entries)/65535.
func (e *Engine) saturation(ms uint64, n, limit float64) float64 {
	checkLoad("Saturation", n)
	checkLimit("Saturation", limit)
	q := &e.q
	var c, lim uint64
	if q.kind != KindExponential {
		c, lim = q.units(n), q.limitUnits(limit)
	}
	denies := func(st, t uint64) bool {
		if q.kind != KindExponential {
			d := uint64(0)
			if st > t {
				d = st - t
			}
			return d+c > lim
		}
		return q.value(st, t)+n > limit
	}
	st := e.seed ^ e.satCalls.Add(0x9E3779B97F4A7C15)
	var sum float64
	var v view
	for range e.sample {
		i0, i1, _ := e.locate(sketch.SplitMix64(&st))
		v.load(&e.lines[i0], &e.lines[i1])
		lw0, lw1 := hdrLW(v.w[0][0]), hdrLW(v.w[1][0])
		tlo, _ := q.ticks(max(ms, lw0, lw1))
		lt := [2]uint64{q.lo(lw0), q.lo(lw1)}
		if denies(max(floorOf(v.w[0][0], lt[0]), floorOf(v.w[1][0], lt[1])), tlo) {
			sum++
			continue
		}
		heavy := 0
		for l := range 2 {
			top := lt[l] + q.span + 1
			for s := range SlotsPerLine {
				j, sh := slotWord(s)
				if ent := uint32(v.w[l][j] >> sh); ent != 0 && denies(interp(entRes(ent), top), tlo) {
					heavy++
				}
			}
		}
		sum += -math.Expm1(float64(heavy) * math.Log1p(-1.0/65535))
	}
	return sum / float64(e.sample)
}
