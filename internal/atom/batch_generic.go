//go:build !(amd64 && gc && !purego)

package atom

// nextN is nextNGeneric (no assembly on this platform or build).
func nextN(w *[MaxCells]Word, n uint32, now uint32, delta, lo, hi float64, nw *[MaxCells]Word) bool {
	return nextNGeneric(w, n, now, delta, lo, hi, nw)
}
