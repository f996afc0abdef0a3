package sketch_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditSnapMergeLinearCreditSymmetric: under the Linear law the
// documented merge of two cells is "a + b; max(a, b) if either is
// negative and the sum falls below it", so that Merge "never falls below
// either input". A credit (a < 0) merged with an empty replica cell
// (b = 0) must therefore give max(a, 0) = 0, exactly as merging the same
// two states the other way round does.
func TestAuditSnapMergeLinearCreditSymmetric(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	clock.Set(1_000_000)
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 1, Lo: -100, Hi: 100, Decay: decay.Linear(1), Clock: clock}
	k := []byte("k")

	credit := mustNewSketch(t, cfg)
	credit.Update(k, -3)
	empty := mustNewSketch(t, cfg)

	// empty <- credit: a = 0, b = -3: the code takes max(a, b) = 0.
	if err := empty.Merge(credit, 0); err != nil {
		t.Fatal(err)
	}
	// credit <- empty: a = -3, b = 0: the same pair of states.
	if err := credit.Merge(mustNewSketch(t, cfg), 0); err != nil {
		t.Fatal(err)
	}
	got1, got2 := empty.Query(k), credit.Query(k)
	t.Logf("Merge(empty <- credit) = %v, Merge(credit <- empty) = %v", got1, got2)
	if got1 != got2 {
		t.Errorf("merge of the same two states depends on the direction: %v vs %v", got1, got2)
	}
	// Never below either input: the empty replica's truth is 0.
	if got2 < 0 {
		t.Errorf("merged %v is below the empty input's 0 (documented law: max(a, b) = 0)", got2)
	}
}

// TestAuditSnapMergeLinearDrainedOther: the same with the other
// replica's cell positive but drained to 0 by the merge instant.
func TestAuditSnapMergeLinearDrainedOther(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	clock.Set(1_000_000)
	cfg := sketch.Config{Levels: 1, CellsPerLevel: 1, Lo: -100, Hi: 100, Decay: decay.Linear(1), Clock: clock}
	k := []byte("k")
	o := mustNewSketch(t, cfg)
	o.Update(k, 2) // drains to 0 in 2 s
	clock.Advance(5 * time.Second)
	s := mustNewSketch(t, cfg)
	s.Update(k, -50) // a credit: drains toward 0 at 1/s
	if err := s.Merge(o, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.Query(k); got < o.Query(k) {
		t.Errorf("merged %v below the other input %v", got, o.Query(k))
	}
}

// TestAuditSnapMergeRefusesMore: Lo and a custom hasher (kind and
// fingerprint) are refused too, naming the field, and the refused merge
// changes nothing.
func TestAuditSnapMergeRefusesMore(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	base := sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -5, Hi: 100, Decay: decay.Linear(1), Seed: 3, Clock: clock}
	custom := func(seed uint64) sketch.Hasher { return customHasher(seed) }
	customX := func(seed uint64) sketch.Hasher { return customHasher(seed ^ 0x55) }
	withC := base
	withC.Hasher = custom
	for _, tc := range []struct {
		field     string
		dst, from sketch.Config
	}{
		{"Lo", base, func() sketch.Config { c := base; c.Lo = -6; return c }()},
		{"Lo", base, func() sketch.Config { c := base; c.Lo = 0; return c }()},
		{"Hi", base, func() sketch.Config { c := base; c.Hi = math.Nextafter(100, 101); return c }()},
		{"Decay parameter", base, func() sketch.Config { c := base; c.Decay = decay.Linear(math.Nextafter(1, 2)); return c }()},
		{"Hasher", base, withC},
		{"Hasher fingerprint", withC, func() sketch.Config { c := withC; c.Hasher = customX; return c }()},
	} {
		dst := mustNewSketch(t, tc.dst)
		dst.Update([]byte("mine"), 7)
		src := mustNewSketch(t, tc.from)
		src.Update([]byte("mine"), 9)
		err := dst.Merge(src, time.Second)
		var se *core.SnapshotError
		if !errors.As(err, &se) || !errors.Is(err, sketch.ErrSnapshotMismatch) || se.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
		if got := dst.Query([]byte("mine")); got != 7 {
			t.Errorf("%s: refused merge changed the sketch: %v", tc.field, got)
		}
	}
}

// TestAuditSnapMergeHiBounds: Hi values a float32 cannot hold and
// Hi = +Inf: a merged cell is the sum clamped to the effective bound,
// finite, and Query(merged) >= each input's Query (Min, None/Exponential).
func TestAuditSnapMergeHiBounds(t *testing.T) {
	clock := sketchtest.NewFakeClock()
	for _, tc := range []struct {
		name string
		hi   float64
		law  decay.Decay
		d    float64
	}{
		{"0.1", 0.1, decay.None(), 0.06},
		{"1e9+1", 1e9 + 1, decay.None(), 6e8},
		{"inf", math.Inf(1), decay.Exponential(1e-9), 2e38},
		{"inf-linear", math.Inf(1), decay.Linear(1), 3e38},
	} {
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: tc.hi, Decay: tc.law, Clock: clock}
		a, b := mustNewSketch(t, cfg), mustNewSketch(t, cfg)
		k := []byte("k")
		a.Update(k, tc.d)
		b.Update(k, tc.d)
		qa, qb := a.Query(k), b.Query(k)
		if err := a.Merge(b, time.Hour); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := a.Query(k)
		if math.IsInf(got, 0) || math.IsNaN(got) {
			t.Fatalf("%s: merged to %v", tc.name, got)
		}
		if got < qa || got < qb {
			t.Errorf("%s: merged %v below an input (%v, %v)", tc.name, got, qa, qb)
		}
		limit := float64(float32(tc.hi))
		if limit < tc.hi { // the effective bound is Hi rounded up to float32
			limit = float64(math.Nextafter32(float32(tc.hi), float32(math.Inf(1))))
		}
		if math.IsInf(tc.hi, 1) {
			limit = math.MaxFloat32
		}
		if got > limit {
			t.Errorf("%s: merged %v above the effective Hi %v", tc.name, got, limit)
		}
		want := math.Min(2*tc.d, limit)
		if tc.name != "inf-linear" && math.Abs(got-want) > want*1e-6 {
			t.Errorf("%s: merged %v, want about %v", tc.name, got, want)
		}
	}
}

// TestAuditSnapMergeClocksNoUnder: replicas on clocks behind and ahead of
// the receiver, Exponential: after the merge, the merged Query is at
// least each input's own truth decayed to the same wall instant.
func TestAuditSnapMergeClocksNoUnder(t *testing.T) {
	for _, off := range []int64{-7000, -1, 0, 1, 9000} {
		cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		cs.Set(50_000)
		co.Set(50_000 + off)
		law := decay.Exponential(0.1)
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: law, Clock: cs}
		s := mustNewSketch(t, cfg)
		cfg.Clock = co
		o := mustNewSketch(t, cfg)
		keys := snapKeys(30)
		for i, k := range keys {
			o.Update(k, float64(100+i))
			s.Update(k, float64(i))
		}
		// o's truth at s's wall instant (50 s): its writes were at wall
		// 50 s + off; if off > 0 they are "in the future" and count as
		// age 0; if off < 0 they decay -off ms more.
		if err := s.Merge(o, 0); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			age := max(-off, 0)
			truth := law.Apply(float64(100+i), age) + float64(i)
			if got := s.Query(k); got < truth*(1-1e-6) {
				t.Errorf("off %d key %s: merged %v < truth %v", off, k, got, truth)
			}
		}
	}
}

// TestAuditSnapMergeIntoIdle: Merge into a sketch idle for 30 days (its
// cells must be re-based before any age is read) and from one idle as
// long: the merged Query is the sum of both inputs' own Queries (None:
// exactly; Exponential: within float32 rounding, never below).
func TestAuditSnapMergeIntoIdle(t *testing.T) {
	for _, law := range []decay.Decay{decay.None(), decay.Exponential(1e-7)} {
		cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		cs.Set(1_600_000_000_000)
		co.Set(1_600_000_000_000)
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: law, Clock: cs}
		s := mustNewSketch(t, cfg)
		cfg.Clock = co
		o := mustNewSketch(t, cfg)
		keys := snapKeys(20)
		for i, k := range keys {
			s.Update(k, float64(1000+i))
			o.Update(k, float64(7*i+1))
		}
		cs.Advance(30 * 24 * time.Hour)
		co.Advance(30 * 24 * time.Hour)
		want := make([]float64, len(keys))
		for i, k := range keys {
			want[i] = s.Query(k) + o.Query(k)
		}
		if err := s.Merge(o, 0); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			got := s.Query(k)
			if got < want[i]*(1-1e-7) || got > want[i]*(1+1e-5) {
				t.Errorf("%v key %d: merged %v, want %v", law, i, got, want[i])
			}
		}
	}
}
