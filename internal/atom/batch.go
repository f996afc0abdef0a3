package atom

import "math"

// The batch cell arithmetic of NextN and DecideN, as pure functions of
// the words and the bounds: nextN and decideN are nextNGeneric and
// decideNGeneric on every platform without assembly, and batch_amd64.s on
// amd64 (SSE2, two words at a time). The twins are always compiled, so a
// test compares each pair in one binary.

// nextNGeneric sets nw[i] to w[i] plus delta at now (the exact sum),
// clamped to [lo, hi] and narrowed upward (roundSumIn), stamped with the newer of its stamp and now, for
// i < n, and reports true, provided no word needs decay: it reports false
// (nw then partly written) at a word older than now with a non-zero
// score, which the caller decays through the law (Rules.nextNFrom).
// lo and hi are float32 values within ±MaxFloat32 (Rules' bounds).
func nextNGeneric(w *[MaxCells]Word, n uint32, now uint32, delta, lo, hi float64, nw *[MaxCells]Word) bool {
	ws := w[:n]
	out := nw[:len(ws)]
	for i, x := range ws {
		s, st := float64(x.Score()), x.Stamp()
		if int32(now-st) > 0 {
			if s != 0 {
				return false
			}
			st = now
		}
		out[i] = Pack(roundSumIn(s, delta, lo, hi), st)
	}
	return true
}

// roundIn clamps v to [lo, hi] and narrows it upward: Rules.Round. v
// must not be NaN.
func roundIn(v, lo, hi float64) float32 {
	// Branches rather than min/max: clamping is rare, so they predict
	// well, and Go's float min/max must order NaN and signed zeros.
	if v < lo {
		v = lo
	} else if v > hi {
		v = hi
	}
	return roundUpInRange(v)
}

// Verdict is what DecideN concluded.
type Verdict uint8

const (
	// Slow: a word needs the decay law; nothing concluded (v and nw
	// partly written).
	Slow Verdict = iota
	// Deny: the Min of the values plus delta is not <= limit (v written;
	// nw may be: the assembly builds the new words before deciding).
	Deny
	// Admit: admitted, and nw holds the new words, at least one of them
	// not its old word (v written).
	Admit
	// AdmitSame: admitted, and every new word equals its old word (v and
	// nw written).
	AdmitSame
)

// decideNGeneric is TryUpdate's decision on words that need no decay
// law: every word stamped at or after now, or scoring zero. It sets
// v[i] to w[i]'s value (its score) for i < n, and reports Deny unless
// their Min plus delta is <= limit; then it sets nw as nextNGeneric does
// (equal to ApplyN on those values) and reports Admit, or AdmitSame when
// nw[:n] equals w[:n]. It reports Slow at the first aged word with a
// non-zero score. lo and hi as for nextNGeneric; delta and limit finite.
func decideNGeneric(w *[MaxCells]Word, n uint32, now uint32, delta, limit, lo, hi float64, v *[MaxCells]float64, nw *[MaxCells]Word) Verdict {
	ws := w[:n]
	vs := v[:len(ws)]
	lowest := math.Inf(1)
	for i, x := range ws {
		s := float64(x.Score())
		if int32(now-x.Stamp()) > 0 && s != 0 {
			return Slow
		}
		vs[i] = s
		if s < lowest {
			lowest = s
		}
	}
	if !(lowest+delta <= limit) {
		return Deny
	}
	nextNGeneric(w, n, now, delta, lo, hi, nw)
	for i, x := range ws {
		if nw[i] != x {
			return Admit
		}
	}
	return AdmitSame
}
