package capacity_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lfgrudge/grudge/bench/capacity"
	"github.com/lfgrudge/grudge/limit"
)

// TestMeasure runs the protocol at small sizes: the bucket engine on
// the count-min's memory holds 20k keys with almost no fresh denials,
// where the count-min already denies some; each reading agrees with its
// model; and the plots are written.
func TestMeasure(t *testing.T) {
	var rows []capacity.Row
	cm, err := capacity.Measure(capacity.CountMin("cm", 4, 5000, false), 20_000, 20_000, 2_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := capacity.Measure(capacity.Bucket("bucket", cm.Bytes), 20_000, 20_000, 2_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, cm, b)
	t.Logf("%+v\n%+v", cm, b)
	if b.Bytes > cm.Bytes || b.Got < 0.999 || b.PeekDenied > 0.001 || cm.PeekDenied < 0.05 {
		t.Fatalf("count-min %+v, bucket %+v", cm, b)
	}
	if d := cm.PeekDenied - cm.PredictDenied; d > 0.05 || d < -0.05 {
		t.Fatalf("count-min: measured %v, model %v", cm.PeekDenied, cm.PredictDenied)
	}
	if d := b.PeekDenied - b.Saturation; d > 0.001 || d < -0.001 {
		t.Fatalf("bucket: measured %v, Saturation %v", b.PeekDenied, b.Saturation)
	}
	if d := cm.PeekDenied - cm.Saturation; d > 0.2*cm.PeekDenied || d < -0.2*cm.PeekDenied {
		t.Fatalf("count-min: measured %v, Stats saturation %v", cm.PeekDenied, cm.Saturation)
	}
	dir := t.TempDir()
	den, got := filepath.Join(dir, "d.png"), filepath.Join(dir, "g.png")
	if err := capacity.Plot(rows, den, got); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{den, got} {
		if st, err := os.Stat(p); err != nil || st.Size() < 1000 {
			t.Fatalf("plot %s: %v", p, err)
		}
	}
}

// TestMeasureMix: on debts spread over 1..20, conservative update denies
// fewer fresh keys than the plain count-min of the same memory, and
// limit's default (Buckets) fewer still; every key of a mix fits when
// the limiter has room.
func TestMeasureMix(t *testing.T) {
	const keys, peek = 20_000, 20_000
	plain, err := capacity.MeasureMix(capacity.CountMin("cm", 4, 5000, false), capacity.Uniform, keys, peek, 1)
	if err != nil {
		t.Fatal(err)
	}
	cu, err := capacity.MeasureMix(capacity.CountMin("cm+cu", 4, 5000, true), capacity.Uniform, keys, peek, 1)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := capacity.MeasureMix(capacity.Limit("limit", limit.WithCapacity(keys, 0.01)), capacity.Uniform, keys, peek, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plain %+v\ncu %+v\nlimit %+v", plain, cu, lim)
	if !(cu.PeekDenied < plain.PeekDenied) || lim.PeekDenied > 0.01 || lim.Got < 0.99 {
		t.Fatalf("plain %+v, conservative %+v, limit %+v", plain, cu, lim)
	}
}
