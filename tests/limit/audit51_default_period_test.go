package limit_test

import (
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit51ClockJumpOracleDefaultPeriod: the oracle run on a count-min
// at its default Period (rotating at every jump past one) and default
// size: a key that is not hammering at its limit is never amnestied
// (doc.go "Rotation and amnesty"), so every answer is still the rational
// bucket's.
func TestAudit51ClockJumpOracleDefaultPeriod(t *testing.T) {
	testsize.Serial(t)
	c := a51Case{name: "countmin-3/7-defaultperiod", eng: limit.CountMin, base: a51Pol{3, 1, 7}, maxDebt: 28,
		policies: []a51Pol{{3, 1, 7}, {1, 1, 7}, {3, 1, 28}, {3, 2, 3}}, tiers: []a51Pol{{1, 1, 5}}}
	for seed := uint64(1); seed <= 3; seed++ {
		bad, st := a51Run(t, c, seed, 3000)
		t.Logf("seed %d: %v", seed, st)
		for _, b := range bad {
			t.Errorf("seed %d: %s", seed, b)
		}
	}
}
