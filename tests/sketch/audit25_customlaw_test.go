package sketch_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 25: custom decay laws (the Decay interface) that misbehave.
//
// Contract: decay/doc.go "sanitizes a custom law's faults (NaN, ±Inf,
// growth, crossing 0) to the safe side: no decay, or 0"; sketch/doc.go "no
// cell ever holds NaN or Inf", "never below the truth"; docs/design.md: a
// custom law that panics inside a TryUpdate commit "still releases the
// stripe", and one that panics in the sweep or a re-base "cannot leave the
// lock held". New returns a sketch "or a *ConfigError naming the first
// invalid field".

// a25Armed is a custom law: identity (no decay) while disarmed, a panic
// on every call with dt > 0 and a non-zero score while armed.
type a25Armed struct {
	armed *atomic.Bool
	calls *atomic.Int64
}

func newA25Armed() a25Armed { return a25Armed{new(atomic.Bool), new(atomic.Int64)} }

func (l a25Armed) Apply(s float64, dt int64) float64 {
	l.calls.Add(1)
	if dt > 0 && l.armed.Load() {
		panic("a25: law panic")
	}
	return s
}

// a25Panics runs f and returns what it panicked with (nil: none), failing
// t if f does not return within 10 s (a wedged stripe or lock).
func a25Panics(t *testing.T, what string, f func()) (p any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	select {
	case p = <-done:
		return p
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10 s (wedged)", what)
		return nil
	}
}

// TestAudit25PanickingLawLeavesSketchUsable arms a panicking law before
// each kind of operation (Update, UpdateAndQuery, Query, QueryDetailed,
// TryUpdate, a sweep driven by a clock jump past 2^30 ms, Merge,
// UnmarshalBinary and ReadFrom of an old snapshot), lets the panic
// propagate, disarms it, and checks that every later operation returns
// (no stripe or sweep lock held), that no key reads NaN/Inf or below the
// deltas of the calls that completed (the law is the identity while
// disarmed, so the truth is their sum), and that TryUpdate still admits
// exactly up to a limit on a fresh key.
func TestAudit25PanickingLawLeavesSketchUsable(t *testing.T) {
	l := newA25Armed()
	clk := sketchtest.NewFakeClock()
	clk.Set(1<<32 - 1000)
	cfg := sketch.Config{Levels: 4, CellsPerLevel: 1, Hi: 1e9, Decay: l, Clock: clk} // every key shares every cell
	s := mustNewSketch(t, cfg)
	twin := mustNewSketch(t, cfg)
	truth := map[string]float64{}
	upd := func(k string, d float64) { s.UpdateString(k, d); truth[k] += d }
	checkAll := func(where string) {
		t.Helper()
		for k, want := range truth {
			var got float64
			if p := a25Panics(t, where+": Query", func() { got = s.QueryString(k) }); p != nil {
				t.Fatalf("%s: Query(%s) panicked with the law disarmed: %v", where, k, p)
			}
			if math.IsNaN(got) || math.IsInf(got, 0) || got < want || got > 1e9 {
				t.Errorf("%s: Query(%s) = %v; want finite, >= %v and <= Hi", where, k, got, want)
			}
		}
	}
	upd("a", 10)
	clk.Advance(time.Second)
	snap, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		prep func()
		f    func()
	}{
		{"Update", nil, func() { s.UpdateString("a", 1) }},
		{"UpdateAndQuery", nil, func() { s.UpdateAndQueryString("a", 1) }},
		{"Query", nil, func() { s.QueryString("a") }},
		{"QueryDetailed", nil, func() { s.QueryDetailed([]byte("a")) }},
		{"TryUpdate", nil, func() { s.TryUpdateString("a", 1, 1e9) }},
		{"TryUpdate other key", nil, func() { s.TryUpdateString("b", 1, 1e9) }},
		{"sweep", func() { clk.Advance(time.Duration(1<<30+5) * time.Millisecond) }, func() { s.UpdateString("c", 0) }},
		{"Merge", func() { twin.UpdateString("m", 7); clk.Advance(time.Second) }, func() { _ = s.Merge(twin) }},
		{"UnmarshalBinary old snapshot", func() { clk.Advance(time.Duration(1<<30) * time.Millisecond) }, func() { _ = s.UnmarshalBinary(snap) }},
		{"ReadFrom old snapshot", nil, func() { _, _ = s.ReadFrom(bytes.NewReader(snap)) }},
	}
	for _, op := range ops {
		if op.prep != nil {
			op.prep()
		}
		clk.Advance(time.Millisecond)
		l.armed.Store(true)
		p := a25Panics(t, op.name, op.f)
		l.armed.Store(false)
		if p == nil {
			t.Logf("%s: the law was not called (no panic)", op.name)
		} else if !strings.Contains(p.(string), "a25: law panic") {
			t.Errorf("%s panicked with %v; want the law's own panic", op.name, p)
		}
		// After a panicking Merge/restore the cells hold an
		// over-estimate (part merged) or the restored snapshot: the
		// truth is only a lower bound for keys written after them.
		if strings.Contains(op.name, "snapshot") {
			truth = map[string]float64{}
		}
		// Everything still works.
		for _, f := range []struct {
			n string
			f func()
		}{
			{"Update", func() { upd("a", 1) }},
			{"TryUpdate", func() {
				if s.TryUpdateString("a", 1, 1e9) {
					truth["a"]++
				}
			}},
			{"UpdateAndQuery", func() { s.UpdateAndQueryString("a", 0) }},
			{"Merge", func() { _ = s.Merge(twin) }},
			{"MarshalBinary", func() { _, _ = s.MarshalBinary() }},
		} {
			if p := a25Panics(t, op.name+" then "+f.n, f.f); p != nil {
				t.Fatalf("after %s: %s panicked with the law disarmed: %v", op.name, f.n, p)
			}
		}
		checkAll("after " + op.name)
	}
	// The stripe machinery still decides exactly: on a fresh sketch state
	// (Reset), N admits of 1 under limit N.
	s.Reset()
	n := 0
	for range 50 {
		if s.TryUpdateString("z", 1, 20) {
			n++
		}
	}
	if n != 20 {
		t.Errorf("after the panics, TryUpdate(z, 1, 20) admitted %d of 50; want 20", n)
	}
	// A clean restore of the snapshot still works.
	if err := s.UnmarshalBinary(snap); err != nil {
		t.Errorf("UnmarshalBinary after the panics: %v", err)
	}
	if v := s.QueryString("a"); v < 10 {
		t.Errorf("after a clean restore Query(a) = %v; want >= 10", v)
	}
}

// a25Bad2 is a custom law f for dt > 0.
type a25Bad2 struct {
	name string
	f    func(s float64, dt int64) float64
}

func (b a25Bad2) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return b.f(s, dt)
}

var a25BadLaws = []a25Bad2{
	{"NaN", func(float64, int64) float64 { return math.NaN() }},
	{"+Inf", func(float64, int64) float64 { return math.Inf(1) }},
	{"-Inf", func(float64, int64) float64 { return math.Inf(-1) }},
	{"grow", func(s float64, dt int64) float64 { return s * 1e10 }},
	{"flip", func(s float64, _ int64) float64 { return -s }},
	{"-MaxFloat64", func(float64, int64) float64 { return -math.MaxFloat64 }},
	{"NaN on long gaps", func(s float64, dt int64) float64 {
		if dt > 1<<28 {
			return math.NaN()
		}
		return s * math.Exp(-float64(dt)/1e6)
	}},
}

// TestAudit25BadLawMergeSnapshotSweep: a misbehaving custom law (NaN,
// ±Inf, growth, sign flip) is sanitized in the paths besides the hot
// ones too: Merge (other's cells decayed to now), snapshot restore after
// a downtime past the horizon (cells decayed once at load), and the lazy
// sweep (a clock jump past 2^30 ms). No read is ever NaN or ±Inf or
// outside [Lo, Hi], a positive key never reads below 0 nor above its
// undecayed sum, and a negative key never above 0 (no crossing).
func TestAudit25BadLawMergeSnapshotSweep(t *testing.T) {
	const lo, hi = -1000.0, 1000.0
	for _, bl := range a25BadLaws {
		clk := sketchtest.NewFakeClock()
		clk.Set(1<<32 - 3000)
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 64, Lo: lo, Hi: hi, Decay: bl, Clock: clk}
		a, b, c := mustNewSketch(t, cfg), mustNewSketch(t, cfg), mustNewSketch(t, cfg)
		a.UpdateString("p", 100)
		a.UpdateString("n", -100)
		b.UpdateString("p", 50)
		b.UpdateString("n", -50)
		check := func(where string, s *sketch.Sketch, pmax float64) {
			t.Helper()
			for _, k := range []string{"p", "n"} {
				v := s.QueryString(k)
				bad := math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi
				if k == "p" && (v < 0 || v > pmax) {
					bad = true
				}
				if k == "n" && v > 0 {
					bad = true
				}
				if bad {
					t.Errorf("%s: %s: Query(%s) = %v", bl.name, where, k, v)
				}
				for _, l := range s.QueryDetailed([]byte(k)).Levels {
					if math.IsNaN(l.Score) || math.IsInf(l.Score, 0) || l.Score < lo || l.Score > hi {
						t.Errorf("%s: %s: level %d of %s = %v", bl.name, where, l.Level, k, l.Score)
					}
				}
			}
		}
		clk.Advance(5 * time.Second)
		if err := a.Merge(b, time.Second); err != nil {
			t.Fatalf("%s: Merge: %v", bl.name, err)
		}
		check("after Merge", a, 150)
		snap, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Duration(1<<30+12345) * time.Millisecond) // past sweepKeep: decayed at load
		if err := c.UnmarshalBinary(snap); err != nil {
			t.Fatalf("%s: UnmarshalBinary: %v", bl.name, err)
		}
		check("after a restore 12 days later", c, 150)
		// Sweep: a's cells idle past 2^30 ms, other keys written.
		for i := range 8 {
			clk.Advance(time.Duration(1<<28) * time.Millisecond)
			a.UpdateString("other"+string(rune('0'+i)), 1)
			check("during sweeps", a, 150+8)
		}
		check("after sweeps", a, 158)
		// A TryUpdate decides on sanitized values: never NaN-poisoned.
		if !a.TryUpdateString("p", 1, hi+1) {
			t.Errorf("%s: TryUpdate(p, 1, Hi+1) denied (aggregate poisoned?)", bl.name)
		}
	}
}

// a25ProbePanics is a custom law whose Apply panics for long gaps (a
// table-driven law with a one-hour table, say), and which implements
// neither Validator nor Drainer.
type a25ProbePanics struct{}

func (a25ProbePanics) Apply(s float64, dt int64) float64 {
	if dt > 3_000_000 {
		panic("a25ProbePanics: gap past my table")
	}
	if dt <= 0 {
		return s
	}
	return s * math.Exp(-float64(dt)/1000)
}

// a25ValidatePanics is a custom law whose Validate panics.
type a25ValidatePanics struct{ decay.Decay }

func (a25ValidatePanics) Validate() error { panic("a25ValidatePanics: Validate") }

// TestAudit25FixedNewPanicsOnCustomLaw: New calls a custom law's code
// (its Validate, and its Apply, to probe whether it drains) and lets a
// panic there escape New, even with finite bounds where the drain probe
// decides nothing. sketch.New's doc: it "returns a sketch for cfg, or a
// *ConfigError naming the first invalid field"; the audit rule: never a
// panic at New. Want: a *ConfigError on Decay (recover the law's panic),
// or no probe when both bounds are finite.
func TestAudit25FixedNewPanicsOnCustomLaw(t *testing.T) {
	for _, c := range []struct {
		name string
		d    decay.Decay
	}{
		{"Apply panics on the drain probe, finite bounds", a25ProbePanics{}},
		{"Validate panics", a25ValidatePanics{decay.Exponential(1)}},
	} {
		var err error
		p := a25Panics(t, "New", func() {
			_, err = sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 100, Decay: c.d})
		})
		if p != nil {
			t.Errorf("%s: sketch.New panicked: %v; want a *ConfigError naming Decay (or, for finite bounds, no probe)", c.name, p)
			continue
		}
		var ce *sketch.ConfigError
		if err != nil && (!errors.As(err, &ce) || ce.Field != "Decay" || !errors.Is(err, sketch.ErrInvalidConfig)) {
			t.Errorf("%s: New = %v; want nil or a *ConfigError on Decay", c.name, err)
		}
	}
}

// TestAudit25DrainProbeDecidesInfiniteBounds: without Drainer, a custom
// law is probed (an hour of decay must shrink 1e6): a law that keeps
// 1e6 (identity) or grows it, or returns NaN, is refused with an infinite
// bound; one that shrinks it is accepted and saturates at MaxFloat32.
func TestAudit25DrainProbeDecidesInfiniteBounds(t *testing.T) {
	refused := []a25Bad2{
		{"identity", func(s float64, _ int64) float64 { return s }},
		{"grow", func(s float64, _ int64) float64 { return 2 * s }},
		{"NaN", func(float64, int64) float64 { return math.NaN() }},
		{"+Inf", func(float64, int64) float64 { return math.Inf(1) }},
		{"flip", func(s float64, _ int64) float64 { return -s }},
	}
	for _, d := range refused {
		_, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: math.Inf(1), Decay: d})
		var ce *sketch.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Hi" {
			t.Errorf("%s law with Hi=+Inf: New = %v; want a ConfigError on Hi", d.name, err)
		}
	}
	clk := sketchtest.NewFakeClock()
	d := a25Bad2{"halving", func(s float64, dt int64) float64 { return s * math.Exp2(-float64(dt)/1000) }}
	s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 8, Lo: math.Inf(-1), Hi: math.Inf(1), Decay: d, Clock: clk})
	if err != nil {
		t.Fatalf("draining custom law with infinite bounds: %v", err)
	}
	s.UpdateString("k", math.MaxFloat64)
	if v := s.QueryString("k"); v != math.MaxFloat32 {
		t.Errorf("Query = %v; want the saturation MaxFloat32", v)
	}
	clk.Advance(time.Second)
	if v := s.QueryString("k"); v < math.MaxFloat32/2 || v > math.MaxFloat32 {
		t.Errorf("Query after one half-life = %v; want >= MaxFloat32/2", v)
	}
}

// a25CommitLaw is an identity custom law with two test hooks: onFirst
// runs once, on the first call after it is set (reentrant calls see it
// cleared), and panicHeld makes a call panic while held() reports true.
type a25CommitLaw struct {
	onFirst   *atomic.Pointer[func()]
	panicHeld *atomic.Bool
	held      *atomic.Pointer[func() bool]
	panicked  *atomic.Bool
}

func (l a25CommitLaw) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	if f := l.onFirst.Swap(nil); f != nil {
		(*f)()
	}
	if l.panicHeld.Load() {
		if h := l.held.Load(); h != nil && (*h)() {
			l.panicked.Store(true)
			panic("a25: law panic inside the commit")
		}
	}
	return s
}

// TestAudit25LawPanicInsideCommitConflict: a custom decay law that panics
// inside a TryUpdate's commit (the re-decision after a CAS conflict, the
// only commit step that calls the law) leaves the stripe released, the
// cells holding no trace of the call below the truth (an exact undo or
// an over-estimate), and later TryUpdates deciding exactly. Single
// goroutine: the law's first call during the TryUpdate's snapshot runs an
// Update of key D, which shares only A's level-1 cell, so A's CAS there
// fails after its level-0 CAS succeeded; the re-decision decays A's aged
// level-2 cell with the stripe held, and the law panics there.
func TestAudit25LawPanicInsideCommitConflict(t *testing.T) {
	l := a25CommitLaw{new(atomic.Pointer[func()]), new(atomic.Bool), new(atomic.Pointer[func() bool]), new(atomic.Bool)}
	clk := sketchtest.NewFakeClock()
	clk.Set(10_000)
	s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Hi: 1e9, Decay: l, Clock: clk})
	a := []byte("A")
	la := s.QueryDetailed(a).Levels
	var d []byte
	for i := range 100000 {
		k := []byte("D" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576)))
		ld := s.QueryDetailed(k).Levels
		if ld[0].Index != la[0].Index && ld[1].Index == la[1].Index && ld[2].Index != la[2].Index {
			d = k
			break
		}
	}
	if d == nil {
		t.Fatal("no key D sharing only A's level-1 cell")
	}
	held := func() bool { return core.StripeSeq(core.SketchOf(s), a)&1 == 1 }
	l.held.Store(&held)
	s.Update(a, 0.5)
	clk.Advance(time.Millisecond) // A's cells aged: the law is called
	hook := func() { s.Update(d, 2) }
	l.onFirst.Store(&hook)
	l.panicHeld.Store(true)
	p := a25Panics(t, "TryUpdate(A)", func() { s.TryUpdate(a, 1, 100) })
	l.panicHeld.Store(false)
	if p == nil || !l.panicked.Load() {
		t.Fatalf("the law did not panic with the stripe held (panic %v): the test no longer reaches the commit's re-decision", p)
	}
	if seq := core.StripeSeq(core.SketchOf(s), a); seq&1 != 0 {
		t.Fatalf("A's stripe seq is %d (odd: held) after the panic", seq)
	}
	lv := s.QueryDetailed(a).Levels
	if lv[0].Score < 0.5 || lv[1].Score < 2.5 || lv[2].Score < 0.5 || lv[0].Score > 1.5 || lv[2].Score > 1.5 {
		t.Errorf("A's cells after the panic = (%v, %v, %v); want >= (0.5, 2.5, 0.5) and at most one increment above", lv[0].Score, lv[1].Score, lv[2].Score)
	}
	t.Logf("A's cells after the panic: %v %v %v", lv[0].Score, lv[1].Score, lv[2].Score)
	if v := s.Query(d); v < 2 {
		t.Errorf("Query(D) = %v; want >= 2", v)
	}
	base := s.Query(a)
	var ok bool
	if p := a25Panics(t, "TryUpdate(A) after", func() { ok = s.TryUpdate(a, 1, base+1) }); p != nil || !ok {
		t.Errorf("TryUpdate(A, 1, %v) after the panic = %v (panic %v); want admitted", base+1, ok, p)
	}
	if s.TryUpdate(a, 1, base+1) {
		t.Errorf("a second TryUpdate(A, 1, %v) was admitted past the limit", base+1)
	}
}
