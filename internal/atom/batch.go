package atom

// The batch cell arithmetic of NextN, as a pure function of the words
// and the bounds: nextN is nextNGeneric on every platform without
// assembly, and batch_amd64.s on amd64 (SSE2, two words at a time). The
// twin is always compiled, so a test compares the two in one binary.

// nextNGeneric sets nw[i] to w[i] plus delta at now, clamped to [lo, hi]
// and narrowed upward, stamped with the newer of its stamp and now, for
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
		out[i] = Pack(roundIn(s+delta, lo, hi), st)
	}
	return true
}

// roundIn clamps v to [lo, hi] and narrows it upward: Rules.Round, and
// nextNGeneric's round. v must not be NaN.
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
