//go:build amd64 && gc && !purego

package atom

// nextN is nextNGeneric in assembly (batch_amd64.s).
func nextN(w *[MaxCells]Word, n uint32, now uint32, delta, lo, hi float64, nw *[MaxCells]Word) bool {
	return nextNAsm(w, n, now, delta, lo, hi, nw)
}

//go:noescape
func nextNAsm(w *[MaxCells]Word, n uint32, now uint32, delta, lo, hi float64, nw *[MaxCells]Word) bool

// decideN is decideNGeneric in assembly (batch_amd64.s).
func decideN(w *[MaxCells]Word, n uint32, now uint32, delta, limit, lo, hi float64, v *[MaxCells]float64, nw *[MaxCells]Word) Verdict {
	return Verdict(decideNAsm(w, n, now, delta, limit, lo, hi, v, nw))
}

//go:noescape
func decideNAsm(w *[MaxCells]Word, n uint32, now uint32, delta, limit, lo, hi float64, v *[MaxCells]float64, nw *[MaxCells]Word) uint8
