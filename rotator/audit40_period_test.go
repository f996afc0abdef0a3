package rotator_test

import (
	"testing"
	"time"
)

// rotator.Config.Period: "Period is how long each generation stays the
// primary; at least one millisecond (clocks count whole milliseconds)."
// A Period with a sub-millisecond part is truncated to whole ms
// (Period.Milliseconds() in Rotator.Init), so a generation stays the
// primary less than Period: with Period 2.9 ms the primary retires 2 ms
// after New.
func TestAudit40FixedPeriodTruncatedToMillis(t *testing.T) {
	for _, p := range []time.Duration{2900 * time.Microsecond, 1999 * time.Microsecond, 10*time.Millisecond + 900*time.Microsecond} {
		clk := a40Clock()
		r := a40Rot(t, clk, 2, p, false)
		r.UpdateString("k", 1)
		clk.Advance(p.Truncate(time.Millisecond)) // less than Period
		r.QueryString("k")
		if st := r.Stats(); st.Promotions != 0 {
			t.Errorf("Period %v: %d promotion(s) %v after New, before Period ended (want 0: the primary stays the primary for Period; rotator/config.go Config.Period)",
				p, st.Promotions, p.Truncate(time.Millisecond))
		}
	}
}
