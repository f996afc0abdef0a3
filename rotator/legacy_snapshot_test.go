package rotator

import (
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestLegacySnapshotRestoredBehind: a snapshot as rotators before stop 46
// wrote it (generation g stated at its own instant, 20 g ms after the
// rotator's), restored on a clock behind or between those instants,
// reads what the current snapshot of the same state reads: the decoder
// maps every generation by the rotator's instant. Before stop 47 such a
// restore kept the later generations' skew as extra age (audit 62:
// 20.99 where the truth was 21.29).
func TestLegacySnapshotRestoredBehind(t *testing.T) {
	S := a62T0 + 500
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	r, err := New(a62Cfg(c))
	if err != nil {
		t.Fatal(err)
	}
	c.Set(a62T0 + 100)
	r.UpdateString("k", 40)
	c.Set(a62T0 + 450)
	r.UpdateString("j", 9)
	c.Set(S)
	snap, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	old := a62Legacy(t, snap, 2, 1024, []int64{0, 20, 40})
	for _, off := range []int64{-86_400_000, -3_600_000, -1, 0, 10, 20, 39} {
		c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		c1.Set(S + off)
		c2.Set(S + off)
		a, _ := New(a62Cfg(c1))
		b, _ := New(a62Cfg(c2))
		if err := a.UnmarshalBinary(snap); err != nil {
			t.Fatal(err)
		}
		if err := b.UnmarshalBinary(old); err != nil {
			t.Fatalf("a legacy snapshot refused: %v", err)
		}
		for tau := S + off; tau < S+off+3*a62Period; tau += 7 {
			c1.Set(tau)
			c2.Set(tau)
			for _, key := range []string{"k", "j"} {
				if x, y := a.QueryString(key), b.QueryString(key); math.Abs(x-y) > 1e-6*math.Max(1, x) {
					t.Fatalf("restore off %d, +%d: Query(%s) current snapshot %v, legacy %v", off, tau-S, key, x, y)
				}
			}
		}
	}
}
