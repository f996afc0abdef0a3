package limit_test

// Audit 113 (snapshots): regression, passes. Reservation.Cancel of a
// reservation taken on a running limiter before a SUCCESSFUL restore
// into it gives nothing back (audit 88 covered only failed restores).
// Contract: Reservation.Cancel ("nor, on either engine, a reservation
// taken before the limiter was restored"). Observed: holds on both
// engines (restored 2 tokens, 2 after both Cancels).

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func TestAudit113SnapCancelAfterSuccessfulRestore(t *testing.T) {
	for name, opts := range map[string][]limit.Option{
		"buckets":  {limit.WithEngine(limit.Buckets), limit.WithCapacity(64, 0.01)},
		"countmin": {limit.WithEngine(limit.CountMin), limit.WithSize(2, 256)},
	} {
		clk := limittest.NewFakeClock()
		clk.Set(1_790_000_000_000)
		mk := func(seed uint64) *limit.Limiter {
			l, err := limit.New(10, 8, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(seed)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		src := mk(5)
		src.AllowN(clk.Now(), "k", 6)
		var buf bytes.Buffer
		if _, err := src.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		dst := mk(6)
		r := dst.ReserveN(clk.Now(), "k", 3)
		r2 := dst.ReserveN(clk.Now(), "k", 5)
		if _, err := dst.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		before := dst.Tokens("k")
		r.Cancel()
		r2.Cancel()
		after := dst.Tokens("k")
		if before != src.Tokens("k") {
			t.Errorf("%s: restored %v tokens, the source has %v", name, before, src.Tokens("k"))
		}
		if after != before {
			t.Errorf("%s: cancel of pre-restore reservation changed tokens %v -> %v", name, before, after)
		}
		clk.Advance(time.Millisecond)
	}
}
