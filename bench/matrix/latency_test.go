package matrix

import (
	"math"
	"testing"
)

func TestPercentilesNearestRank(t *testing.T) {
	vals := make([]float64, 1000)
	for i := range vals {
		vals[len(vals)-1-i] = float64(i + 1) // 1..1000, unsorted
	}
	got := PercentilesOf(vals, 0.5, 0.99, 0.999, 1)
	want := []float64{500, 990, 999, 1000}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("percentile %d of 1..1000 = %v; want %v", i, got[i], want[i])
		}
	}
	if p := PercentilesOf([]float64{7}, 0.5, 0.999); p[0] != 7 || p[1] != 7 {
		t.Errorf("one value: %v", p)
	}
	if p := PercentilesOf(nil, 0.5); !math.IsNaN(p[0]) {
		t.Errorf("no values: %v; want NaN", p)
	}
	// 1 2 3 4: p50 is the 2nd value, p75 the 3rd, p76 the 4th.
	if p := PercentilesOf([]float64{4, 3, 2, 1}, 0.5, 0.75, 0.76); p[0] != 2 || p[1] != 3 || p[2] != 4 {
		t.Errorf("1..4: %v", p)
	}
}

func TestPercentilesWeighted(t *testing.T) {
	// 10 samples of 1 standing for 90 ops, 10 samples of 100 standing for
	// 10: p50 and p89 are 1, p91 is 100.
	var s []weighted
	for range 10 {
		s = append(s, weighted{1, 9}, weighted{100, 1})
	}
	p := percentiles(s, 0.5, 0.89, 0.91)
	if p[0] != 1 || p[1] != 1 || p[2] != 100 {
		t.Fatalf("weighted: %v; want [1 1 100]", p)
	}
}

func TestReservoir(t *testing.T) {
	var r reservoir
	r.init(1000, 42)
	for i := range 100 {
		r.add(int64(i))
	}
	if len(r.vals) != 100 || r.seen != 100 {
		t.Fatalf("under capacity: %d kept, %d seen", len(r.vals), r.seen)
	}
	// Past capacity the sample stays uniform: the mean of the kept values
	// is the mean of 0..n-1 within a few percent.
	const n = 200_000
	r.init(1000, 42)
	for i := range n {
		r.add(int64(i))
	}
	if len(r.vals) != 1000 || r.seen != n {
		t.Fatalf("over capacity: %d kept, %d seen", len(r.vals), r.seen)
	}
	var sum float64
	for _, v := range r.vals {
		sum += float64(v)
	}
	if mean := sum / 1000; math.Abs(mean-n/2)/(n/2) > 0.06 {
		t.Fatalf("reservoir mean %v; want about %v", mean, n/2)
	}
	if testing.AllocsPerRun(100, func() { r.add(1) }) != 0 {
		t.Fatal("reservoir.add allocates")
	}
}

func TestMergeReservoirs(t *testing.T) {
	// Worker a saw 1000 ops of 10 ticks and kept 10; worker b saw 10 ops
	// of 1000 ticks and kept 10. Merged, b's samples weigh 1/100 of a's.
	var a, b reservoir
	a.init(10, 1)
	b.init(10, 2)
	for range 1000 {
		a.add(10)
	}
	for range 10 {
		b.add(1000)
	}
	s := mergeReservoirs([]*reservoir{&a, &b}, 0.5)
	p := percentiles(s, 0.5, 0.99, 0.995)
	if p[0] != 5 || p[1] != 5 || p[2] != 500 {
		t.Fatalf("merged: %v; want [5 5 500] (ticks x 0.5)", p)
	}
}
