package limit_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
)

// TestAudit66EveryWholeMsOnBuckets: doc.go, "Engines": the Buckets engine
// holds "Every(d) for d a whole number of ms with burst <= 30.7 s / d"
// (default MaxDebt 2 x burst), and Auto "picks Buckets wherever it is
// exact". Swept over d from 1 ms to 30.7 s, at the largest such burst
// and at 1, plus the named limiters New(10, 20), New(1000, 1000),
// New(1, 30) (Buckets) and New(18387, 1), New(8e6, 30000) (count-min).
func TestAudit66EveryWholeMsOnBuckets(t *testing.T) {
	for d := 1; d <= 30700; d += 1 + d/7 {
		for _, b := range []int{1, 30700 / d} {
			if b < 1 {
				continue
			}
			l, err := limit.New(limit.Every(time.Duration(d)*time.Millisecond), b, limit.WithCapacity(10, 0.5))
			if err != nil {
				t.Fatalf("Every(%dms), %d: %v", d, b, err)
			}
			if l.Engine() != limit.Buckets || !l.Exact() {
				t.Errorf("Every(%dms), burst %d: engine %v exact %v, want Buckets", d, b, l.Engine(), l.Exact())
			}
		}
	}
	for _, c := range []struct {
		r    limit.Limit
		b    int
		want limit.Engine
	}{{10, 20, limit.Buckets}, {1000, 1000, limit.Buckets}, {1, 30, limit.Buckets}, {18387, 1, limit.CountMin}, {8e6, 30000, limit.CountMin}, {1, 31, limit.CountMin}} {
		l, err := limit.New(c.r, c.b, limit.WithCapacity(10, 0.5))
		if err != nil {
			t.Fatal(err)
		}
		if l.Engine() != c.want {
			t.Errorf("New(%v, %d): engine %v, want %v", float64(c.r), c.b, l.Engine(), c.want)
		}
	}
}

// TestAudit66CountMinExactBursts: doc.go, "Exactness": the count-min is
// exact "with the default MaxDebt of 2 x burst: bursts up to 2330 at
// 1000/h, 139 at 1/minute, 83886 at 10/s". Each bound is exact and the
// next burst is not.
func TestAudit66CountMinExactBursts(t *testing.T) {
	for _, c := range []struct {
		name string
		r    limit.Limit
		b    int
	}{
		{"1000/h", limit.Every(time.Hour / 1000), 2330},
		{"1000/h-ratio", 1000.0 / 3600, 2330},
		{"1/minute", limit.Every(time.Minute), 139},
		{"10/s", 10, 83886},
	} {
		for _, b := range []int{c.b, c.b + 1} {
			l, err := limit.New(c.r, b, limit.WithEngine(limit.CountMin), limit.WithSize(1, 16))
			if err != nil {
				t.Fatal(err)
			}
			if want := b == c.b; l.Exact() != want {
				t.Errorf("%s burst %d on the count-min: Exact %v, want %v", c.name, b, l.Exact(), want)
			}
		}
	}
}
