package meter

import (
	"testing"
	"time"
)

// Novelty's doc: "With rotation (Period = 16 T by default, at least T)";
// meter.go's maxPeriod: "a Period shorter than the window breaks what each
// type promises". periodOf converts window x k through float64, which
// rounds a window of 2^61..2^62 ns to a multiple of 512 ns, sometimes down
// across a whole millisecond, so the ms round-up lands 1 ns below the
// window: a Period shorter than T (negligible in practice: 73+ years, 1 ns).
func TestAudit40FixedPeriodShorterThanWindow(t *testing.T) {
	short := 0
	var ex time.Duration
	for _, base := range []int64{2305843009216, 3000000000000, 4611686018424} { // whole ms, multiples of 8
		for d := int64(-3); d <= 3; d++ {
			w := time.Duration((base+d*8)*1e6 + 1)
			if checkPeriod(w, 1) != nil {
				continue
			}
			if p := periodOf(w, 1); p < w {
				short++
				ex = w
			}
		}
	}
	if short > 0 {
		t.Errorf("%d of 21 accepted windows get a Period shorter than the window with PeriodWindows 1, e.g. window %d ns -> Period %d ns "+
			"(want Period >= window: novelty.go \"Period = 16 T by default, at least T\")", short, int64(ex), int64(periodOf(ex, 1)))
	}
}

// Sub-millisecond windows: the Period rounds up to the ms, never below.
func TestAudit40PeriodOfSmallWindows(t *testing.T) {
	for _, w := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, 7*time.Millisecond + 1, time.Second + 999999} {
		for _, k := range []float64{1, 1.5, 16} {
			if p := periodOf(w, k); p < time.Duration(float64(w)*k) || p%time.Millisecond != 0 {
				t.Errorf("periodOf(%v, %v) = %v", w, k, p)
			}
		}
	}
}
