package grudge_test

import (
	"math"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// a96CountClock is a grudge.Clock with Now only (read through the root
// package's adapter), counting its readings, at base plus an offset.
type a96CountClock struct {
	base  time.Time
	off   atomic.Int64 // ns
	reads atomic.Int64
}

func (c *a96CountClock) Now() time.Time {
	c.reads.Add(1)
	return c.base.Add(time.Duration(c.off.Load()))
}

// TestAudit96RootClockOneReadPerOperation: config.go, Clock: "Sketches
// read it once per operation and count whole milliseconds; a reading
// earlier than one already seen counts as no time passing" (and package
// rotator: "Every operation reads the clock once"). A Now-only clock
// whose time starts at year 1 (time.Time{}), before 1970, at the epoch,
// in year 9999 and at a fractional millisecond: every operation of the
// Sketch and of a lazy Rotator (Rotations() included, an access) reads
// it exactly once, also on the call that promotes; Linear(1000) drains
// exactly one unit per whole ms elapsed (fractions ignored), and a step
// back of an hour drains nothing until the clock is past the mark again.
func TestAudit96RootClockOneReadPerOperation(t *testing.T) {
	bases := []time.Time{{}, time.Unix(-5, 250_000_000), time.Unix(0, 0),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC), time.Unix(1_780_000_000, 999_999_999)}
	for _, base := range bases {
		c := &a96CountClock{base: base}
		cfg := grudge.Config{Levels: 4, CellsPerLevel: 1024, Decay: grudge.Linear(1000), Hi: 1e7, Clock: c}
		s, err := grudge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: 3, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		ops := []struct {
			name string
			f    func()
		}{
			{"Sketch.Update", func() { s.Update(k, 1) }},
			{"Sketch.Query", func() { s.Query(k) }},
			{"Sketch.UpdateAndQuery", func() { s.UpdateAndQuery(k, 1) }},
			{"Sketch.TryUpdate admit", func() { s.TryUpdate(k, 1, 1e9) }},
			{"Sketch.TryUpdate deny", func() { s.TryUpdate(k, 1, -1) }},
			{"Sketch.QueryDetailed", func() { s.QueryDetailed(k) }},
			{"Rotator.Update", func() { r.Update(k, 1) }},
			{"Rotator.Query", func() { r.Query(k) }},
			{"Rotator.UpdateAndQuery", func() { r.UpdateAndQuery(k, 1) }},
			{"Rotator.TryUpdate admit", func() { r.TryUpdate(k, 1, 1e9) }},
			{"Rotator.TryUpdate deny", func() { r.TryUpdate(k, 1, -1) }},
			{"Rotator.QueryDetailed", func() { r.QueryDetailed(k) }},
			{"Rotator.Rotations", func() { r.Rotations() }},
		}
		for _, op := range ops {
			for _, step := range []time.Duration{0, 1500 * time.Microsecond, 2 * time.Second} { // the last promotes
				c.off.Add(int64(step))
				before := c.reads.Load()
				op.f()
				if n := c.reads.Load() - before; n != 1 {
					t.Errorf("base %v, %s after +%v: %d clock reads, want 1", base, op.name, step, n)
				}
			}
		}
		kk := []byte("kk")
		s.Update(kk, 5e6)
		r.Update(kk, 5e6)
		w := c.Now().UnixMilli() // the write's whole ms (the clock has not stepped back yet)
		mark := w
		check := func(what string) {
			t.Helper()
			mark = max(mark, c.Now().UnixMilli())
			want := 5e6 - float64(mark-w)
			if g := s.Query(kk); g != want {
				t.Errorf("base %v, %s: Sketch.Query = %v, want %v", base, what, g, want)
			}
			if g := r.Query(kk); g != want {
				t.Errorf("base %v, %s: Rotator.Query = %v, want %v", base, what, g, want)
			}
		}
		c.off.Add(int64(700*time.Millisecond + 600*time.Microsecond))
		check("+700.6 ms")
		c.off.Add(int64(-time.Hour))
		check("back 1 h")
		c.off.Add(int64(time.Hour - 2*time.Millisecond))
		check("2 ms behind the mark")
		c.off.Add(int64(3 * time.Millisecond))
		check("1 ms past the mark")
		c.off.Add(int64(time.Second))
		check("+1 s, a promotion (N = 3: the new primary holds the write)")
	}
}

// a96CountLaw is a custom Decay (one unit per ms toward 0) counting its
// calls.
type a96CountLaw struct{ n *atomic.Int64 }

func (l a96CountLaw) Apply(s float64, dt int64) float64 {
	l.n.Add(1)
	if dt <= 0 {
		return s
	}
	if s > 0 {
		return max(s-float64(dt), 0)
	}
	return min(s+float64(dt), 0)
}

// TestAudit96RootCustomDecayOneCallPerCell: config.go, Decay: "a Decay of
// your own works (slower than the built-ins: one interface call per
// cell)". Every operation calls a user's law at most once per cell it
// touches: L for a Sketch's operation, L per generation for a Rotator's
// write, L for its read, with L = 1, 4 and 8, with and without time
// passing; and the law gives the values it says (a drain of 1 per ms).
func TestAudit96RootCustomDecayOneCallPerCell(t *testing.T) {
	const gens = 3
	for _, L := range []uint32{1, 4, 8} {
		var n atomic.Int64
		clk := grudgetest.NewFakeClock()
		cfg := grudge.Config{Levels: L, CellsPerLevel: 1 << 10, Hi: 1e6, Decay: a96CountLaw{&n}, Clock: clk}
		s, err := grudge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Generations: gens, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		k := []byte("k")
		s.Update(k, 1000)
		r.Update(k, 1000)
		ops := []struct {
			name string
			max  int64
			f    func()
		}{
			{"Sketch.Update", int64(L), func() { s.Update(k, 1) }},
			{"Sketch.Query", int64(L), func() { s.Query(k) }},
			{"Sketch.UpdateAndQuery", int64(L), func() { s.UpdateAndQuery(k, 1) }},
			{"Sketch.TryUpdate admit", int64(L), func() { s.TryUpdate(k, 1, 1e9) }},
			{"Sketch.TryUpdate deny", int64(L), func() { s.TryUpdate(k, 1, 0) }},
			{"Sketch.QueryDetailed", int64(L), func() { s.QueryDetailed(k) }},
			{"Rotator.Update", gens * int64(L), func() { r.Update(k, 1) }},
			{"Rotator.Query", int64(L), func() { r.Query(k) }},
			{"Rotator.UpdateAndQuery", gens * int64(L), func() { r.UpdateAndQuery(k, 1) }},
			{"Rotator.TryUpdate admit", gens * int64(L), func() { r.TryUpdate(k, 1, 1e9) }},
			{"Rotator.TryUpdate deny", int64(L), func() { r.TryUpdate(k, 1, 0) }},
			{"Rotator.QueryDetailed", int64(L), func() { r.QueryDetailed(k) }},
		}
		for _, op := range ops {
			for _, step := range []time.Duration{0, 5 * time.Millisecond} {
				clk.Advance(step)
				before := n.Load()
				op.f()
				if got := n.Load() - before; got > op.max {
					t.Errorf("L=%d %s after +%v: %d calls of the law, want at most %d (one per cell)", L, op.name, step, got, op.max)
				}
			}
		}
		// 1000, plus 1 by each of Update, UpdateAndQuery and the admitted
		// TryUpdate, each run twice; 5 ms drained by the law per op.
		want := 1000.0 + 6 - 5*float64(len(ops))
		if g := s.Query(k); g != want {
			t.Errorf("L=%d: Sketch.Query = %v, want %v", L, g, want)
		}
		if g := r.Query(k); g != want {
			t.Errorf("L=%d: Rotator.Query = %v, want %v", L, g, want)
		}
	}
}

// a96LeastAbove returns the least float64 at or above the exact x.
func a96LeastAbove(x *big.Rat) float64 {
	f, _ := x.Float64()
	if new(big.Rat).SetFloat64(f).Cmp(x) < 0 {
		f = math.Nextafter(f, math.Inf(1))
	}
	return f
}

// TestAudit96RootPrecisionExamples: docs/precision.md's worked examples,
// through the root package: "0.1 is stored as 0.10000000149, -0.1 as
// -0.09999999404 (toward zero), 1e6 + 1e-5 as 1000000.0625, 2^24 + 1 as
// 16777218, 2^60 + 1 as 2^60 + 2^37"; "1000 adds of 1e14 to 2^100 leave
// 2^100 + 1000 float32 ulps (2^77 each)"; "Hi = 1e12 is stored as
// 1000000061440" and read capped at Hi ("a key at the clamp ... reads"
// Hi, TryUpdate(k, 0, Hi) admits); Linear(0.1) over 6 ms from 1 reads the
// least float64 at or above the exact drain; Linear(nextafter(500, 0))
// over 1 ms from 1 reads the least float64 at or above 0.5 + 5.7e-17, a
// write then stores 0.50000006 and TryUpdate of 0.5 under 1 denies ("was
// stored as it was ... and a TryUpdate of 0.5 under 1 then admitted",
// before audit 86), while before any write the float64 compare admits it
// ("an add the compare rounds down to the limit is admitted"). The
// float32 round-up, "so Min never under-estimates" (doc.go).
func TestAudit96RootPrecisionExamples(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	build := func(cfg grudge.Config) *grudge.Sketch {
		t.Helper()
		cfg.Levels, cfg.CellsPerLevel, cfg.Clock = 2, 64, clk
		s, err := grudge.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	k := []byte("k")
	stored := []struct {
		add, want float64
	}{
		{0.1, float64(float32(0.1))},
		{-0.1, -float64(math.Nextafter32(0.1, 0))},
		{1e6 + 1e-5, 1000000.0625},
		{1<<24 + 1, 16777218},
		{1 << 60, 1 << 60}, // then + 1, below: 2^60 + 1 is no float64
	}
	for _, c := range stored {
		s := build(grudge.Config{Lo: -1e30, Hi: 1e30})
		if g := s.UpdateAndQuery(k, c.add); g != c.want {
			t.Errorf("UpdateAndQuery(%v) = %.12g, want %.12g", c.add, g, c.want)
		}
		if g := s.Query(k); g != c.want {
			t.Errorf("Query after %v = %.12g, want %.12g", c.add, g, c.want)
		}
		if c.add == 1<<60 {
			if g, want := s.UpdateAndQuery(k, 1), float64(1<<60+1<<37); g != want {
				t.Errorf("2^60 + 1 (exact sum) stored as %v, want 2^60 + 2^37 = %v", g, want)
			}
		}
	}
	s := build(grudge.Config{Hi: math.MaxFloat32})
	s.Update(k, math.Ldexp(1, 100))
	for range 1000 {
		s.Update(k, 1e14)
	}
	if g, want := s.Query(k), math.Ldexp(1, 100)+1000*math.Ldexp(1, 77); g != want {
		t.Errorf("2^100 + 1000 x 1e14 reads %v, want 2^100 + 1000 x 2^77 = %v", g, want)
	}
	s = build(grudge.Config{Hi: 1e12, Aggregator: grudge.Max})
	if g := s.UpdateAndQuery(k, 2e12); g != 1e12 {
		t.Errorf("Hi = 1e12 at the clamp: UpdateAndQuery reads %v, want 1e12", g)
	}
	if d := s.QueryDetailed(k); d.Aggregate != 1e12 || d.LevelScores[0] != 1e12 || d.LevelScores[1] != 1e12 {
		t.Errorf("Hi = 1e12 at the clamp: QueryDetailed %+v, want every score 1e12", d)
	}
	if !s.TryUpdate(k, 0, 1e12) || s.TryUpdate(k, 1, 1e12) {
		t.Error("Hi = 1e12 at the clamp: want TryUpdate(k, 0, Hi) admitted and TryUpdate(k, 1, Hi) denied")
	}
	s = build(grudge.Config{Hi: 10, Decay: grudge.Linear(0.1)})
	s.Update(k, 1)
	clk.Advance(6 * time.Millisecond)
	exact := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).Mul(new(big.Rat).SetFloat64(0.1), big.NewRat(6, 1000)))
	if g, want := s.Query(k), a96LeastAbove(exact); g != want {
		t.Errorf("Linear(0.1), 1 read 6 ms later = %.20g, want the least float64 at or above the exact drain, %.20g", g, want)
	}
	r := math.Nextafter(500, 0)
	s = build(grudge.Config{Hi: 10, Decay: grudge.Linear(r)})
	s.Update(k, 1)
	clk.Advance(time.Millisecond)
	exact = new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).Quo(new(big.Rat).SetFloat64(r), big.NewRat(1000, 1)))
	if g, want := s.Query(k), a96LeastAbove(exact); g != want {
		t.Errorf("Linear(nextafter(500, 0)), 1 read 1 ms later = %.20g, want %.20g", g, want)
	}
	// A write stores the decayed value rounded up to a float32 (0.50000006),
	// no longer 0.5: TryUpdate of 0.5 under 1 then denies.
	s.Update(k, 0)
	if g := s.Query(k); g != float64(math.Nextafter32(0.5, 1)) {
		t.Errorf("Linear(nextafter(500, 0)), written at 0.5 + 5.7e-17: reads %v, want %v", g, float64(math.Nextafter32(0.5, 1)))
	}
	if s.TryUpdate(k, 0.5, 1) {
		t.Error("Linear(nextafter(500, 0)), written at 0.5 + 5.7e-17: TryUpdate(k, 0.5, 1) admitted (precision.md: before audit 86 it was)")
	}
	// No write yet: the decision is the float64 compare, which rounds
	// (0.5 + 2^-53) + 0.5 to 1 ("an add the compare rounds down to the
	// limit is admitted", precision.md), as the float64 reference and
	// grudge decide; the cell then holds the exact sum rounded up.
	s2 := build(grudge.Config{Hi: 10, Decay: grudge.Linear(r)})
	s2.Update(k, 1)
	clk.Advance(time.Millisecond)
	if !s2.TryUpdate(k, 0.5, 1) {
		t.Error("Linear(nextafter(500, 0)), no write: TryUpdate(k, 0.5, 1) denied; the float64 compare admits it")
	}
	if g := s2.Query(k); g <= 1 {
		t.Errorf("after that admission the key reads %v, want the exact sum above 1 rounded up", g)
	}
}

// TestAudit96RootTinyBounds: Lo and Hi at the bottom of the float range
// (the smallest float64, a float32 subnormal, the smallest float32):
// doc.go "Reads are capped at Hi", precision.md "Bounds rounded up" (Lo
// = -5e-324 holds as -0, Lo = -1e-40 as the float32 just above it). A
// key at the clamp reads exactly Hi and TryUpdate(k, 0, Hi) admits; a
// key driven to Lo reads at or above Lo and at most 0; adding Hi/2 to it
// reads at or above the exact sum (never below the truth), at most Hi;
// under None, Linear and Exponential, with Min, Max and Mean.
func TestAudit96RootTinyBounds(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	k := []byte("k")
	for _, hi := range []float64{5e-324, 1e-40, 0x1p-149, 3e-39} {
		for _, d := range []grudge.Decay{grudge.None, grudge.Linear(1e-45), grudge.Exponential(1e-3)} {
			for _, agg := range []grudge.Aggregator{grudge.Min, grudge.Max, grudge.Mean} {
				s, err := grudge.New(grudge.Config{Levels: 3, CellsPerLevel: 64, Lo: -hi, Hi: hi, Decay: d, Aggregator: agg, Clock: clk})
				if err != nil {
					t.Fatalf("hi %v: %v", hi, err)
				}
				s.Update(k, 1)
				if g := s.Query(k); g != hi {
					t.Errorf("hi %v, %v: at the clamp Query = %v, want Hi", hi, d, g)
				}
				if !s.TryUpdate(k, 0, hi) {
					t.Errorf("hi %v, %v: TryUpdate(k, 0, Hi) denied at the clamp", hi, d)
				}
				s.Update(k, -1)
				lo := s.Query(k)
				if lo < -hi || lo > 0 {
					t.Errorf("hi %v, %v: at Lo Query = %v, want in [Lo, 0]", hi, d, lo)
				}
				truth := -hi + hi/2 // exact: hi/2 is exact or 0 here
				if g := s.UpdateAndQuery(k, hi/2); g < truth || g > hi {
					t.Errorf("hi %v, %v: Lo + Hi/2 reads %v, want in [%v, Hi]", hi, d, g, truth)
				}
				clk.Advance(1500 * time.Millisecond)
				if g := s.Query(k); g < math.Min(truth, 0) || g > hi {
					t.Errorf("hi %v, %v: 1.5 s later reads %v", hi, d, g)
				}
			}
		}
	}
}

// a96FuncLaw is a user's Decay whose type is a func: a value no == can
// compare.
type a96FuncLaw func(score float64, dt int64) float64

func (f a96FuncLaw) Apply(score float64, dt int64) float64 { return f(score, dt) }

// TestAudit96RootFuncTypedDecay: "a Decay of your own works" (config.go)
// also when its type is a func (not comparable: nothing may compare it or
// use it as a map key): a halving law per second, with Hi = +Inf (a law
// that drains; scores saturate at MaxFloat32), on a Sketch and a lazy
// Rotator: exact halvings, TryUpdate's decisions, and forgetting after
// N x Period.
func TestAudit96RootFuncTypedDecay(t *testing.T) {
	half := a96FuncLaw(func(s float64, dt int64) float64 {
		if dt <= 0 {
			return s
		}
		return s * math.Exp2(-float64(dt)/1000)
	})
	clk := grudgetest.NewFakeClock()
	cfg := grudge.Config{Levels: 2, CellsPerLevel: 64, Hi: math.Inf(1), Decay: half, Clock: clk}
	s, err := grudge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: cfg, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 8)
	r.Update(k, 8)
	clk.Advance(2 * time.Second)
	if a, b := s.Query(k), r.Query(k); a != 2 || b != 2 {
		t.Fatalf("8 halved twice: Sketch %v, Rotator %v; want 2", a, b)
	}
	if !s.TryUpdate(k, 3, 5) || s.TryUpdate(k, 1, 5) || !r.TryUpdate(k, 3, 5) || r.TryUpdate(k, 1, 5) {
		t.Fatal("TryUpdate at 2: want (3, 5) admitted, then (1, 5) denied")
	}
	if a := s.UpdateAndQuery(k, math.MaxFloat64); a != math.MaxFloat32 {
		t.Errorf("Hi = +Inf: a huge add reads %v, want MaxFloat32", a)
	}
	clk.Advance(2 * time.Hour)
	if b := r.Query(k); b != 0 {
		t.Errorf("Rotator after N x Period: %v, want 0", b)
	}
}
