package grudge

import (
	"fmt"
	"math"

	"github.com/lfgrudge/grudge/sketch"
)

// SuggestLevels returns the smallest number of levels L (1..8) whose
// false-positive probability (1 - (1 - 1/M)^H)^L, for H = hotKeys
// concurrently hot keys in levels of M = cellsPerLevel cells, is at most
// targetP; 8 when no L up to 8 reaches it (this sketch allows at most 8).
// Degenerate inputs have no answer and are refused with an error naming
// the argument and its value (prefix "grudge: "): hotKeys or
// cellsPerLevel 0, targetP NaN or outside (0, 1).
func SuggestLevels(hotKeys, cellsPerLevel uint32, targetP float64) (uint32, error) {
	switch {
	case hotKeys == 0:
		return 0, fmt.Errorf("grudge: SuggestLevels: hotKeys must be > 0; got 0")
	case cellsPerLevel == 0:
		return 0, fmt.Errorf("grudge: SuggestLevels: cellsPerLevel must be > 0; got 0")
	case math.IsNaN(targetP) || !(targetP > 0 && targetP < 1):
		return 0, fmt.Errorf("grudge: SuggestLevels: targetP must be in (0, 1); got %v", targetP)
	}
	return sketch.SuggestLevels(hotKeys, cellsPerLevel, targetP), nil
}
