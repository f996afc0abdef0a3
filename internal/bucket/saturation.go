package bucket

import (
	"math"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
)

// Saturation returns the estimated probability that a fresh key (one the
// engine has never seen) asking for n now under limit is denied: the
// engine's rate of innocent denials, the figure an operator alerts on
// (docs/capacity.md). It reads a histogram of the lines' eviction floors
// (2 KiB) and samples Config.SaturationSamples lines (4096 by default:
// 256 KiB, well under a millisecond); it never writes and does not
// allocate.
func (e *Engine) Saturation(n, limit float64) float64 { return e.saturation(e.now(), n, limit) }

// SaturationAt is Saturation at time t.
func (e *Engine) SaturationAt(t time.Time, n, limit float64) float64 {
	return e.saturation(e.at(t), n, limit)
}

// exactLines is the size up to which saturation reads every line.
const exactLines = 4096

// saturation: a fresh key is denied when either of its two lines (two
// different lines: locate) has a floor that denies it, or, failing that,
// when its fingerprint matches one of the entries of its lines that deny
// it (probability 1/65535 each):
//
//	P = 1 - (1-q) (1 - f/(n-1)) (1 - 1/65535)^(2h)
//
// with f = qn the lines (of n) whose floor denies (from the floor
// histogram: exact but for the bucket at the threshold) and h the mean
// number of denying entries per line (sampled). The second line is one
// of the n-1 others (audit 85: with independent draws, (1-q)^2, an
// engine of 2 lines with one floored read 75% while it denied every
// fresh key), though not uniformly: locate moves a collision to the next
// line, so the line after the first is drawn with probability 2/n and
// every other one with 1/n. The formula above takes the floors as if
// they were anywhere; where they alternate it reads up to about
// 1/(4(n-1)) low (audit 101: 83.3% on 4 lines with floors on lines 1
// and 3, which deny 87.5% of fresh keys). An engine of at most
// max(SaturationSamples, 4096) lines reads every line once: h exactly,
// and the floors' term exactly instead, line by line and with each
// line's successor:
//
//	1 - (1/n^2) sum over fine lines i of (F - 1 + [line i+1 fine])
//
// with F the lines whose floor does not deny. Past that size the bias is
// below 1/(4 x 4096): 0.006%.
func (e *Engine) saturation(ms uint64, n, limit float64) float64 {
	checkLoad("Saturation", n)
	checkLimit("Saturation", limit)
	q := &e.q
	t, _ := q.ticks(ms)
	// theta: the largest stamp that does not deny.
	var theta uint64
	if q.kind != KindExponential {
		c, lim := q.units(n), q.limitUnits(limit)
		if !q.fits(0, c, lim, n, limit) {
			return 1
		}
		// A stamp s denies when min(s - t, span) + n exceeds the limit
		// (do caps a debt at the span): theta is t + the room, and no
		// stamp denies (every stamp is at most t + span + 1) when the
		// room is the span or more.
		room := q.span + 1
		if c < unitsCap && lim < 1<<62 {
			room = min(lim-c, room)
		} else if off := (limit - n) * q.u * (1 - 0x1p-50); off < float64(room) {
			room = uint64(off) // in tokens (fits): rounded down
		}
		if room >= q.span {
			room = q.span + 1
		}
		theta = t + room
	} else {
		room := limit - n
		if room < 0 {
			return 1
		}
		if room < q.eps {
			theta = t
		} else {
			theta = t + min(uint64(math.Floor(math.Log(room/q.eps)/q.kappa)), q.span+1)
		}
		// The estimate may be a step or two off the operation's own test
		// (q.value caps at Max and nudges up): settle it on that test,
		// within [t, t + span + 1] (no stamp is above that).
		denies := func(s uint64) bool { return q.value(s, t)+n > limit }
		for theta > t && denies(theta) {
			theta--
		}
		for theta < t+q.span+1 && !denies(theta+1) {
			theta++
		}
	}
	// An engine of at most max(SaturationSamples, 4096) lines reads every
	// line once, for both terms (exact and the same on every call);
	// larger ones sample.
	samples := e.sample
	if int(e.n) <= max(e.sample, exactLines) {
		samples = int(e.n)
	}
	exact := samples == int(e.n)
	st := e.seed ^ e.satCalls.Add(0x9E3779B97F4A7C15)
	heavy := 0
	// exact: the fine lines (whose floor lets the key through), whether
	// line 0 and the line before this one are, and the fine lines whose
	// successor is fine too.
	nf, pairs, first, prev := 0, 0, false, false
	for k := range samples {
		i := uint64(k)
		if !exact {
			i = core.SplitMix64(&st) >> 32 * e.n >> 32
		}
		var w [wordsPerLine]uint64
		e.loadLine(&e.lines[i], &w)
		lt := q.lo(hdrLW(w[0]))
		if exact {
			ok := floorOf(w[0], lt) <= theta
			if ok {
				nf++
				if k > 0 && prev {
					pairs++ // line k-1 fine and its successor k too
				}
			}
			if k == 0 {
				first = ok
			}
			prev = ok
		}
		top := lt + q.span + 1
		for s := range SlotsPerLine {
			j, sh := slotWord(s)
			if ent := uint32(w[j] >> sh); !isEmpty(ent) && interp(entRes(ent), top) > theta {
				heavy++
			}
		}
	}
	var free float64 // the probability that neither floor denies
	if exact {
		if prev && first {
			pairs++ // the last line's successor is line 0
		}
		// sum over fine i of (F - 1 + [i+1 fine]) = F(F-1) + pairs
		free = (float64(nf)*float64(nf-1) + float64(pairs)) / (float64(e.n) * float64(e.n))
	} else {
		qf := math.Min(e.floors.above(theta)/float64(e.n), 1)
		free = (1 - qf) * max(0, 1-qf*float64(e.n)/float64(e.n-1))
	}
	h := float64(heavy) / float64(samples)
	return 1 - free*math.Exp(2*h*math.Log1p(-1.0/65535))
}
