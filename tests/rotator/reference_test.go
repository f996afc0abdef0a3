package rotator_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestMatchesReference: random sequences of operations and rotations go to
// the rotator and to ref.Rotator (grudge's design) and must agree.
// Both derive generation seeds the same way, so each generation maps keys
// to the same cells on both sides; integer deltas without decay keep both
// exact, so results must be equal, not just close. The reference's ticker
// never fires (Period is an hour of real time); it rotates when the test
// calls Rotate, at the moments the fake clock crosses a deadline.
func TestMatchesReference(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := sketchtest.NewFakeClock()
		n := rapid.Uint32Range(2, 6).Draw(rt, "gens") // above 4: the slices hashed and TryUpdate allocate
		sc := sketch.Config{
			Levels:        rapid.Uint32Range(1, 4).Draw(rt, "levels"),
			CellsPerLevel: rapid.Uint32Range(1, 16).Draw(rt, "m"),
			Lo:            -50,
			Hi:            50,
			Seed:          rapid.Uint64().Draw(rt, "seed"),
			Clock:         clk,
		}
		const p = time.Hour
		prefetch := rapid.Bool().Draw(rt, "prefetch") // must change no result
		r, err := rotator.New(rotator.Config{Sketch: sc, Generations: n, Period: p, Prefetch: prefetch})
		if err != nil {
			rt.Fatal(err)
		}
		ref, err := ref.NewRotator(ref.RotatorConfig{Sketch: sc, Generations: n, Period: p})
		if err != nil {
			rt.Fatal(err)
		}
		defer ref.Close()
		keys := []string{"a", "b", "c", "d", "e", "f"}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			k := rapid.SampledFrom(keys).Draw(rt, "key")
			d := float64(rapid.IntRange(-5, 5).Draw(rt, "delta"))
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
			case 0:
				r.UpdateString(k, d)
				ref.UpdateString(k, d)
			case 1:
				if got, want := r.UpdateAndQueryString(k, d), ref.UpdateAndQueryString(k, d); got != want {
					rt.Fatalf("UpdateAndQuery(%q, %v) = %v; reference %v", k, d, got, want)
				}
			case 2:
				lim := float64(rapid.IntRange(-10, 20).Draw(rt, "limit"))
				if got, want := r.TryUpdate([]byte(k), d, lim), ref.TryUpdate([]byte(k), d, lim); got != want {
					rt.Fatalf("TryUpdate(%q, %v, %v) = %v; reference %v", k, d, lim, got, want)
				}
			case 3:
				jump := rapid.IntRange(1, 3).Draw(rt, "periods")
				clk.Advance(time.Duration(jump) * p)
				r.QueryString(k) // rotate now, not merged with a later jump
				// A jump of >= n periods retires every generation: the
				// rotator builds n fresh ones, as n reference rotations do.
				for range min(jump, int(n)) {
					ref.Rotate()
				}
			default:
				if got, want := r.QueryString(k), ref.QueryString(k); got != want {
					rt.Fatalf("Query(%q) = %v; reference %v", k, got, want)
				}
			}
		}
		for _, k := range keys {
			got, want := r.QueryDetailed([]byte(k)), ref.QueryDetailed([]byte(k))
			if got.Score != want.Score || len(got.Levels) != len(want.Levels) {
				rt.Fatalf("QueryDetailed(%q) = %+v; reference %+v", k, got, want)
			}
			for l := range got.Levels {
				if got.Levels[l] != want.Levels[l] {
					rt.Fatalf("QueryDetailed(%q) level %d = %+v; reference %+v", k, l, got.Levels[l], want.Levels[l])
				}
			}
		}
	})
}
