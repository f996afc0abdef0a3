//go:build !grudge_nobackoff

package atomiccell

// useBackoff enables the contention backoff after a lost CAS (the
// default).
const useBackoff = true
