//go:build !grudge_nobackoff

package atom

// useBackoff enables the contention backoff after a lost CAS (the
// default).
const useBackoff = true
