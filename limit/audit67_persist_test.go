package limit_test

import (
	"bytes"
	"testing"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit67SnapshotAtCap: a count-min key at MaxDebt (its cell at the
// float32 clamp above it) and another filled during the encode (1 s
// after the instant: a cell read back by the law past Hi, so stated at
// Hi with a stamp after the instant) survive WriteTo/ReadFrom on a clock
// at the instant, 1 s and 1 day after it: the restored limiter's
// RetryAfter, ResetAfter and NextAfter are never earlier than the
// original's at the same instant, and a save-restore-save-restore chain
// reads the same as the first restore (persist.go: "Every debt has
// drained by the time elapsed since the snapshot"; docs/snapshots.md,
// "Consistency under concurrent updates").
func TestAudit67SnapshotAtCap(t *testing.T) {
	for _, c := range a67CapCases {
		l, clk := a67Lim(t, c.r, c.b, limit.WithSize(2, 1024))
		t0 := l.Now()
		l.AllowN(t0, "k", c.b)
		ran := false
		w := &testhook.Writer{N: 2, Hook: func() {
			ran = true
			clk.Set(t0.UnixMilli() + 1000)
			l.AllowN(l.Now(), "j", c.b)
		}}
		if _, err := l.WriteTo(w); err != nil {
			t.Fatalf("%v: WriteTo: %v", float64(c.r), err)
		}
		if !ran {
			t.Fatal("the hook did not run during the encode")
		}
		for _, off := range []int64{0, 1000, 86_400_000} {
			at := t0.UnixMilli() + off
			r, rclk := a67Lim(t, c.r, c.b, limit.WithSize(2, 1024))
			rclk.Set(at)
			if _, err := r.ReadFrom(bytes.NewReader(w.Buf.Bytes())); err != nil {
				t.Fatalf("%v: ReadFrom: %v", float64(c.r), err)
			}
			// the chain: save the restored one, restore it again
			var b2 bytes.Buffer
			if _, err := r.WriteTo(&b2); err != nil {
				t.Fatal(err)
			}
			r2, r2clk := a67Lim(t, c.r, c.b, limit.WithSize(2, 1024))
			r2clk.Set(at)
			if _, err := r2.ReadFrom(&b2); err != nil {
				t.Fatal(err)
			}
			for _, q := range []int64{0, 1, 500, 1000, 1001, 60_000} {
				tm := at + q
				clk.Set(max(tm, clk.Now().UnixMilli()))
				rclk.Set(tm)
				r2clk.Set(tm)
				for _, key := range []string{"k", "j"} {
					d := r.PeekN(r.Now(), key, 1)
					d2 := r2.PeekN(r2.Now(), key, 1)
					if d.RetryAfter != d2.RetryAfter || d.ResetAfter != d2.ResetAfter || d.Allowed != d2.Allowed {
						t.Errorf("%v off %d +%d %s: the chain's second restore reads %+v, the first %+v", float64(c.r), off, q, key, d2, d)
					}
					if tm < clk.Now().UnixMilli() {
						continue
					}
					o := l.PeekN(l.Now(), key, 1)
					// the original's instants map to restored ones by the downtime (none at off 0)
					if off == 0 && (d.Allowed && !o.Allowed || d.RetryAfter < o.RetryAfter || d.ResetAfter < o.ResetAfter || d.NextAfter < o.NextAfter) {
						t.Errorf("%v off 0 +%d %s: restored %+v, earlier than the original %+v", float64(c.r), q, key, d, o)
					}
				}
			}
		}
	}
}
