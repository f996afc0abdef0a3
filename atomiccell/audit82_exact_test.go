package atomiccell_test

import (
	"math"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/atomiccell"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit82PrecisionExamples: docs/precision.md "The rounding rule"
// examples, through atomiccell.Rules.Next.
func TestAudit82PrecisionExamples(t *testing.T) {
	r := atomiccell.NewRules(decay.None(), -math.MaxFloat32, math.MaxFloat32)
	cases := []struct {
		score float32
		delta float64
		want  float32
	}{
		{0, 0.1, 0.10000000149011612},
		{0, -0.1, -0.09999999403953552},
		{1e6, 1e-5, 1000000.0625},
		{1 << 24, 1, 16777218},
		{0x1p60, 1, 0x1p60 + 0x1p37},
	}
	for _, c := range cases {
		if got := r.Next(atomiccell.Pack(c.score, 5), 5, c.delta).Score(); got != c.want {
			t.Errorf("%v + %v: stored %v, want %v (docs/precision.md)", c.score, c.delta, got, c.want)
		}
	}
	w := atomiccell.Pack(0x1p100, 5)
	for range 1000 {
		w = r.Next(w, 5, 1e14)
	}
	if want := float32(0x1p100) + 1000*float32(0x1p77); w.Score() != want {
		t.Errorf("1000 adds of 1e14 to 2^100: %v, want 2^100 + 1000 x 2^77 = %v (docs/precision.md)", w.Score(), want)
	}
}

// TestAudit82ConcurrentTinyAddsEachStep: goroutines racing Cell.Add of
// a delta the float64 add absorbs (1 onto 2^60): every add steps the
// cell exactly one float32 (2^37), so the final score is 2^60 + adds x
// 2^37 (none lost, none doubled), at GOMAXPROCS 1, 2, 4, 8.
func TestAudit82ConcurrentTinyAddsEachStep(t *testing.T) {
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		r := atomiccell.NewRules(decay.None(), 0, math.MaxFloat32)
		var c atomiccell.Cell
		c.Store(atomiccell.Pack(0x1p60, 1))
		const G, N = 8, 2000
		var wg sync.WaitGroup
		for range G {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range N {
					c.Add(r, 1, 1, c.Load())
				}
			}()
		}
		wg.Wait()
		if got, want := c.Load().Score(), float32(0x1p60+G*N*0x1p37); got != want {
			t.Errorf("2^60 + %d racing adds of 1: %v, want %v (each add the least float32 above the exact sum)", G*N, got, want)
		}
		// at Hi: an add changes nothing and returns the same word
		h := atomiccell.NewRules(decay.None(), 0, 0x1p60)
		var d atomiccell.Cell
		d.Store(atomiccell.Pack(0x1p60, 1))
		if got := d.Add(h, 1, 1e-300, d.Load()); got != atomiccell.Pack(0x1p60, 1) {
			t.Errorf("at Hi, Add(1e-300) returned %v, want the same word", got.Score())
		}
		// at Lo (negative): a negative delta changes nothing
		l := atomiccell.NewRules(decay.None(), -0x1p60, 1)
		d.Store(atomiccell.Pack(-0x1p60, 1))
		if got := d.Add(l, 1, -1e-300, d.Load()); got != atomiccell.Pack(-0x1p60, 1) {
			t.Errorf("at Lo, Add(-1e-300) returned %v, want the same word", got.Score())
		}
		// just above Lo: a negative delta with an inexact add lands on Lo, not below
		d.Store(atomiccell.Pack(-0x1p60+0x1p36, 1))
		if got := d.Add(l, 1, -0x1p36-1, d.Load()).Score(); got != -0x1p60 {
			t.Errorf("Lo -2^60: -2^60+2^36 - (2^36+1): %v, want Lo", got)
		}
	})
}
