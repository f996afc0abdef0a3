package matrix

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func TestUniverseKeys(t *testing.T) {
	u := NewUniverse(1<<20, 7)
	seen := map[string]bool{}
	for i := range uint32(1 << 16) {
		k := u.Key(i * 16)
		if len(k) != KeyLen {
			t.Fatalf("key %d has length %d", i, len(k))
		}
		if seen[string(k)] {
			t.Fatalf("key %d repeats an earlier key", i*16)
		}
		seen[string(k)] = true
	}
	a, b := make([]byte, KeyLen), make([]byte, KeyLen)
	u.Put(a, 123)
	NewUniverse(1<<20, 7).Put(b, 123)
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed and index gave different keys")
	}
	NewUniverse(1<<20, 8).Put(b, 123)
	if bytes.Equal(a, b) {
		t.Fatal("different seeds gave the same key")
	}
}

func counts(s []uint32) map[uint32]int {
	c := map[uint32]int{}
	for _, v := range s {
		c[v]++
	}
	return c
}

func TestStreamUniform(t *testing.T) {
	const n, length = 1000, 1 << 18
	s, err := Stream(DistUniform, n, length, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 10 buckets of 100 keys: each should get 10% within 2% absolute.
	var b [10]int
	for _, v := range s {
		if v >= n {
			t.Fatalf("index %d out of [0, %d)", v, n)
		}
		b[v/100]++
	}
	for i, c := range b {
		if f := float64(c) / length; math.Abs(f-0.1) > 0.02 {
			t.Errorf("bucket %d has %.3f of the draws; want 0.1", i, f)
		}
	}
	s2, _ := Stream(DistUniform, n, length, 1, 0)
	s3, _ := Stream(DistUniform, n, length, 1, 1)
	if !slices.Equal(s, s2) {
		t.Error("same worker, same seed: different streams")
	}
	if slices.Equal(s, s3) {
		t.Error("two workers got the same stream")
	}
}

func TestStreamZipfSkew(t *testing.T) {
	const n, length = 1 << 20, 1 << 20
	s, err := Stream(DistZipf, n, length, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// P(rank k) = (1+k)^-s / H, H = sum over the n ranks.
	var h float64
	for k := range n {
		h += math.Pow(float64(1+k), -ZipfS)
	}
	c := counts(s)
	for k := range 4 {
		want := math.Pow(float64(1+k), -ZipfS) / h
		got := float64(c[uint32(k)]) / length
		if math.Abs(got-want)/want > 0.05 {
			t.Errorf("rank %d drawn %.4f of the time; want %.4f (zipf s=%g)", k, got, want, ZipfS)
		}
	}
	// The skew that matters for contention: the 8 hottest ranks take
	// about a third of the draws, while uniform would give them 8/2^20.
	top := 0
	for k := range uint32(8) {
		top += c[k]
	}
	if f := float64(top) / length; f < 0.25 || f > 0.45 {
		t.Errorf("top 8 ranks drawn %.3f of the time; want about 0.33", f)
	}
	for _, v := range s {
		if v >= n {
			t.Fatalf("index %d out of [0, %d)", v, n)
		}
	}
}

func TestStreamHot(t *testing.T) {
	s, err := Stream(DistHot8, 1<<20, 1<<16, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := counts(s)
	if len(c) != 8 {
		t.Fatalf("hot8 drew %d distinct keys; want 8", len(c))
	}
	for k, n := range c {
		if k >= 8 || math.Abs(float64(n)/(1<<16)-0.125) > 0.01 {
			t.Errorf("hot8: key %d drawn %d times of 65536", k, n)
		}
	}
	s, _ = Stream(DistHot1, 1<<20, 1<<10, 1, 0)
	if c := counts(s); len(c) != 1 || c[0] != 1<<10 {
		t.Fatalf("hot1 drew %v; want key 0 only", c)
	}
	if _, err := Stream("pareto", 10, 8, 1, 0); err == nil {
		t.Fatal("unknown distribution: no error")
	}
	if distSize(DistHot8, 1<<20) != 8 || distSize(DistHot1, 1<<20) != 1 || distSize(DistZipf, 100) != 100 {
		t.Fatal("distSize")
	}
}
