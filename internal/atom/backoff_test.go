package atom

import (
	"testing"

	"github.com/lfgrudge/grudge/asm"
)

// TestSetContentionBackoff: the setter replaces the schedule every writer
// takes (ContentionBackoff) and whether Cell's own loops spin, off turns
// both off as -tags grudge_nobackoff does, and the build's default comes
// back after a restore. A cell still adds exactly under each schedule.
func TestSetContentionBackoff(t *testing.T) {
	def, defSpin := contention, spinOnLoss
	t.Cleanup(func() { contention, spinOnLoss = def, defSpin })
	if useBackoff && (def != asm.NewBackoff(contendedFirst, contendedMax) || !defSpin) {
		t.Fatalf("default schedule %+v spin %v; want NewBackoff(%d, %d), spinning", def, defSpin, contendedFirst, contendedMax)
	}
	if !useBackoff && (def != (asm.Backoff{}) || defSpin) {
		t.Fatalf("nobackoff build's schedule %+v spin %v; want the zero Backoff, not spinning", def, defSpin)
	}
	r := NewRules(nil, 0, 1e12)
	for _, tc := range []struct {
		first, limit uint32
		want         asm.Backoff
		spin         bool
	}{
		{0, 0, asm.Backoff{}, false},
		{0, 4096, asm.Backoff{}, false},
		{8, 256, asm.NewBackoff(8, 256), true},
		{64, 16, asm.NewBackoff(64, 64), true},
		{32, 1024, asm.NewBackoff(32, 1024), true},
	} {
		SetContentionBackoff(tc.first, tc.limit)
		if got := ContentionBackoff(); got != tc.want || spinOnLoss != tc.spin {
			t.Errorf("SetContentionBackoff(%d, %d): ContentionBackoff %+v spin %v; want %+v spin %v", tc.first, tc.limit, got, spinOnLoss, tc.want, tc.spin)
		}
		var c Cell
		stale := c.Load()
		for range 3 {
			c.Add(r, 0, 1, stale) // a stale view after the first: a lost round each
		}
		if got := r.Value(c.Load(), 0); got != 3 {
			t.Errorf("schedule %d/%d: three adds of 1 left %v", tc.first, tc.limit, got)
		}
	}
}
