package capacity_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lfgrudge/grudge/bench/capacity"
)

// TestMeasure runs the protocol at small sizes: the bucket engine on
// the count-min's memory holds 20k keys with almost no fresh denials,
// where the count-min already denies some; each reading agrees with its
// model; and the plots are written.
func TestMeasure(t *testing.T) {
	var rows []capacity.Row
	cm, err := capacity.Measure(capacity.CountMin("cm", 4, 5000), 20_000, 20_000, 2_000, 1)
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
