package limit_test

import (
	"bytes"
	"testing"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit146SnapshotAcrossEndsHold: a limiter's snapshot (both
// engines) taken with the burst spent, on a clock at one end value, read
// by a fresh limiter whose clock reads another: restored later by 2 s or
// more (within the Buckets engine's horizon from the restoring New) the
// burst is back; restored earlier (no downtime counted) the debt is
// whole: not one token; never more than the burst; no error, no panic.
// Every pair, a span of all of int64 included (the downtime saturates).
func TestAudit146SnapshotAcrossEndsHold(t *testing.T) {
	for _, eng := range []limit.Engine{limit.CountMin, limit.Buckets} {
		for _, at := range a146Ends {
			for _, back := range a146Ends {
				l, clk := a146New(t, eng, at, limit.WithCapacity(1000, 0.01))
				if n := a146Drain(l, clk, "k", true); n != 20 {
					t.Fatalf("%v at %d: admitted %d, want 20", eng, at, n)
				}
				var b bytes.Buffer
				if _, err := l.WriteTo(&b); err != nil {
					t.Fatalf("%v: WriteTo at %d ms: %v", eng, at, err)
				}
				l2, clk2 := a146New(t, eng, back, limit.WithCapacity(1000, 0.01))
				if _, err := l2.ReadFrom(&b); err != nil {
					t.Errorf("%v: snapshot at %d ms, restored at %d ms: %v", eng, at, back, err)
					continue
				}
				n := a146Drain(l2, clk2, "k", true)
				switch {
				case n > 20:
					t.Errorf("%v: snapshot at %d, restored at %d: admitted %d, above the burst", eng, at, back, n)
				case back <= at && n != 0:
					t.Errorf("%v: snapshot at %d, restored earlier at %d: admitted %d, want 0 (no downtime)", eng, at, back, n)
				case back > at && float64(back)-float64(at) >= 2000 && n != 20:
					t.Errorf("%v: snapshot at %d, restored at %d: admitted %d, want 20", eng, at, back, n)
				}
			}
		}
	}
}
