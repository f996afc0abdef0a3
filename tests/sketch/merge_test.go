package sketch_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/law"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// TestMergeRapid: a stream split at random between two replicas (one
// shared fake clock), merged, against one sketch fed the whole stream
// (the union): equal for None (integer deltas: exact in float32), within
// float32 rounding for Exponential; for Linear, Merge is at or above both
// inputs and at or below the union, and MergeWithin(elapsed) at or above
// the union (non-negative deltas), up to the union's own float32
// rounding.
func TestMergeRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		lw := rapid.SampledFrom([]decay.Decay{decay.None(), decay.Exponential(0.2), decay.Linear(3)}).Draw(rt, "law")
		kind, _ := law.Params(lw)
		clock := sketchtest.NewFakeClock()
		clock.Set(rapid.Int64Range(0, 1<<40).Draw(rt, "t0"))
		start := clock.NowMillis()
		cfg := sketch.Config{
			Levels:        uint32(rapid.IntRange(1, 6).Draw(rt, "L")),
			CellsPerLevel: uint32(rapid.IntRange(1, 30).Draw(rt, "M")),
			Hi:            1e9, Decay: lw,
			Aggregator: sketch.Aggregator(rapid.IntRange(0, 2).Draw(rt, "agg")),
			Clock:      clock,
		}
		a, b, u := mustNewSketch(rt, cfg), mustNewSketch(rt, cfg), mustNewSketch(rt, cfg)
		keys := snapKeys(12)
		for range rapid.IntRange(0, 80).Draw(rt, "ops") {
			k := keys[rapid.IntRange(0, len(keys)-1).Draw(rt, "k")]
			d := float64(rapid.IntRange(0, 100).Draw(rt, "d"))
			if rapid.Bool().Draw(rt, "toA") {
				a.Update(k, d)
			} else {
				b.Update(k, d)
			}
			u.Update(k, d)
			clock.Advance(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "dt")) * time.Millisecond)
		}
		qa, qb := make([]float64, len(keys)), make([]float64, len(keys))
		for i, k := range keys {
			qa[i], qb[i] = a.Query(k), b.Query(k)
		}
		m := mustNewSketch(rt, cfg)
		if err := m.Merge(a, 0); err != nil {
			rt.Fatal(err)
		}
		if err := m.Merge(b, 0); err != nil {
			rt.Fatal(err)
		}
		w := mustNewSketch(rt, cfg)
		_ = w.Merge(a, 0)
		if err := w.Merge(b, time.Duration(clock.NowMillis()-start)*time.Millisecond); err != nil {
			rt.Fatal(err)
		}
		for i, k := range keys {
			got, want := m.Query(k), u.Query(k)
			switch kind {
			case law.KindNone:
				if got != want {
					rt.Fatalf("none: key %s merged %v, union %v", k, got, want)
				}
			case law.KindExponential:
				if math.Abs(got-want) > 1e-5*math.Max(1, want) || got < want*(1-1e-6) {
					rt.Fatalf("exponential: key %s merged %v, union %v", k, got, want)
				}
			case law.KindLinear:
				if got < qa[i] || got < qb[i] {
					rt.Fatalf("linear: key %s merged %v below an input (%v, %v)", k, got, qa[i], qb[i])
				}
				if got > want+1e-4*math.Max(1, want) {
					rt.Fatalf("linear: key %s merged %v above the union %v", k, got, want)
				}
				// The union rounds up on each of its updates, at most one
				// float32 ulp each: the tolerance.
				if wg := w.Query(k); wg < want-1e-5*math.Max(1, want) {
					rt.Fatalf("linear: key %s MergeWithin %v below the union %v", k, wg, want)
				}
			}
		}
	})
}

// TestMergeLinearUnderestimates shows why Merge alone is not the union's
// safe side under Linear: two replicas each filling at 3/4 of the drain
// rate stay near empty, while one sketch fed both fills up.
func TestMergeLinearUnderestimates(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 1, Hi: 1e9, Decay: decay.Linear(1), Clock: clock}
	a, b, u := mustNewSketch(t, cfg), mustNewSketch(t, cfg), mustNewSketch(t, cfg)
	k := []byte("k")
	for i := range 100 {
		r := a
		if i%2 == 1 {
			r = b
		}
		r.Update(k, 1.5) // each replica: 1.5 every 2 s, drained at 1/s
		u.Update(k, 1.5)
		clock.Advance(time.Second)
	}
	m := mustNewSketch(t, cfg)
	_ = m.Merge(a, 0)
	_ = m.Merge(b, 0)
	w := mustNewSketch(t, cfg)
	_ = w.Merge(a, 0)
	_ = w.Merge(b, 100*time.Second)
	t.Logf("a=%v b=%v merged=%v union=%v mergeWithin=%v", a.Query(k), b.Query(k), m.Query(k), u.Query(k), w.Query(k))
	if !(m.Query(k) < u.Query(k)/10) || w.Query(k) < u.Query(k) {
		t.Fatalf("merged %v, union %v, MergeWithin %v", m.Query(k), u.Query(k), w.Query(k))
	}
}

// TestMergeClocks: replicas on their own clocks merge at one instant: a
// replica whose clock is behind has its cells decayed the gap, one ahead
// is read at the earlier instant of its scale.
func TestMergeClocks(t *testing.T) {
	cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	cs.Set(10_000)
	co.Set(4_000)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: decay.Linear(1), Clock: cs}
	s := mustNewSketch(t, cfg)
	cfg.Clock = co
	o := mustNewSketch(t, cfg)
	o.Update([]byte("k"), 100) // at wall 4 s; the merge is at wall 10 s
	if err := s.Merge(o, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.Query([]byte("k")); got != 94 {
		t.Fatalf("other behind by 6 s: got %v, want 94", got)
	}
	co.Set(20_000) // other ahead: read at wall 10 s of its scale, 6 s after its write, not 16
	s2 := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: decay.Linear(1), Clock: cs})
	if err := s2.Merge(o, 0); err != nil {
		t.Fatal(err)
	}
	if got := s2.Query([]byte("k")); got != 94 {
		t.Fatalf("other ahead by 10 s: got %v, want 94", got)
	}
}

// TestMergeRefuses: sketches of another shape, lw, bounds, aggregator or
// hash are refused with ErrSnapshotMismatch naming the field, as is a
// sketch merged into itself.
func TestMergeRefuses(t *testing.T) {
	base := sketch.Config{Levels: 3, CellsPerLevel: 32, Hi: 100, Decay: decay.Exponential(1)}
	s := mustNewSketch(t, base)
	for _, tc := range []struct {
		field string
		f     func(*sketch.Config)
	}{
		{"Levels", func(c *sketch.Config) { c.Levels = 2 }},
		{"CellsPerLevel", func(c *sketch.Config) { c.CellsPerLevel = 31 }},
		{"Decay", func(c *sketch.Config) { c.Decay = decay.None() }},
		{"Decay parameter", func(c *sketch.Config) { c.Decay = decay.Exponential(3) }},
		{"Hi", func(c *sketch.Config) { c.Hi = 1000 }},
		{"Aggregator", func(c *sketch.Config) { c.Aggregator = sketch.Mean }},
		{"Hasher", func(c *sketch.Config) { c.Hasher = sketch.SipHash() }},
		{"Seed", func(c *sketch.Config) { c.Seed = 1 }},
	} {
		c := base
		tc.f(&c)
		err := s.Merge(mustNewSketch(t, c), 0)
		var se *core.SnapshotError
		if !errors.As(err, &se) || !errors.Is(err, sketch.ErrSnapshotMismatch) || se.Field != tc.field {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	if err := s.Merge(s, 0); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Errorf("self merge: %v", err)
	}
}

// TestMergeConcurrent: Merge into a sketch that other goroutines update
// loses nothing: each cell merges in one CAS, so with no decay the result
// is the other sketch's value plus every concurrent update, exactly.
func TestMergeConcurrent(t *testing.T) {
	cfg := sketch.Config{Levels: 4, CellsPerLevel: 1 << 10, Hi: 1e9}
	keys := snapKeys(16)
	o := mustNewSketch(t, cfg)
	for _, k := range keys {
		o.Update(k, 1000)
	}
	s := mustNewSketch(t, cfg)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			for _, k := range keys {
				s.Update(k, 1)
			}
		}
	}()
	for range 5 {
		if err := s.Merge(o, 0); err != nil {
			t.Fatal(err)
		}
		// Reads of o while it is updated are fine too.
		o.Update(keys[0], 0)
	}
	<-done
	for _, k := range keys {
		if got := s.Query(k); got != 5*1000+n {
			t.Fatalf("key %s: %v, want %d", k, got, 5*1000+n)
		}
	}
}

// TestMergeOverlapOptional: Merge(other), the spelling of the snapshot
// contract, is Merge(other, 0) on every law; a second overlap panics.
func TestMergeOverlapOptional(t *testing.T) {
	for _, lw := range []decay.Decay{decay.None(), decay.Exponential(0.2), decay.Linear(3)} {
		clock := sketchtest.NewFakeClock()
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 16, Hi: 1e9, Decay: lw, Clock: clock}
		src := mustNewSketch(t, cfg)
		keys := snapKeys(8)
		for i, k := range keys {
			src.Update(k, float64(10*i+1))
		}
		clock.Advance(700 * time.Millisecond)
		short, long := mustNewSketch(t, cfg), mustNewSketch(t, cfg)
		if err := short.Merge(src); err != nil {
			t.Fatal(err)
		}
		if err := long.Merge(src, 0); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if a, b := short.Query(k), long.Query(k); a != b {
				t.Fatalf("%v: Merge(src) reads %v, Merge(src, 0) %v", lw, a, b)
			}
		}
	}
	s := mustNewSketch(t, sketch.Config{CellsPerLevel: 16, Hi: 1})
	o := mustNewSketch(t, sketch.Config{CellsPerLevel: 16, Hi: 1})
	defer func() {
		if r, _ := recover().(string); !strings.HasPrefix(r, "sketch:") {
			t.Fatalf("Merge with two overlaps: recovered %q, want a panic starting sketch:", r)
		}
	}()
	_ = s.Merge(o, time.Second, time.Second)
}
