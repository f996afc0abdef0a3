//go:build grudge_nobackoff

package atom

// useBackoff is off under -tags grudge_nobackoff: lost CASes retry at
// once. Only for measuring the backoff's effect.
const useBackoff = false
