package grudge_test

// Audit 140: a special-value sweep over the constructors, config fields and
// method parameters of the root package and, where one test covers them
// all, the packages under it (sketch, rotator, meter): typed-nil
// interfaces, clock spans at the ends of int64, odd bounds and periods.

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/internal/testchild"
	"github.com/lfgrudge/grudge/internal/testpanic"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a140ConfigErr reports whether err is a *sketch.ConfigError matching
// ErrInvalidConfig and naming field.
func a140ConfigErr(err error, field string) bool {
	var ce *sketch.ConfigError
	return errors.As(err, &ce) && errors.Is(err, sketch.ErrInvalidConfig) && ce.Field == field
}

// TestAudit140FixedTypedNilClockRawPanicInNew (audit 140; fixed at stop 65, the text below
// says what was wrong): "New returns a sketch for
// cfg, or a *ConfigError naming the first invalid field"
// (sketch/sketch.go:34); "Invalid Config: a *ConfigError naming the field
// and value" (API.md); Config.Clock "nil means the runtime's monotonic
// clock" (sketch/config.go:38). A typed-nil clock ((*sketchtest.FakeClock)(nil),
// (*grudgetest.FakeClock)(nil): a test helper's field left unset) is
// neither nil nor usable. Observed: every constructor panics inside New
// with "runtime error: invalid memory address or nil pointer dereference"
// (internal/core/clock.go anchorOf calls its Now), where the module
// already refuses typed nils elsewhere (snapshot sources, redis clients:
// core.IsNil). Expected: a *ConfigError naming Clock (or the typed nil
// taken as nil). Fix: in internal/core/config.go Normalize (after the Decay
// checks, ~line 106) refuse `cfg.Clock != nil && IsNil(cfg.Clock)` with
// bad("Clock", ...); every constructor (sketch, rotator, grudge, meter,
// limit) goes through it.
func TestAudit140FixedTypedNilClockRawPanicInNew(t *testing.T) {
	var sc *sketchtest.FakeClock
	var gc *grudgetest.FakeClock
	small := sketch.Config{Hi: 1, CellsPerLevel: 16}
	withClock := func(c sketch.Clock) sketch.Config { cfg := small; cfg.Clock = c; return cfg }
	for _, c := range []struct {
		name string
		f    func() error
	}{
		{"sketch.New", func() error { _, err := sketch.New(withClock(sc)); return err }},
		{"rotator.New", func() error {
			_, err := rotator.New(rotator.Config{Sketch: withClock(sc), Period: time.Second})
			return err
		}},
		{"grudge.New", func() error { _, err := grudge.New(grudge.Config{Hi: 1, CellsPerLevel: 16, Clock: gc}); return err }},
		{"grudge.NewRotator", func() error {
			_, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1, CellsPerLevel: 16, Clock: gc}, Period: time.Second})
			return err
		}},
		{"meter.NewRate", func() error {
			_, err := meter.NewRate(time.Second, meter.WithSize(2, 16), meter.WithClock(sc))
			return err
		}},
		{"meter.NewNovelty", func() error {
			_, err := meter.NewNovelty(time.Second, meter.WithSize(2, 16), meter.WithClock(sc))
			return err
		}},
		{"meter.NewInflight", func() error { _, err := meter.NewInflight(4, meter.WithSize(2, 16), meter.WithClock(sc)); return err }},
	} {
		var err error
		if msg := testpanic.Message(func() { err = c.f() }); msg != "" {
			t.Errorf("%s with a typed-nil clock: the constructor panicked %q; want a *ConfigError naming Clock", c.name, msg)
			continue
		}
		if err != nil && !a140ConfigErr(err, "Clock") {
			t.Errorf("%s with a typed-nil clock: %v; want a *ConfigError naming Clock", c.name, err)
		}
	}
}

// a140NilHasher is a pointer Hasher whose methods read their receiver.
type a140NilHasher struct{ seed uint64 }

func (h *a140NilHasher) Sum64(k []byte) uint64       { return h.seed ^ uint64(len(k)) }
func (h *a140NilHasher) Sum64String(k string) uint64 { return h.seed ^ uint64(len(k)) }
func (h *a140NilHasher) Hash64(k []byte) uint64      { return h.seed ^ uint64(len(k)) }

// TestAudit140FixedTypedNilHasherAcceptedThenRawPanic (audit 140; fixed at stop 65, the text below
// says what was wrong): HasherFactory "must
// return a non-nil Hasher for every seed: New, rotator.New, limit.New,
// redis.New and a snapshot restore report a nil one as a *ConfigError
// naming Hasher" (sketch/hash.go:14-18). A factory returning a typed nil
// ((*T)(nil) in the Hasher interface, the classic Go nil trap) is accepted
// by New (internal/core/sketch.go:88 compares the interface with nil;
// the root package's coreHasher, hash.go:81, wraps it in foreignHasher),
// and the first Update dies with "invalid memory address or nil pointer
// dereference". Expected: the documented *ConfigError naming Hasher at New.
// Fix: core.IsNil(s.hasher) at internal/core/sketch.go:88, and a typed-nil
// case in hash.go coreHasher (return nil for core.IsNil(h)).
func TestAudit140FixedTypedNilHasherAcceptedThenRawPanic(t *testing.T) {
	native := func(uint64) sketch.Hasher { return (*a140NilHasher)(nil) }
	root := func(uint64) grudge.Hasher { return (*a140NilHasher)(nil) }
	for _, c := range []struct {
		name string
		f    func() (func(), error)
	}{
		{"sketch.New", func() (func(), error) {
			s, err := sketch.New(sketch.Config{Hi: 1, CellsPerLevel: 16, Hasher: native})
			return func() { s.UpdateString("k", 1) }, err
		}},
		{"rotator.New", func() (func(), error) {
			r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1, CellsPerLevel: 16, Hasher: native}, Period: time.Second})
			return func() { r.UpdateString("k", 1) }, err
		}},
		{"grudge.New", func() (func(), error) {
			s, err := grudge.New(grudge.Config{Hi: 1, CellsPerLevel: 16, Hasher: root})
			return func() { s.Update([]byte("k"), 1) }, err
		}},
		{"meter.NewRate", func() (func(), error) {
			r, err := meter.NewRate(time.Second, meter.WithSize(2, 16), meter.WithHasher(native))
			return func() { r.Observe("k") }, err
		}},
	} {
		var use func()
		var err error
		if msg := testpanic.Message(func() { use, err = c.f() }); msg != "" {
			t.Errorf("%s: the constructor panicked %q; want a *ConfigError naming Hasher", c.name, msg)
			continue
		}
		if err != nil {
			if !a140ConfigErr(err, "Hasher") {
				t.Errorf("%s: %v; want a *ConfigError naming Hasher", c.name, err)
			}
			continue
		}
		if msg := testpanic.Message(use); msg != "" {
			t.Errorf("%s accepted a factory returning a typed-nil Hasher; the first Update panicked %q (want a *ConfigError naming Hasher from the constructor)", c.name, msg)
		}
	}
}

const a140TickerEnv = "GRUDGE_AUDIT140_TICKER_CHILD"

// TestAudit140FixedTypedNilTickerKillsProcess (audit 140; fixed at stop 65, the text below
// says what was wrong): RotatorConfig.Ticker "drives
// rotation ... nil means rotation every Period" (rotator.go:27-30), and
// "An invalid cfg yields the core's error" (NewRotator). A typed-nil ticker
// ((*grudgetest.FakeTicker)(nil)) is not nil, so NewRotator returns a
// Rotator and a nil error, then its tick goroutine calls C() on the nil
// pointer: "invalid memory address or nil pointer dereference" in a
// goroutine the caller cannot recover, which ends the whole process
// (run here in a child process). Expected: NewRotator refuses it with a
// *ConfigError naming Ticker. Fix: in rotator.go NewRotator (before
// `go rot.run()`, ~line 66) return core.ConfigErr("rotator", "Ticker", ...)
// when cfg.Ticker != nil && core.IsNil(cfg.Ticker).
func TestAudit140FixedTypedNilTickerKillsProcess(t *testing.T) {
	testchild.Isolate(t, a140TickerEnv, func(t *testing.T) {
		var tk *grudgetest.FakeTicker
		var rot *grudge.Rotator
		var err error
		if msg := testpanic.Message(func() {
			rot, err = grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1, CellsPerLevel: 16}, Period: time.Second, Ticker: tk})
		}); msg != "" {
			t.Fatalf("NewRotator with a typed-nil Ticker panicked %q; want a *ConfigError naming Ticker", msg)
		}
		if err != nil {
			if !a140ConfigErr(err, "Ticker") {
				t.Fatalf("NewRotator with a typed-nil Ticker: %v; want a *ConfigError naming Ticker", err)
			}
			return
		}
		// Accepted: give the tick goroutine time to run (it crashes the
		// process if the bug is there).
		time.Sleep(50 * time.Millisecond)
		rot.Close()
		t.Errorf("NewRotator accepted a typed-nil Ticker (want a *ConfigError naming Ticker)")
	})
}

// TestAudit140FixedClockSpanOverflowScoreGrows (audit 140; fixed at stop 65, the text below
// says what was wrong): "Time never runs
// backwards: a clock step back counts as zero elapsed time, never as
// growth ... Any idle time, 1 ms to years, decays as int64 stamps would
// (a lazy sweep keeps the 32-bit stamps exact)" (sketch/doc.go). A sketch
// built on a clock reading before 1970 (a FakeClock at time.Unix(-1, 0),
// at 1935, or Set(math.MinInt64)) whose clock later reads near the end of int64 milliseconds
// (FakeClock.Set(math.MaxInt64), where FakeClock saturates by design)
// spans more than 2^63 ms: internal/core/horizon.go:121 computes
// ms - floor, which wraps negative, so the operation is taken as "not
// urgent", no re-base runs, and the 32-bit ages read garbage. Observed:
// after reading 3.68 (10 under Exponential(1) after 1 s), the key reads
// 10 (start 1935) or 3.6825 (start 1969-12-31T23:59:59) with no write in
// between: growth, where the mutex reference reads 0 or 3.68. Expected:
// at most the earlier read (0 for a jump of 292 million years). Fix:
// compare without overflow at horizon.go:121 (d := ms - floor; d >= 0 &&
// d < horizonWindow, or the comparison in uint64), and the same wherever
// ms - floor/epoch is compared.
func TestAudit140FixedClockSpanOverflowScoreGrows(t *testing.T) {
	for _, start := range []time.Time{time.UnixMilli(-1 << 40), time.Unix(-1, 0), time.UnixMilli(math.MinInt64)} {
		clk := sketchtest.NewFakeClock()
		clk.SetTime(start)
		s, err := sketch.New(sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk, Decay: decay.Exponential(1)})
		if err != nil {
			t.Fatal(err)
		}
		gc := grudgetest.NewFakeClock()
		gc.Set(start)
		g, err := grudge.New(grudge.Config{Hi: 100, CellsPerLevel: 16, Clock: gc, Decay: grudge.Exponential(1)})
		if err != nil {
			t.Fatal(err)
		}
		s.UpdateString("k", 10)
		g.Update([]byte("k"), 10)
		clk.Advance(time.Second)
		gc.Advance(time.Second)
		before, gBefore := s.QueryString("k"), g.Query([]byte("k"))
		clk.Set(math.MaxInt64)
		gc.Set(time.UnixMilli(math.MaxInt64))
		if after := s.QueryString("k"); after > before {
			t.Errorf("sketch, start %v: key read %v, then %v after the clock jumped forward to MaxInt64 ms (no write): a score grew", start.UTC(), before, after)
		}
		if after := g.Query([]byte("k")); after > gBefore {
			t.Errorf("grudge.Sketch, start %v: key read %v, then %v after the clock jumped forward to MaxInt64 ms (no write): a score grew", start.UTC(), gBefore, after)
		}
	}
}

// TestAudit140ClockEndsHold: the same jump to the end of int64 ms from a
// start at or after 1970 (the span fits int64) drains the key, in the
// sketch, the rotator and the meters; a start at the end of the range
// counts only the time that passed.
func TestAudit140ClockEndsHold(t *testing.T) {
	for _, start := range []int64{0, 1 << 40, 1 << 62} {
		clk := sketchtest.NewFakeClock()
		clk.Set(start)
		cfg := sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk, Decay: decay.Exponential(1)}
		s, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rotator.New(rotator.Config{Sketch: cfg, Period: 1 << 62})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
		if err != nil {
			t.Fatal(err)
		}
		nv, err := meter.NewNovelty(time.Second, meter.WithClock(clk), meter.WithSize(2, 16))
		if err != nil {
			t.Fatal(err)
		}
		s.UpdateString("k", 10)
		r.UpdateString("k", 10)
		rt.Observe("k")
		nv.Seen("k")
		clk.Set(math.MaxInt64)
		if a, b, c, d := s.QueryString("k"), r.QueryString("k"), rt.PerSecond("k"), nv.Contains("k"); a != 0 || b != 0 || c != 0 || d {
			t.Errorf("start %d, jump to MaxInt64 ms: sketch %v, rotator %v, rate %v, novelty %v; want 0, 0, 0, false", start, a, b, c, d)
		}
	}
	// Near the end: FakeClock saturates, so only 500 ms pass.
	clk := sketchtest.NewFakeClock()
	clk.Set(math.MaxInt64 - 500)
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk}, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.UpdateString("k", 10)
	clk.Advance(time.Hour)
	if got, st := r.QueryString("k"), r.Stats(); got != 10 || st.Periods != 0 {
		t.Errorf("rotator 500 ms before the end of int64 ms: after a saturated Advance reads %v with %d periods; want 10, 0 (only 500 ms passed)", got, st.Periods)
	}
}

// TestAudit140BoundsSpecialValues: Hi and Lo at the float32 and float64
// edges. Accepted bounds are reported as given, every read stays within
// them (capped at Hi; at most rounded toward 0 at Lo), and values past
// the float32 range are a *ConfigError naming the bound, in the native and
// the root package alike.
func TestAudit140BoundsSpecialValues(t *testing.T) {
	for _, hi := range []float64{5e-324, 1e-300, 1e-45, math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32 / 2, 0.1, 1 << 24, math.MaxFloat32} {
		s, err := sketch.New(sketch.Config{Hi: hi, CellsPerLevel: 16, Seed: 140})
		if err != nil {
			t.Errorf("Hi %v: %v", hi, err)
			continue
		}
		if got := s.Config().Hi; math.Float64bits(got) != math.Float64bits(hi) {
			t.Errorf("Hi %v: Config().Hi = %v", hi, got)
		}
		s.UpdateString("k", hi)
		s.UpdateString("k", hi)
		if got := s.QueryString("k"); got != hi {
			t.Errorf("Hi %v: two Updates of Hi read %v, want Hi", hi, got)
		}
		for _, l := range s.QueryDetailed([]byte("k")).Levels {
			if l.Score != hi {
				t.Errorf("Hi %v: level %d reads %v, want Hi", hi, l.Level, l.Score)
			}
		}
		if !s.TryUpdateString("j", hi, hi) || s.TryUpdateString("j", hi, hi) {
			t.Errorf("Hi %v: TryUpdate(Hi, limit Hi) not admitted exactly once", hi)
		}
		g, err := grudge.New(grudge.Config{Hi: hi, CellsPerLevel: 16})
		if err != nil {
			t.Errorf("grudge Hi %v: %v", hi, err)
			continue
		}
		g.Update([]byte("k"), 1)
		if got := g.Query([]byte("k")); got != math.Min(1, hi) {
			t.Errorf("grudge Hi %v: Update(1) reads %v, want %v", hi, got, math.Min(1, hi))
		}
	}
	for _, lo := range []float64{-5e-324, -1e-300, -math.SmallestNonzeroFloat32, -0.1, -1 << 24, -math.MaxFloat32, math.Copysign(0, -1)} {
		s, err := sketch.New(sketch.Config{Lo: lo, Hi: 1, CellsPerLevel: 16})
		if err != nil {
			t.Errorf("Lo %v: %v", lo, err)
			continue
		}
		s.UpdateString("k", -math.MaxFloat32)
		got := s.QueryString("k")
		if got < lo || got > 0 || math.IsNaN(got) {
			t.Errorf("Lo %v: Update(-MaxFloat32) reads %v, want within [Lo, 0]", lo, got)
		}
		// The float32 bound is Lo rounded up (toward 0): the read is Lo
		// itself where a float32 holds it.
		if float64(float32(lo)) == lo && got != lo {
			t.Errorf("Lo %v (a float32): Update(-MaxFloat32) reads %v, want Lo", lo, got)
		}
	}
	above := math.Nextafter(math.MaxFloat32, math.Inf(1))
	for _, c := range []struct {
		name   string
		lo, hi float64
		field  string
	}{
		{"Hi just above MaxFloat32", 0, above, "Hi"},
		{"Hi MaxFloat64", 0, math.MaxFloat64, "Hi"},
		{"Lo just below -MaxFloat32", -above, 1, "Lo"},
		{"Lo -MaxFloat64", -math.MaxFloat64, 1, "Lo"},
		{"Hi -0 Lo 0", 0, math.Copysign(0, -1), "Hi"},
		{"Hi -5e-324", -1, -5e-324, "Hi"},
		{"Lo 5e-324", 5e-324, 1, "Lo"},
	} {
		_, err := sketch.New(sketch.Config{Lo: c.lo, Hi: c.hi, CellsPerLevel: 16})
		if !a140ConfigErr(err, c.field) {
			t.Errorf("%s: sketch.New = %v; want a *ConfigError naming %s", c.name, err, c.field)
		}
		_, err = grudge.New(grudge.Config{Lo: c.lo, Hi: c.hi, CellsPerLevel: 16})
		if !a140ConfigErr(err, c.field) {
			t.Errorf("%s: grudge.New = %v; want a *ConfigError naming %s", c.name, err, c.field)
		}
	}
}

// TestAudit140DecayParamsInSketch: laws with the tiniest and largest
// valid parameters run in a sketch without NaN or growth: a tiny rate
// leaves a score as it is, a huge one drains it in one millisecond, and
// an infinite Hi saturates at MaxFloat32.
func TestAudit140DecayParamsInSketch(t *testing.T) {
	for _, c := range []struct {
		law     decay.Decay
		drained bool // after 1 ms
	}{
		{decay.Exponential(5e-324), false},
		{decay.Exponential(1e-300), false},
		{decay.Exponential(math.MaxFloat32), true},
		{decay.Exponential(1e300), true},
		{decay.Exponential(math.MaxFloat64), true},
		{decay.Linear(5e-324), false},
		{decay.Linear(1e-300), false},
		{decay.Linear(math.MaxFloat64), true},
	} {
		clk := sketchtest.NewFakeClock()
		s, err := sketch.New(sketch.Config{Hi: math.Inf(1), CellsPerLevel: 16, Decay: c.law, Clock: clk})
		if err != nil {
			t.Errorf("%v: %v", c.law, err)
			continue
		}
		s.UpdateString("k", 100)
		s.UpdateString("max", math.MaxFloat64)
		if got := s.QueryString("max"); got != math.MaxFloat32 {
			t.Errorf("%v, Hi +Inf: Update(MaxFloat64) reads %v, want MaxFloat32", c.law, got)
		}
		if got := s.QueryString("k"); got != 100 {
			t.Errorf("%v: at once reads %v, want 100", c.law, got)
		}
		for _, d := range []time.Duration{time.Millisecond, 1000 * time.Hour} {
			clk.Advance(d)
			got := s.QueryString("k")
			switch {
			case math.IsNaN(got) || got < 0 || got > 100:
				t.Errorf("%v: after %v reads %v", c.law, d, got)
			case c.drained && got != 0:
				t.Errorf("%v: after %v reads %v, want 0", c.law, d, got)
			case !c.drained && got != 100:
				t.Errorf("%v: after %v reads %v, want 100 (the drain is below a float32 step)", c.law, d, got)
			}
		}
	}
}

// TestAudit140RotatorPeriodValues: Period is "counted in whole ms rounded
// up (2.9 ms is 3)" and a score "lives at most Generations x Period after
// its last write": with N = 2 a write at 0 is read until 2 x ceil(Period)
// ms and gone then. Config reports the Period as given. Very long periods
// (2^62 ns, MaxInt64) are accepted and never rotate within 1000 days.
func TestAudit140RotatorPeriodValues(t *testing.T) {
	for _, c := range []struct {
		period time.Duration
		ms     int64 // ceil(period) in ms
	}{
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{1500 * time.Microsecond, 2},
		{2900 * time.Microsecond, 3},
		{time.Second - 1, 1000},
	} {
		for _, face := range []string{"rotator", "grudge"} {
			var upd func()
			var read func() float64
			var set func(int64)
			var cfgPeriod time.Duration
			if face == "rotator" {
				clk := sketchtest.NewFakeClock()
				r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk}, Period: c.period})
				if err != nil {
					t.Fatalf("Period %v: %v", c.period, err)
				}
				upd, read, set, cfgPeriod = func() { r.UpdateString("k", 1) }, func() float64 { return r.QueryString("k") }, clk.Set, r.Config().Period
			} else {
				gc := grudgetest.NewFakeClock()
				r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100, CellsPerLevel: 16, Clock: gc}, Period: c.period})
				if err != nil {
					t.Fatalf("grudge Period %v: %v", c.period, err)
				}
				upd, read, cfgPeriod = func() { r.Update([]byte("k"), 1) }, func() float64 { return r.Query([]byte("k")) }, r.Native().Config().Period
				set = func(ms int64) { gc.Set(time.UnixMilli(ms)) }
			}
			a140Lifetime(t, face, c.period, c.ms, upd, read, set)
			if cfgPeriod != c.period {
				t.Errorf("%s Period %v: Config().Period = %v, want as given", face, c.period, cfgPeriod)
			}
		}
	}
	for _, p := range []time.Duration{1 << 62, math.MaxInt64} {
		clk := sketchtest.NewFakeClock()
		r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 100, CellsPerLevel: 16, Clock: clk}, Period: p, Generations: 1024})
		if err != nil {
			t.Fatalf("Period %v: %v", p, err)
		}
		r.UpdateString("k", 1)
		clk.Advance(1000 * 24 * time.Hour)
		if got, st := r.QueryString("k"), r.Stats(); got != 1 || st.Periods != 0 {
			t.Errorf("Period %v: after 1000 days reads %v with %d periods; want 1, 0", p, got, st.Periods)
		}
	}
}

// a140Lifetime writes at 0 and checks the key is read at 2*ms-1 and gone
// at 2*ms (two generations).
func a140Lifetime(t *testing.T, face string, period time.Duration, ms int64, upd func(), read func() float64, set func(int64)) {
	t.Helper()
	set(0)
	upd()
	set(2*ms - 1)
	if got := read(); got != 1 {
		t.Errorf("%s Period %v: at %d ms (before 2 x %d ms) reads %v, want 1", face, period, 2*ms-1, ms, got)
	}
	set(2 * ms)
	if got := read(); got != 0 {
		t.Errorf("%s Period %v: at %d ms (2 x %d ms) reads %v, want 0", face, period, 2*ms, ms, got)
	}
}

// TestAudit140AtOddTimes: the At forms of sketch and rotator at the zero
// time.Time and at times far before and after the clock: no panic, no NaN;
// a time ahead of the clock is the clock's reading, one behind counts no
// time; every write counts.
func TestAudit140AtOddTimes(t *testing.T) {
	times := []time.Time{{}, time.Unix(0, math.MaxInt64), time.Unix(math.MaxInt64, 0), time.Unix(math.MinInt64, 0), time.Unix(1<<40, 0), time.Unix(-1<<40, 0)}
	for _, tm := range times {
		clk := sketchtest.NewFakeClock()
		clk.Set(1e12)
		cfg := sketch.Config{Hi: 1000, CellsPerLevel: 16, Clock: clk, Decay: decay.Exponential(1)}
		s, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rotator.New(rotator.Config{Sketch: cfg, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range []interface {
			UpdateString(string, float64)
			UpdateAt(time.Time, string, float64)
			QueryAt(time.Time, string) float64
			QueryString(string) float64
			TryUpdateAt(time.Time, string, float64, float64) bool
			UpdateAndQueryAt(time.Time, string, float64) float64
		}{s, r} {
			sc.UpdateString("k", 10)
			sc.UpdateAt(tm, "k", 10)
			if got := sc.QueryAt(tm, "k"); got != 20 {
				t.Errorf("%T t=%v: QueryAt after 10+10 at the same clock ms = %v, want 20", sc, tm, got)
			}
			if !sc.TryUpdateAt(tm, "k", 1, 21) || sc.TryUpdateAt(tm, "k", 1, 21) {
				t.Errorf("%T t=%v: TryUpdateAt(1, 21) not admitted exactly once", sc, tm)
			}
			if got := sc.UpdateAndQueryAt(tm, "k", 1); got != 22 {
				t.Errorf("%T t=%v: UpdateAndQueryAt = %v, want 22", sc, tm, got)
			}
			clk.Advance(time.Second)
			if got, want := sc.QueryString("k"), 22*math.Exp(-1); math.IsNaN(got) || got < want || got > want*(1+1e-6) {
				t.Errorf("%T t=%v: a second later reads %v, want %v", sc, tm, got, want)
			}
			clk.Advance(-time.Second)
		}
	}
}

// TestAudit140SuggestLevelsSweep: the root SuggestLevels refuses
// degenerate inputs (hotKeys or cellsPerLevel 0, targetP NaN, <= 0, >= 1,
// ±Inf, -0) with an error naming the argument, and otherwise agrees with
// sketch.SuggestLevels, which answers 1..8 for anything (0 cells: the
// default 100,000; no hot keys: 1; NaN: 8).
func TestAudit140SuggestLevelsSweep(t *testing.T) {
	targets := []float64{5e-324, 1e-300, 0.01, math.Nextafter(1, 0), 0, math.Copysign(0, -1), -1, 1, 2, math.Inf(1), math.Inf(-1), math.NaN()}
	for _, h := range []uint32{0, 1, 1000, math.MaxUint32} {
		for _, m := range []uint32{0, 1, 2, 100_000, math.MaxUint32} {
			for _, p := range targets {
				got, err := grudge.SuggestLevels(h, m, p)
				native := sketch.SuggestLevels(h, m, p)
				if native < 1 || native > sketch.MaxLevels {
					t.Errorf("sketch.SuggestLevels(%d, %d, %v) = %d, want 1..8", h, m, p, native)
				}
				degenerate := h == 0 || m == 0 || !(p > 0 && p < 1)
				switch {
				case degenerate && (err == nil || got != 0 || !strings.HasPrefix(err.Error(), "grudge: SuggestLevels: ")):
					t.Errorf("grudge.SuggestLevels(%d, %d, %v) = %d, %v; want 0 and an error", h, m, p, got, err)
				case !degenerate && (err != nil || got != native):
					t.Errorf("grudge.SuggestLevels(%d, %d, %v) = %d, %v; want %d (the native answer)", h, m, p, got, err, native)
				}
			}
		}
	}
	for _, c := range []struct {
		h, m uint32
		p    float64
		want uint32
	}{
		{0, 16, 0.5, 1},                       // no hot keys
		{1, 16, math.NaN(), sketch.MaxLevels}, // NaN target
		{1, 1, 0.5, sketch.MaxLevels},         // one cell: every key collides
		{1, 1, 1, 1},                          // a target of 1 is met by L = 1
		{1, 0, 1e-5, 1},                       // 0 cells means 100,000: 1e-5 per level
		{1, 0, 1e-10, 2},
	} {
		if got := sketch.SuggestLevels(c.h, c.m, c.p); got != c.want {
			t.Errorf("sketch.SuggestLevels(%d, %d, %v) = %d, want %d", c.h, c.m, c.p, got, c.want)
		}
	}
}

// TestAudit140FixedRotationsWrapsNegative (audit 140; fixed at stop 65, the text below
// says what was wrong): Rotator.Rotations "returns the
// number of rotations so far ... counts the periods that elapsed (a clock
// jump over k periods counts k, as k ticks would have)" (rotator.go:130-134).
// It returns int64(Stats().Periods) (rotator.go:139), and Periods is a
// uint64 that the native rotator counts correctly past 2^63 (a 1 ms
// Period over a clock span beyond 2^63 ms: a grudgetest.FakeClock set to
// the zero time.Time, then to the far future, where it saturates by
// design). Observed: Rotations() is negative (the uint64 count wrapped
// into int64). Expected: a count >= 0 (saturated at MaxInt64). Fix:
// rotator.go:139, return min(Periods, math.MaxInt64) as int64.
func TestAudit140FixedRotationsWrapsNegative(t *testing.T) {
	gc := grudgetest.NewFakeClock()
	gc.Set(time.Time{})
	rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1, CellsPerLevel: 16, Clock: gc}, Period: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rot.Close()
	gc.Set(time.UnixMilli(math.MaxInt64))
	got := rot.Rotations()
	native := rot.Native().Stats().Periods
	if got < 0 {
		t.Errorf("Rotations() = %d after the clock moved from the zero time.Time to the end of int64 ms with a 1 ms Period (native Periods %d); want a count >= 0", got, native)
	}
}

// a140Ticker is a Ticker whose C returns ch (nil, or closed).
type a140Ticker struct {
	ch      chan time.Time
	stopped int
}

func (k *a140Ticker) C() <-chan time.Time { return k.ch }
func (k *a140Ticker) Stop()               { k.stopped++ }

// TestAudit140TickerOddChannels: a Ticker whose C is nil never rotates and
// Close still returns (stopping it once); one whose C is closed ends the
// tick goroutine at once, and Close still stops it once. Period with a
// Ticker takes any value >= 0 (0, 1 ns, MaxInt64); operations work after
// Close.
func TestAudit140TickerOddChannels(t *testing.T) {
	closed := make(chan time.Time)
	close(closed)
	for _, c := range []struct {
		name   string
		ch     chan time.Time
		period time.Duration
	}{
		{"nil channel, Period 0", nil, 0},
		{"closed channel, Period 1ns", closed, 1},
		{"nil channel, Period MaxInt64", nil, math.MaxInt64},
	} {
		tk := &a140Ticker{ch: c.ch}
		rot, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 10, CellsPerLevel: 16}, Period: c.period, Ticker: tk})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		rot.Update([]byte("k"), 1)
		rot.Close()
		rot.Close()
		if tk.stopped != 1 || rot.Rotations() != 0 {
			t.Errorf("%s: Stop called %d times, %d rotations; want 1, 0", c.name, tk.stopped, rot.Rotations())
		}
		rot.Update([]byte("k"), 1)
		if got := rot.Query([]byte("k")); got != 2 {
			t.Errorf("%s: after Close reads %v, want 2", c.name, got)
		}
	}
}

// a140LenHasher is a user Hasher (the root package's Hash64 interface).
type a140LenHasher struct{}

func (a140LenHasher) Hash64(k []byte) uint64 { return uint64(len(k)) * 0x9e3779b97f4a7c15 }

// TestAudit140RootKeysEmptyAndLong: nil, empty and 1 MiB keys through the
// root faces, under each hasher (Murmur3, SipHash, a user's): the []byte
// forms and the native string forms agree, and writes land.
func TestAudit140RootKeysEmptyAndLong(t *testing.T) {
	huge := strings.Repeat("\xff", 1<<20)
	for _, h := range []struct {
		name string
		f    grudge.HasherFactory
	}{
		{"Murmur3", grudge.Murmur3()},
		{"SipHash", grudge.SipHash()},
		{"user", func(uint64) grudge.Hasher { return a140LenHasher{} }},
	} {
		s, err := grudge.New(grudge.Config{Hi: 100, CellsPerLevel: 64, Hasher: h.f})
		if err != nil {
			t.Fatal(err)
		}
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100, CellsPerLevel: 64, Hasher: h.f}, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []struct {
			name string
			b    []byte
			s    string
		}{{"nil", nil, ""}, {"empty", []byte{}, ""}, {"1MiB", []byte(huge), huge}} {
			before := s.Query(k.b)
			s.Update(k.b, 2)
			r.Update(k.b, 2)
			if got := s.Query(k.b); got < before+2 {
				t.Errorf("%s %s key: Sketch reads %v after +2 from %v", h.name, k.name, got, before)
			}
			if a, b := s.Query(k.b), s.Native().QueryString(k.s); a != b {
				t.Errorf("%s %s key: Sketch Query %v, native QueryString %v", h.name, k.name, a, b)
			}
			if a, b := r.Query(k.b), r.Native().QueryString(k.s); a != b || a < 2 {
				t.Errorf("%s %s key: Rotator Query %v, native QueryString %v (want equal, >= 2)", h.name, k.name, a, b)
			}
			if d := s.QueryDetailed(k.b); len(d.LevelScores) != 4 || len(d.CellIndexes) != 4 || d.Aggregate != s.Query(k.b) {
				t.Errorf("%s %s key: QueryDetailed %+v, want 4 levels and the Query", h.name, k.name, d)
			}
		}
	}
}
