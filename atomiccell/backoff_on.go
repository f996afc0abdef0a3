//go:build !grudge_nobackoff

package atomiccell

// useBackoff enables asm.Backoff after a failed CAS (the default).
const useBackoff = true
