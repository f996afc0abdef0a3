package bucket

import (
	"fmt"
	"math"
	"math/bits"
)

// LawKind names a decay law.
type LawKind uint8

const (
	// KindNone: loads never decay (a counter that only grows, up to Max).
	KindNone LawKind = iota
	// KindLinear: a load drains at Rate per second and stops at 0, the
	// debt form of a token bucket (package limit).
	KindLinear
	// KindExponential: a load decays as exp(-Lambda * seconds), a decaying
	// rate estimate (package meter).
	KindExponential
)

func (k LawKind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindLinear:
		return "linear"
	case KindExponential:
		return "exponential"
	}
	return fmt.Sprintf("LawKind(%d)", uint8(k))
}

// Law is an engine's decay law and the most a key can hold. Build one with
// [None], [Linear] or [Exponential].
type Law struct {
	Kind LawKind
	// Rate is the linear law's drain, in load units per second (> 0).
	Rate float64
	// Lambda is the exponential law's decay constant, per second (> 0).
	Lambda float64
	// Max is the most a key can hold (the clamp; > 0). A load never
	// exceeds it, as the count-min's Hi.
	Max float64
	// Resolution is the exponential law's smallest load: a load that
	// decays below it reads as 0 (0 means Max / 2^48). The other laws
	// ignore it. Dropping those remainders is the one way an exponential
	// estimate can fall below the truth, by at most about
	// Resolution / kappa (kappa: the log-growth of one tick; about 1e-12
	// x Max with the default).
	Resolution float64
}

// None returns the law of loads that never decay, clamped at max.
func None(max float64) Law { return Law{Kind: KindNone, Max: max} }

// Linear returns the linear law: a load drains at rate per second and
// stops at 0, clamped at max.
func Linear(rate, max float64) Law { return Law{Kind: KindLinear, Rate: rate, Max: max} }

// Exponential returns the exponential law exp(-lambda * seconds), clamped
// at max, with loads below resolution reading as 0 (0 means max / 2^48).
func Exponential(lambda, max, resolution float64) Law {
	return Law{Kind: KindExponential, Lambda: lambda, Max: max, Resolution: resolution}
}

// Stamps. A key's state is one stamp, a tick count that does not change as
// time passes: the linear law stores the tick at which the debt will be 0
// (GCRA's theoretical arrival time), the exponential law the tick at which
// the load will have decayed to Resolution. A stamp at or before now is a
// load of 0. Stamps are at most span ticks after the time they were
// written, so a 16-bit residue locates one (see docs/design.md).
const (
	// maxSpan bounds span. The window a residue is read in is
	// (lt + span + 1 - 2^16, lt + span + 1] for lt the tick of the line's
	// lw: every stamp written since lw reached its value is in it. Its
	// slack, 2^16 - 1 - span ticks (at least 4,097), is how far lw may
	// move in one step without a reload: a stamp written at the old lw
	// is at least its tick, so it still reads correctly in the new
	// window (docs/design.md, "Moving a line's time").
	maxSpan = 1<<16 - 1<<12 - 2
	// window is the span of a residue: 2^16 ticks.
	window = 1 << 16
	// tickBase is added to every tick so that window arithmetic near the
	// epoch never goes below 0.
	tickBase = 1 << 17
	// maxTicksPerMs caps the tick rate so that tick arithmetic on 47-bit
	// millisecond times stays within 64 bits.
	maxTicksPerMs = 1 << 14
)

// fitsWindow reports whether span ticks and one millisecond of g ticks
// leave the window a step of at least a millisecond: g <= slack - 1.
func fitsWindow(span, g uint64) bool { return span+g <= window-2 }

// quant is a law quantized to integer ticks. All fields are fixed at New.
type quant struct {
	kind LawKind
	// sealShift is log2 of seal (below): a byte beside kind, where it
	// costs no padding (the Engine struct's size is in its line budget).
	sealShift uint8
	// gn/gd are the ticks per millisecond (gn == 0: time stands still).
	// Either gd == 1 (whole ticks per ms, so times convert exactly) or
	// gn == 1 (one tick per gd ms).
	gn, gd uint64
	// divM, divS divide by gd without a division instruction:
	// floor(x/gd) = hi64(x*divM) >> divS for every x < 2^divBits
	// (Granlund and Montgomery, "Division by invariant integers using
	// multiplication", PLDI 1994, with N = divBits).
	divM uint64
	divS uint
	// span is the largest load in ticks: the stamp of a write at tick t
	// is at most t + span.
	span uint64
	// slack is 2^16 - 1 - span: a stamp reads correctly at a line time
	// of tick lt when it is above lt - slack.
	slack uint64
	// seal is the length in ticks of an epoch of a line's time, the
	// largest power of two at most slack/8 (1 << sealShift): a move of
	// lw into a later epoch seals the line (docs/design.md, "Moving a
	// line's time"), and a give-back (an undo, a refund) lowers an entry
	// by at most slack - 2 seal ticks per CAS.
	seal uint64

	// Linear and None: u is the number of ticks (units) per load unit, an
	// integer, so whole loads are exact; rate is the effective rate
	// 1000*gn/(gd*u) per second, <= the law's Rate.
	u    float64
	rate float64
	max  float64

	// Exponential: a stamp s at tick t reads eps * exp(kappa * (s - t)).
	kappa, eps float64
}

// newQuant validates law and picks its ticks.
func newQuant(law Law) (quant, error) {
	q, err := pickQuant(law)
	q.setDivisor()
	q.slack = window - 1 - q.span
	q.sealShift = uint8(bits.Len64(q.slack/8)) - 1
	q.seal = 1 << q.sealShift
	return q, err
}

// pickQuant is newQuant before the divisor's multiplier.
func pickQuant(law Law) (quant, error) {
	bad := func(field string, v any, format string, args ...any) (quant, error) {
		return quant{}, newConfigError("Law."+field, v, format, args...)
	}
	m := law.Max
	if math.IsNaN(m) || math.IsInf(m, 0) || m <= 0 {
		return bad("Max", m, "must be finite and > 0; got %v", m)
	}
	q := quant{kind: law.Kind, gd: 1, max: m}
	switch law.Kind {
	case KindNone, KindLinear:
		umax := math.Floor(maxSpan / m)
		if umax < 1 {
			return bad("Max", m, "must be <= %d for 16-bit loads; got %v", maxSpan, m)
		}
		if law.Kind == KindNone {
			q.u = umax
			q.span = uint64(math.Floor(m * q.u))
			return q, nil
		}
		r := law.Rate
		if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			return bad("Rate", r, "must be finite and > 0; got %v", r)
		}
		q.u, q.gn, q.gd, q.rate = pickLinear(r, umax, m)
		q.span = uint64(math.Floor(m * q.u))
		return q, nil
	case KindExponential:
		l := law.Lambda
		if math.IsNaN(l) || math.IsInf(l, 0) || l <= 0 {
			return bad("Lambda", l, "must be finite and > 0; got %v", l)
		}
		eps := law.Resolution
		if eps == 0 {
			eps = m / (1 << 48)
		}
		if math.IsNaN(eps) || math.IsInf(eps, 0) || eps <= 0 || eps >= m {
			return bad("Resolution", law.Resolution, "must be > 0 and < Max (%v); got %v", m, law.Resolution)
		}
		q.eps = eps
		lnSpan := math.Log(m / eps)
		kmin := lnSpan / (maxSpan - 1) // ln-growth per tick at least this
		// tick length in ms at least 1000*kmin/lambda
		tms := 1000 * kmin / l
		if tms <= 1 {
			q.gn = uint64(math.Min(math.Floor(1/tms), maxTicksPerMs))
			// The span grows with the tick rate: keep a millisecond beside
			// it in the window.
			for q.gn > 1 && !fitsWindow(uint64(math.Ceil(lnSpan/(l/(1000*float64(q.gn))))), q.gn) {
				q.gn = min(q.gn-1, uint64(float64(window-3)/(1+1000*lnSpan/l)))
			}
			q.kappa = l / (1000 * float64(q.gn))
		} else {
			q.gn, q.gd = 1, uint64(math.Ceil(tms))
			q.kappa = l * float64(q.gd) / 1000
		}
		q.span = uint64(math.Ceil(lnSpan / q.kappa))
		return q, nil
	}
	return bad("Kind", law.Kind, "must be None, Linear or Exponential; got %v", law.Kind)
}

// pickLinear chooses u ticks per load unit (1 <= u <= umax) and gn/gd
// ticks per ms for a drain of rate per second and a largest load of m,
// with the span and a millisecond within the window (fitsWindow),
// preferring in order: an exact rate with whole ticks per ms (every time
// converts exactly), an exact rate with one tick per gd ms, then the
// largest effective rate <= rate (draining slower than asked is the safe
// side); ties go to the larger u (finer loads).
func pickLinear(rate, umax, m float64) (u float64, gn, gd uint64, eff float64) {
	const tol = 1e-12
	bestClass := -1
	for ui := umax; ui >= 1; ui-- {
		g := rate * ui / 1000 // ticks per ms for this u
		var cn, cd uint64
		var e float64
		class := 0
		if g >= 1 {
			gi := math.Floor(g)
			if rg := math.Round(g); math.Abs(g-rg) <= tol*g {
				gi = rg
			}
			if gi > maxTicksPerMs {
				gi = maxTicksPerMs
			}
			// A millisecond must fit beside the span in the window
			// (fitsWindow; at least 4,096 ticks since span <= maxSpan).
			if room := float64(window - 2 - uint64(math.Floor(m*ui))); gi > room {
				gi = room
			}
			cn, cd = uint64(gi), 1
			e = 1000 * gi / ui
			if gi == math.Round(g) && math.Abs(g-gi) <= tol*g {
				class = 2
			}
		} else {
			mm := 1000 / (rate * ui) // ms per tick
			mi := math.Ceil(mm)
			if rm := math.Round(mm); math.Abs(mm-rm) <= tol*mm {
				mi = rm
				class = 1
			}
			cn, cd = 1, uint64(mi)
			e = 1000 / (ui * mi)
		}
		if e > rate {
			e = rate // a rounding artefact of an exact pick
		}
		if class > bestClass || (class == bestClass && e > eff) {
			bestClass, u, gn, gd, eff = class, ui, cn, cd, e
		}
		if class == 2 {
			break // the largest u with an exact whole-tick rate
		}
	}
	return u, gn, gd, eff
}

// divBits is the width of the numerators divide handles: ms after the
// epoch are below 2^48.
const divBits = 50

// setDivisor prepares divide for gd: with l = ceil(log2 gd) and
// n = max(divBits, 64-l), the multiplier m = ceil(2^(n+l)/gd) has at most
// n+1 <= 64 bits and floor(x*m / 2^(n+l)) = floor(x/gd) for every
// x < 2^n; n+l >= 64, so the quotient is the high word shifted.
func (q *quant) setDivisor() {
	if q.gd <= 1 {
		return
	}
	l := uint(bits.Len64(q.gd - 1)) // ceil(log2 gd), gd >= 2
	n := max(uint(divBits), 64-l)
	// m = floor((2^(n+l) - 1) / gd) + 1, in 128 bits (n+l in [64, 114]).
	hi, lo := uint64(1)<<(n+l-64)-1, ^uint64(0)
	m, _ := bits.Div64(hi, lo, q.gd)
	q.divM, q.divS = m+1, n+l-64
}

// divide returns floor(x / gd) for x < 2^divBits (gd >= 2).
func (q *quant) divide(x uint64) uint64 {
	h, _ := bits.Mul64(x, q.divM)
	return h >> q.divS
}

// ticks converts ms after the epoch to ticks, rounded down (lo) and up
// (hi). Reads use lo (less drain: the safe side); a write stamps from hi
// (a request made within a tick counts from the tick's end).
func (q *quant) ticks(ms uint64) (lo, hi uint64) {
	if q.gd == 1 {
		t := ms*q.gn + tickBase
		return t, t
	}
	d := q.divide(ms)
	lo, hi = d+tickBase, d+tickBase
	if d*q.gd != ms {
		hi++
	}
	return lo, hi
}

// epoch returns the epoch of tick t (see seal).
func (q *quant) epoch(t uint64) uint64 { return t >> q.sealShift }

// lo is ticks' lower value alone.
func (q *quant) lo(ms uint64) uint64 {
	if q.gd == 1 {
		return ms*q.gn + tickBase
	}
	return q.divide(ms) + tickBase
}

// msAtMost returns the latest ms whose tick (rounded down) is at most b
// (b >= tickBase), at most lwMask.
func (q *quant) msAtMost(b uint64) uint64 {
	if q.gn == 0 {
		return lwMask // time stands still: every ms has the same tick
	}
	d := b - tickBase
	if q.gd == 1 {
		return min(d/q.gn, lwMask)
	}
	hi, lo := bits.Mul64(d+1, q.gd)
	if hi != 0 || lo-1 > lwMask {
		return lwMask
	}
	return lo - 1
}

// units converts a load to ticks, rounded up exactly (linear and none):
// the least whole number of ticks at or above n x u, the product taken
// exactly (its float64 rounding p and the residual math.FMA gives, n x
// u = p + r), saturating at unitsCap: a load past 2^62 ticks, far beyond
// any Max, is more than any limit limitUnits gives (a TryUpdate of it
// is decided in tokens, and an Update writes Max), the same on every
// architecture (a float64 to uint64 conversion out of range is not:
// amd64 gives 2^63, arm64 the largest uint64, whose sum with a debt
// wraps).
func (q *quant) units(n float64) uint64 {
	p := float64(n * q.u)
	if p >= 1<<62 {
		return unitsCap
	}
	if p == 0 {
		if n > 0 {
			return 1 // n x u underflowed: still more than 0 ticks
		}
		return 0
	}
	r := math.FMA(n, q.u, -p) // n x u - p, exact
	if p >= 1<<52 {
		// p is whole, and r may be a step of p or more either way.
		return min(uint64(int64(p)+int64(math.Ceil(r))), unitsCap)
	}
	c := math.Ceil(p)
	t := uint64(c)
	if d := r - (c - p); d > 0 { // c - p is exact (Sterbenz, or p < 1/2 and r tiny)
		t += uint64(math.Ceil(d)) // n x u is above c by d
	}
	return t
}

// unitsCap is units' saturation: one more than limitUnits' cap.
const unitsCap = 1<<62 + 1

// fits reports whether a load of debt ticks plus n (c = units(n) ticks)
// is at most limit (lim = limitUnits(limit) ticks): in ticks where
// neither saturated; else in tokens, rounded against admission (limit
// and n are then past 2^62 ticks, far beyond any Max). A negative limit
// fits nothing.
func (q *quant) fits(debt, c, lim uint64, n, limit float64) bool {
	if limit < 0 {
		return false
	}
	if c < unitsCap && lim < 1<<62 {
		return debt+c <= lim // both exact: see units and limitUnits
	}
	// In tokens: room and debt/u each round once (relative 2^-53) and
	// the product once more; the factor covers them, so a fit here is a
	// fit in exact arithmetic.
	room := limit - n
	return room >= 0 && room >= float64(debt)/q.u*(1+0x1p-50)
}

// limitUnits converts a limit to ticks, rounded down exactly (the
// greatest whole number of ticks at or below limit x u, as units rounds
// up), saturating at 2^62; a negative limit gives 0 (fits denies it).
func (q *quant) limitUnits(l float64) uint64 {
	p := float64(l * q.u)
	if p >= 1<<62 {
		return 1 << 62
	}
	if p <= 0 {
		return 0
	}
	r := math.FMA(l, q.u, -p) // l x u - p, exact
	if p >= 1<<52 {
		// p is whole, and r may be a step of p or more either way.
		return min(uint64(int64(p)+int64(math.Floor(r))), 1<<62)
	}
	f := math.Floor(p)
	t := uint64(f)
	if d := (f - p) - r; d > 0 { // l x u is below f by d
		t -= min(uint64(math.Ceil(d)), t)
	}
	return t
}

// value returns the load stamp s stands for at tick t.
func (q *quant) value(s, t uint64) float64 {
	if s <= t {
		return 0
	}
	if q.kind != KindExponential {
		// At most Max: a write made within a tick longer than 1 ms counts
		// from the tick's end, a tick above the span at its start.
		return math.Min(float64(s-t)/q.u, q.max)
	}
	v := q.eps * math.Exp(q.kappa*float64(s-t)) * (1 + 1e-12)
	return math.Min(v, q.max)
}

// expStamp returns the stamp of load v written at tick th (exponential):
// the least tick s with eps*exp(kappa*(s-th)) >= v, at most th+span.
func (q *quant) expStamp(v float64, th uint64) uint64 {
	if v < q.eps {
		if v <= 0 {
			return 0
		}
		return th + 1 // reads as eps (>= v) until th+1
	}
	d := math.Ceil(math.Log(v/q.eps)/q.kappa + 1e-9)
	if d >= float64(q.span) {
		return th + q.span
	}
	return th + uint64(d)
}
