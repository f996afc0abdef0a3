package grudge_test

import (
	"errors"
	"math"
	"testing"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch"
)

// TestNoneBothSpellings: None works as grudge declares it, a Decay value
// (Decay: grudge.None), and as the call API.md writes (grudge.None()),
// and both are the built-in identity law: the same scores, the same
// validation (Hi = +Inf needs a law that drains), no allocations.
func TestNoneBothSpellings(t *testing.T) {
	if got := grudge.None.Apply(7.5, 1<<40); got != 7.5 {
		t.Fatalf("None.Apply(7.5, 2^40 ms) = %v, want 7.5", got)
	}
	if got := grudge.None().Apply(7.5, 1<<40); got != 7.5 {
		t.Fatalf("None().Apply(7.5, 2^40 ms) = %v, want 7.5", got)
	}
	for _, tt := range []struct {
		name string
		d    grudge.Decay
	}{{"value", grudge.None}, {"call", grudge.None()}, {"nil", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			clk := grudgetest.NewFakeClock()
			s, err := grudge.New(grudge.Config{Levels: 4, CellsPerLevel: 1024, Decay: tt.d, Lo: 0, Hi: 100, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			k := []byte("k")
			s.Update(k, 3.25)
			clk.Advance(1 << 40)
			if got := s.Query(k); got != 3.25 {
				t.Fatalf("Query after 2^40 ms = %v, want 3.25 (no decay)", got)
			}
			if a := testing.AllocsPerRun(100, func() { s.Update(k, 1); _ = s.Query(k) }); a != 0 {
				t.Fatalf("%v allocs per Update+Query, want 0", a)
			}
			_, err = grudge.New(grudge.Config{Decay: tt.d, Lo: 0, Hi: math.Inf(1)})
			var ce *sketch.ConfigError
			if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Hi" {
				t.Fatalf("Hi=+Inf with None: err = %v, want a ConfigError naming Hi", err)
			}
		})
	}
}
