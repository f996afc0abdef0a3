package bucket

import (
	"fmt"
	"math"
	"testing"
)

// a101KeyOn returns a key (prefix p) whose two lines are a and b, in
// either order.
func a101KeyOn(t *testing.T, e *Engine, p string, a, b uint64) string {
	t.Helper()
	for k := range 100000 {
		key := fmt.Sprint(p, k)
		i0, i1, _ := e.Locate(key)
		if i0 == a && i1 == b || i0 == b && i1 == a {
			return key
		}
	}
	t.Fatalf("no key on lines %d, %d", a, b)
	return ""
}

// TestAudit101BucketFixedSaturationAdjacentLinesReadsLow (audit 101;
// fixed at stop 60, the text below says what was wrong; an engine of at
// most SaturationSamples lines counts the floors' term line by line,
// with each line's successor): saturation.go,
// saturation: "a fresh key is denied when either of its two lines (two
// different lines: locate) has a floor that denies it ... The second
// line is one of the n-1 others", P = 1 - (1-q)(1 - f/(n-1))...;
// docs/design.md ("Saturation and sizing"): "within 2% of the measured
// rate wherever a measurement can tell". locate does not draw the second
// line uniformly among the other n-1: it draws it among all n and moves
// a collision to i0+1, so the line after i0 is twice as likely as any
// other (2/n against 1/n). The formula is then exact only on average
// over where the floors are: on an engine of 4 lines with floors that
// deny on lines 1 and 3 (every other line), every unfloored line's
// successor is floored, a fresh key passes with probability 1/8, and
// 87.5% are denied; Saturation reads 1 - (1/2)(1/3) = 83.3% (5% low,
// on an alert's unsafe side; 8 lines with 4 alternate floors: 81.25%
// against 78.6%). Repro: poke lines 1 and 3 full of live entries just
// under the limit, and evict one entry of each (Update of keys whose
// lines are 1 and 3).
//
// Fix: internal/bucket/engine.go, locate: draw the second line among the
// other n-1 (i1 = hi32 * (n-1) >> 32; if i1 >= i0 { i1++ }), which the
// formula assumes (this maps keys differently: bump snapVersion, since a
// snapshot's lines are only meaningful under the old mapping); or state
// the bias in saturation.go and docs/capacity.md for small engines.
func TestAudit101BucketFixedSaturationAdjacentLinesReadsLow(t *testing.T) {
	e := newTest(t, 4, Linear(10, 40), nil)
	now := Tick(e)
	tok := uint64(e.q.u) // ticks per token (1,500)
	for s := range SlotsPerLine {
		e.poke(1, s, uint16(0x4000+s), now+196*tok/10) // 19.6 tokens
		e.poke(3, s, uint16(0x5000+s), now+198*tok/10) // 19.8 tokens
	}
	e.Update(a101KeyOn(t, e, "a", 1, 3), 1) // evicts a 19.6 of line 1: its floor
	for s := range SlotsPerLine {
		if st := StateOf(e, 3); st.FP[s] != 0 {
			e.poke(3, s, st.FP[s], now+195*tok/10) // 19.5 tokens: cheaper than line 1's floor
		}
	}
	e.Update(a101KeyOn(t, e, "b", 1, 3), 1) // evicts a 19.5 of line 3: its floor
	for i, want := range []uint64{0, now + 196*tok/10, 0, now + 195*tok/10} {
		if got := StateOf(e, i).Floor; got != want {
			t.Fatalf("line %d floor %d, want %d (setup)", i, got, want)
		}
	}
	const probes = 40000
	denied := 0
	for k := range probes {
		if e.Query(fmt.Sprint("p", k))+1 > 20 {
			denied++
		}
	}
	meas := float64(denied) / probes
	sat := e.Saturation(1, 20)
	t.Logf("4 lines, floors on 1 and 3: measured %.2f%% of fresh keys denied, Saturation %.2f%%", 100*meas, 100*sat)
	if se := math.Sqrt(0.875 * 0.125 / probes); math.Abs(meas-0.875) > 5*se {
		t.Fatalf("measured %.4f, expected 0.875 from locate's distribution", meas)
	}
	if sat < meas*0.98 {
		t.Errorf("Saturation reads %.2f%% while %.2f%% of fresh keys are denied (%.1f%% low; the doc promises within 2%%): locate's second line is i0+1 twice as often as any other", 100*sat, 100*meas, 100*(1-sat/meas))
	}
}
