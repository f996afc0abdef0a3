package limit_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit13ReadFromMaxDebtMismatch: ReadFrom requires the snapshot's
// MaxDebt to match ("the engine, its base units, MaxDebt, the size ...
// must match (an error matching sketch.ErrSnapshotMismatch otherwise)").
// Here everything else matches bit for bit: the count-min, the same
// short-fraction units (10/s: unit 100, drain 1), size, generations and
// an explicit Period; only MaxDebt differs. The error names MaxDebt, and
// the refused limiter is left as built. Mutation audit13 M30 (no MaxDebt
// check) restores it.
func TestAudit13ReadFromMaxDebtMismatch(t *testing.T) {
	mk := func(maxDebt float64) *limit.Limiter {
		clk := sketchtest.NewFakeClock()
		clk.Set(1 << 32)
		l, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(9), limit.WithEngine(limit.CountMin),
			limit.WithSize(2, 256), limit.WithPeriod(time.Hour), limit.WithMaxDebt(maxDebt))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	src := mk(40)
	for range 15 {
		src.Allow("k")
	}
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for _, md := range []float64{30, 20, 41} {
		dst := mk(md)
		_, err := dst.ReadFrom(bytes.NewReader(buf.Bytes()))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("MaxDebt %v restoring a MaxDebt-40 snapshot: err %v, want ErrSnapshotMismatch", md, err)
		}
		if got := dst.Tokens("k"); got != 20 {
			t.Fatalf("MaxDebt %v: refused restore left k with %v tokens, want 20 (as built)", md, got)
		}
	}
	same := mk(40)
	if _, err := same.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("same configuration: %v", err)
	}
	if got := same.Tokens("k"); got != 5 {
		t.Fatalf("restored k has %v tokens, want 5", got)
	}
}
