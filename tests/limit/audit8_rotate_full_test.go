package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit8ReserveRotationFullDebt: a key driven to MaxDebt (400 tokens
// at 10/s: 40 s of debt), then silent for 41 s (MaxDebt/rate: the
// package doc's "any client that pauses for MaxDebt/rate in a Period"
// is never amnestied), again and again, while the rotating count-min
// promotes at its least Period (MaxDebt / (rate x (Generations-1))):
// every reservation's delay is exactly the rational bucket's, and a
// reservation that would pass MaxDebt is refused, across many
// promotions at every phase (conservative or not). A key kept at
// MaxDebt without pausing loses its debt at a promotion (documented:
// "Rotation and amnesty").
func TestAudit8ReserveRotationFullDebt(t *testing.T) {
	for _, gens := range []uint32{2, 3, 5} {
		for _, cu := range []bool{false, true} {
			period := time.Duration(40/float64(gens-1)*1000) * time.Millisecond
			t.Run(fmt.Sprintf("g%d/cu%v", gens, cu), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1 << 36)
				l, err := limit.New(10, 5, limit.WithSeed(2), limit.WithClock(clk), limit.WithMaxDebt(400),
					limit.WithEngine(limit.CountMin), limit.WithGenerations(gens), limit.WithPeriod(period), limit.WithConservativeUpdate(cu))
				if err != nil {
					t.Fatal(err)
				}
				debt := time.Duration(0)
				last := clk.Now()
				first := last
				refused, run := 0, 0
				for i := range 6000 {
					// Mostly back-to-back; every 20th call after a gap
					// of 0.3 to 1.5 s: the debt climbs to MaxDebt; after
					// the 3rd refusal in a row, 41 s of silence.
					if i%20 == 19 {
						clk.Advance(time.Duration(300+(i*37)%1200) * time.Millisecond)
					}
					if run == 3 {
						clk.Advance(41*time.Second + time.Duration(i%997)*time.Millisecond)
						run = 0
					}
					now := clk.Now()
					debt = max(0, debt-now.Sub(last))
					last = now
					r := l.ReserveN(now, "full", 1)
					if debt+100*time.Millisecond > 40*time.Second {
						if r.OK() {
							t.Fatalf("#%d admitted past MaxDebt (debt %v)", i, debt)
						}
						refused++
						run++
						continue
					}
					debt += 100 * time.Millisecond
					run = 0
					if !r.OK() {
						t.Fatalf("#%d refused at debt %v", i, debt-100*time.Millisecond)
					}
					if got, want := r.DelayFrom(now), max(0, debt-500*time.Millisecond); got != want {
						t.Fatalf("#%d: delay %v, want %v", i, got, want)
					}
				}
				if el := last.Sub(first); refused == 0 || el < 3*period {
					t.Fatalf("%d refusals over %v (%v a period): not at MaxDebt across promotions", refused, el, period)
				}
			})
		}
	}
}
