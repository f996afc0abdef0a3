//go:build !(amd64 && gc && !purego)

package atom

// nextN is nextNGeneric (no assembly on this platform or build).
func nextN(w *[MaxCells]Word, n uint32, now uint32, delta, lo, hi float64, nw *[MaxCells]Word) bool {
	return nextNGeneric(w, n, now, delta, lo, hi, nw)
}

// decideN is decideNGeneric (no assembly on this platform or build).
func decideN(w *[MaxCells]Word, n uint32, now uint32, delta, limit, lo, hi float64, v *[MaxCells]float64, nw *[MaxCells]Word) Verdict {
	return decideNGeneric(w, n, now, delta, limit, lo, hi, v, nw)
}
