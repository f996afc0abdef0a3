package limit_test

import "testing"

// TestAudit51ClockJumpOracleOddStarts: the oracle run with the fake
// clock starting at 0 (the Unix epoch, so that steps back go before it)
// and 2^32 ms, on one exact case per engine.
func TestAudit51ClockJumpOracleOddStarts(t *testing.T) {
	defer func(s int64) { a51Start = s }(a51Start)
	cs := a51Cases()
	for _, start := range []int64{0, 1 << 32, -(1 << 40)} {
		a51Start = start
		for _, c := range []a51Case{cs[0], cs[3]} {
			bad, st := a51Run(t, c, 7, 1500)
			for _, b := range bad {
				t.Errorf("start %d %s: %s", start, c.name, b)
			}
			t.Logf("start %d %s: %v", start, c.name, st)
		}
	}
}
