package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestSuggestFormula: Suggest picks the smallest sketch the Bloom formula
// (with double hashing's pairs) allows (one cell fewer per level would exceed the rate), splits the
// keys over the shards, reports the server memory, and refuses bad
// arguments.
func TestSuggestFormula(t *testing.T) {
	for _, c := range []struct {
		keys   int
		deny   float64
		shards uint32
	}{{10_000, 0.01, 0}, {1_000_000, 0.01, 1}, {1_000_000, 0.001, 3}, {100, 0.5, 1}} {
		s, err := Suggest(c.keys, c.deny, c.shards)
		if err != nil {
			t.Fatal(err)
		}
		per := float64((c.keys + int(s.Shards) - 1) / int(s.Shards))
		rate := func(m uint32) float64 {
			r := math.Pow(-math.Expm1(-per/float64(m)), float64(s.Levels))
			if s.Levels >= 2 { // plus double hashing's pairs (docs/capacity.md, "Sizing")
				r += per / (float64(m) * float64(m) * float64(s.Levels-1))
			}
			return min(r, 1)
		}
		if rate(s.CellsPerLevel) > c.deny || rate(s.CellsPerLevel-1) <= c.deny || math.Abs(s.Deny-rate(s.CellsPerLevel)) > 1e-12 {
			t.Errorf("Suggest(%d, %v, %d) = %+v: rate %v, with one cell fewer %v", c.keys, c.deny, c.shards, s, rate(s.CellsPerLevel), rate(s.CellsPerLevel-1))
		}
		if want := int64(s.Shards) * (40 + int64(s.Levels)*int64(s.CellsPerLevel)*8); s.MemoryBytes != want {
			t.Errorf("MemoryBytes %d, want %d", s.MemoryBytes, want)
		}
	}
	for _, c := range []struct {
		keys int
		deny float64
	}{{0, 0.01}, {10, 0}, {10, 1}, {10, math.NaN()}} {
		if _, err := Suggest(c.keys, c.deny, 1); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Suggest(%d, %v): %v", c.keys, c.deny, err)
		}
	}
}

// TestSuggestMeasured: a Limiter sized by Suggest for 20,000 keys at 1%,
// then 20,000 keys taking their whole burst at one instant: fresh keys
// are denied at about the predicted rate (within the sampling noise of
// 20,000 probes), and the keys got their burst as predicted.
func TestSuggestMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("60,000 round trips")
	}
	const keys, burst = 20_000, 10
	s, err := Suggest(keys, 0.01, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "rueidis", "standalone")
	clk := sketchtest.NewFakeClock()
	clk.Set(1)
	l := e.limiter(t, LimiterConfig{Name: "size", Limit: PerSecond(1, burst), Levels: s.Levels, CellsPerLevel: s.CellsPerLevel, Clock: clk})
	ctx := context.Background()
	got := 0
	for i := range keys {
		d, err := l.AllowN(ctx, fmt.Sprint("held-", i), burst)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	denied := 0
	const fresh = 20_000
	for i := range fresh {
		d, err := l.AllowN(ctx, fmt.Sprint("fresh-", i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			denied++
		}
	}
	rate, gotShare := float64(denied)/fresh, float64(got)/keys
	t.Logf("%d x %d cells (%d B): fresh denied %.3f%% (predicted %.3f%%), got their burst %.3f%% (predicted %.3f%%)",
		s.Levels, s.CellsPerLevel, s.MemoryBytes, 100*rate, 100*s.Deny, 100*gotShare, 100*s.Got)
	// The fresh keys that were admitted add their own debt of 1, which
	// denies nobody at burst 10: the probes see the held keys' state.
	if sd := math.Sqrt(s.Deny * (1 - s.Deny) / fresh); math.Abs(rate-s.Deny) > 4*sd+0.002 {
		t.Fatalf("fresh keys denied %.4f, predicted %.4f", rate, s.Deny)
	}
	if math.Abs(gotShare-s.Got) > 0.005 {
		t.Fatalf("got their burst %.4f, predicted %.4f", gotShare, s.Got)
	}
}
