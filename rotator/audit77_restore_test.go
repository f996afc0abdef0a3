package rotator_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a77Picky is a HasherFactory that returns nil for the seeds of the
// generations numbered 2.. under base (the first two, built by New, get
// XXH3): "a HasherFactory that returns nil for some seeds only".
func a77Picky(base uint64) sketch.HasherFactory {
	refuse := map[uint64]bool{}
	for g := uint64(2); g < 64; g++ {
		refuse[core.GenerationSeed(base, g)] = true
	}
	x := sketch.XXH3()
	return func(seed uint64) sketch.Hasher {
		if refuse[seed] {
			return nil
		}
		return x(seed)
	}
}

// TestAudit77FixedRestorePanicsOnNilHasher: ReadFrom / UnmarshalBinary
// rebuild the snapshot's generations with buildSeeded, which panics on a
// nil Hasher, though Init now builds with buildErr and ReadFrom's doc
// promises an error ("On any error the rotator is left unchanged").
// migrating.md (Stop 48) confines the remaining panic to "the promotion
// that meets one".
func TestAudit77FixedRestorePanicsOnNilHasher(t *testing.T) {
	const base = 42
	clkA := sketchtest.NewFakeClock()
	a, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Seed: base, Clock: clkA},
		Generations: 2, Period: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	a.UpdateString("k", 1)
	clkA.Advance(25 * time.Millisecond) // two promotions: generations 2, 3 built
	a.UpdateString("k", 1)
	snap, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}

	clkB := sketchtest.NewFakeClock()
	b, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Seed: base, Clock: clkB, Hasher: a77Picky(base)},
		Generations: 2, Period: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New with a factory refusing only later seeds: %v", err)
	}
	for _, how := range []string{"UnmarshalBinary", "ReadFrom"} {
		var rerr error
		panicked := func() (p any) {
			defer func() { p = recover() }()
			if how == "ReadFrom" {
				_, rerr = b.ReadFrom(bytes.NewReader(snap))
			} else {
				rerr = b.UnmarshalBinary(snap)
			}
			return nil
		}()
		if panicked != nil {
			t.Errorf("%s of a snapshot whose generations' seeds the HasherFactory refuses: expected an error (a *sketch.ConfigError naming Hasher, as New now returns for the same factory; rotator.UnmarshalBinary/ReadFrom: \"A refused snapshot leaves r unchanged\"; migrating.md stop 48 confines the remaining panic to \"the promotion that meets one\"), got a panic: %v", how, panicked)
			continue
		}
		var ce *sketch.ConfigError
		if rerr == nil || !errors.As(rerr, &ce) {
			t.Errorf("%s: expected a *sketch.ConfigError, got %v", how, rerr)
		}
	}
}
