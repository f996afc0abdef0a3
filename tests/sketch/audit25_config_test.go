package sketch_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 25: sketch.Config at its edges. Contract (sketch/config.go,
// sketch/doc.go, API.md): every Config is either accepted with its
// documented meaning or refused with a *ConfigError naming the field,
// matched by errors.Is(err, ErrInvalidConfig) — never a panic at New, and
// an accepted sketch never answers NaN/Inf, never reads above Hi, and
// (Min, non-negative deltas) never below the reference's truth.

var a25NegZero = math.Copysign(0, -1)

type a25Cfg struct {
	name  string
	cfg   sketch.Config
	field string // "" = accepted
}

func a25ConfigCases() []a25Cfg {
	exp := decay.Exponential(math.Ln2)
	lin := decay.Linear(10)
	maxF32Up := math.Nextafter(math.MaxFloat32, math.Inf(1))
	return []a25Cfg{
		{"zero", sketch.Config{}, "Hi"},
		{"L0 default", sketch.Config{Levels: 0, CellsPerLevel: 16, Hi: 100}, ""},
		{"L1", sketch.Config{Levels: 1, CellsPerLevel: 16, Hi: 100}, ""},
		{"L8 max", sketch.Config{Levels: 8, CellsPerLevel: 16, Hi: 100}, ""},
		{"L9", sketch.Config{Levels: 9, CellsPerLevel: 16, Hi: 100}, "Levels"},
		{"L maxuint32", sketch.Config{Levels: math.MaxUint32, CellsPerLevel: 16, Hi: 100}, "Levels"},
		{"M1", sketch.Config{Levels: 2, CellsPerLevel: 1, Hi: 100}, ""},
		{"M0 default", sketch.Config{Levels: 1, CellsPerLevel: 0, Hi: 100}, ""},
		{"M max over MaxBytes", sketch.Config{Levels: 1, CellsPerLevel: sketch.MaxCellsPerLevel, Hi: 100}, "CellsPerLevel"},
		{"M max+1", sketch.Config{Levels: 1, CellsPerLevel: sketch.MaxCellsPerLevel + 1, Hi: 100}, "CellsPerLevel"},
		{"M maxuint32", sketch.Config{Levels: 1, CellsPerLevel: math.MaxUint32, Hi: 100}, "CellsPerLevel"},
		{"MaxBytes -1", sketch.Config{Levels: 1, CellsPerLevel: 16, Hi: 100, MaxBytes: -1}, "MaxBytes"},
		{"MaxBytes MinInt64", sketch.Config{Levels: 1, CellsPerLevel: 16, Hi: 100, MaxBytes: math.MinInt64}, "MaxBytes"},
		{"MaxBytes 1", sketch.Config{Levels: 1, CellsPerLevel: 16, Hi: 100, MaxBytes: 1}, "CellsPerLevel"},
		{"MaxBytes MaxInt64", sketch.Config{Levels: 1, CellsPerLevel: 16, Hi: 100, MaxBytes: math.MaxInt64}, ""},
		{"Seed max", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Seed: math.MaxUint64}, ""},
		{"Lo=Hi=0", sketch.Config{Levels: 2, CellsPerLevel: 16}, "Hi"},
		{"Lo=-0 Hi=0", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: a25NegZero}, "Hi"},
		{"Lo=0 Hi=-0", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: a25NegZero}, "Hi"},
		{"Lo=-0 Hi=1", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: a25NegZero, Hi: 1}, ""},
		{"Lo=-1 Hi=-0", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -1, Hi: a25NegZero}, ""},
		{"Lo=-1 Hi=0", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -1}, ""},
		{"Lo>Hi", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: 0, Hi: -1}, "Hi"},
		{"Lo==Hi==5", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: 5, Hi: 5}, "Hi"},
		{"Lo=1 Hi=2", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: 1, Hi: 2}, "Lo"},
		{"Hi NaN", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.NaN()}, "Hi"},
		{"Lo NaN", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.NaN(), Hi: 1}, "Lo"},
		{"Hi +Inf none", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.Inf(1)}, "Hi"},
		{"Hi -Inf", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.Inf(-1), Hi: math.Inf(-1), Decay: exp}, "Hi"},
		{"Lo +Inf", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.Inf(1), Hi: math.Inf(1), Decay: exp}, "Hi"},
		{"Hi +Inf exp", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.Inf(1), Decay: exp}, ""},
		{"Lo -Inf lin", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.Inf(-1), Hi: 1, Decay: lin}, ""},
		{"Lo -Inf none", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.Inf(-1), Hi: 1}, "Lo"},
		{"Hi MaxFloat32", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.MaxFloat32}, ""},
		{"Hi above MaxFloat32", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: maxF32Up}, "Hi"},
		{"Hi MaxFloat64", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.MaxFloat64}, "Hi"},
		{"Lo -MaxFloat32", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -math.MaxFloat32, Hi: 1}, ""},
		{"Lo below -MaxFloat32", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -maxF32Up, Hi: 1}, "Lo"},
		{"Hi 5e-324", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 5e-324}, ""},
		{"Hi 1e-40", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e-40}, ""},
		{"Lo -5e-324", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -5e-324, Hi: 1}, ""},
		{"Aggregator 3", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Aggregator: 3}, "Aggregator"},
		{"Aggregator 255", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Aggregator: 255}, "Aggregator"},
		{"exp 0", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Decay: decay.Exponential(0)}, "Decay"},
		{"exp -0", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Decay: decay.Exponential(a25NegZero)}, "Decay"},
		{"exp NaN", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Decay: decay.Exponential(math.NaN())}, "Decay"},
		{"lin -Inf", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Decay: decay.Linear(math.Inf(-1))}, "Decay"},
		{"lin -5e-324", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1, Decay: decay.Linear(-5e-324)}, "Decay"},
		{"exp 5e-324 Hi Inf", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.Inf(1), Decay: decay.Exponential(5e-324)}, ""},
		{"exp Max", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -1e30, Hi: 1e30, Decay: decay.Exponential(math.MaxFloat64)}, ""},
		{"lin Max", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.Inf(-1), Hi: math.Inf(1), Decay: decay.Linear(math.MaxFloat64)}, ""},
		{"lin 5e-324", sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: math.Inf(-1), Hi: math.Inf(1), Decay: decay.Linear(5e-324)}, ""},
		{"lin 1e-300 huge Hi", sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: math.MaxFloat32, Decay: decay.Linear(1e-300)}, ""},
	}
}

// a25New calls sketch.New, turning a panic into a test failure.
func a25New(t *testing.T, name string, cfg sketch.Config) (s *sketch.Sketch, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s: sketch.New panicked: %v", name, p)
			s, err = nil, errors.New("panicked")
		}
	}()
	return sketch.New(cfg)
}

// TestAudit25ConfigEdges: each edge Config is accepted or refused with a
// *ConfigError on the documented field, never a panic; the reference
// agrees on the verdict and the message.
func TestAudit25ConfigEdges(t *testing.T) {
	for _, c := range a25ConfigCases() {
		s, err := a25New(t, c.name, c.cfg)
		if c.field == "" {
			if err != nil || s == nil {
				t.Errorf("%s: New = %v; want accepted", c.name, err)
			}
		} else {
			var ce *sketch.ConfigError
			switch {
			case err == nil:
				t.Errorf("%s: New accepted; want a ConfigError on %s", c.name, c.field)
			case !errors.As(err, &ce) || !errors.Is(err, sketch.ErrInvalidConfig):
				t.Errorf("%s: New = %T %v; want a *sketch.ConfigError", c.name, err, err)
			case ce.Field != c.field || !strings.HasPrefix(err.Error(), "sketch: "):
				t.Errorf("%s: ConfigError Field %q (%v); want %q and a \"sketch: \" prefix", c.name, ce.Field, err, c.field)
			}
		}
		if _, rerr := reference.New(c.cfg); (rerr == nil) != (err == nil) || (err != nil && rerr.Error() != err.Error()) {
			t.Errorf("%s: reference.New = %v; sketch.New = %v", c.name, rerr, err)
		}
	}
}

// TestAudit25AcceptedEdgesBehave: every accepted edge Config, driven
// through writes, decays over idle times from 1 ms to years, TryUpdate
// and Merge, never answers NaN or ±Inf, never reads above Hi or below
// Lo's float32 (rounded up), and with Min and non-negative deltas never
// below the reference (float64 cells) fed the same history.
func TestAudit25AcceptedEdgesBehave(t *testing.T) {
	steps := []time.Duration{0, time.Millisecond, time.Second, time.Hour, 30 * 24 * time.Hour, 2 * 365 * 24 * time.Hour}
	keys := []string{"a", "b", "c", "d", "e"}
	for _, c := range a25ConfigCases() {
		if c.field != "" {
			continue
		}
		clk := sketchtest.NewFakeClock()
		clk.Set(1<<32 - 5000) // straddle the 2^32 ms stamp wrap early
		cfg := c.cfg
		cfg.Clock = clk
		if cfg.CellsPerLevel == 0 {
			cfg.CellsPerLevel = 16 // keep the default-M case small below
			if cfg.Levels != 1 {
				continue
			}
		}
		s := mustNewSketch(t, cfg)
		// The documented saturation: an infinite bound works as
		// ±MaxFloat32 here (the reference's float64 cells at ±MaxFloat64),
		// so the truth is the reference with the bounds at ±MaxFloat32.
		rcfg := cfg
		rcfg.Lo, rcfg.Hi = max(cfg.Lo, -math.MaxFloat32), min(cfg.Hi, math.MaxFloat32)
		r := mustNewReference(t, rcfg)
		lo, hi := cfg.Lo, cfg.Hi
		check := func(where string, k string, v float64) {
			t.Helper()
			if math.IsNaN(v) || math.IsInf(v, 0) || v > hi || v < min(lo, 0)-1e-300 && !math.IsInf(lo, -1) {
				t.Errorf("%s: %s(%s) = %v outside [%v, %v] or not finite", c.name, where, k, v, lo, hi)
			}
		}
		deltas := []float64{1, 0.1, 1e6, math.MaxFloat32, math.MaxFloat64, 5e-324, 0}
		for i, st := range steps {
			clk.Advance(st)
			for j, k := range keys {
				d := deltas[(i+j)%len(deltas)]
				s.UpdateString(k, d)
				r.UpdateString(k, d)
				check("UpdateAndQuery", k, s.UpdateAndQueryString(k, 0))
				r.UpdateAndQueryString(k, 0)
				lim := min(hi, math.MaxFloat64)
				s.TryUpdateString(k, d, lim)
				r.TryUpdateString(k, d, lim)
				got, want := s.QueryString(k), r.QueryString(k)
				check("Query", k, got)
				for _, l := range s.QueryDetailed([]byte(k)).Levels {
					check("QueryDetailed level", k, l.Score)
				}
				if got < want && cfg.Aggregator == sketch.Min {
					t.Errorf("%s: after step %v Query(%s) = %v below the reference %v", c.name, st, k, got, want)
				}
			}
		}
		// Merge of a twin: finite, bounded.
		s2 := mustNewSketch(t, cfg)
		s2.UpdateString("a", 3)
		if err := s.Merge(s2, time.Hour); err != nil {
			t.Errorf("%s: Merge: %v", c.name, err)
		}
		for _, k := range keys {
			check("Query after Merge", k, s.QueryString(k))
		}
		// Negative deltas: never below the (rounded-up) Lo.
		for _, k := range keys {
			s.UpdateString(k, -math.MaxFloat64)
			check("Query after -Max", k, s.QueryString(k))
		}
	}
}

// TestAudit25TinyHiReadsCapped: a Hi no float32 holds, down to the
// smallest float64 subnormal, is stored rounded up and read back capped at
// Hi by every read, and TryUpdate(k, 0, Hi) admits a key at the clamp
// (docs/precision.md, "Reads capped at Hi").
func TestAudit25TinyHiReadsCapped(t *testing.T) {
	for _, hi := range []float64{5e-324, 1e-310, 1e-40, 1e-45, 0.1, math.Nextafter(math.MaxFloat32, 0) + 1e22} {
		for _, agg := range allAggregators {
			clk := sketchtest.NewFakeClock()
			s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Hi: hi, Aggregator: agg, Clock: clk})
			s.UpdateString("k", math.MaxFloat64)
			if v := s.QueryString("k"); v != hi {
				t.Errorf("Hi=%v %v: Query = %v; want Hi", hi, agg, v)
			}
			if v := s.UpdateAndQueryString("k", 1); v != hi {
				t.Errorf("Hi=%v %v: UpdateAndQuery = %v; want Hi", hi, agg, v)
			}
			for _, l := range s.QueryDetailed([]byte("k")).Levels {
				if l.Score != hi {
					t.Errorf("Hi=%v %v: level %d = %v; want Hi", hi, agg, l.Level, l.Score)
				}
			}
			if !s.TryUpdateString("k", 0, hi) {
				t.Errorf("Hi=%v %v: TryUpdate(k, 0, Hi) denied a key at Hi", hi, agg)
			}
			if s.TryUpdateString("k", 0, math.Nextafter(hi, 0)) {
				t.Errorf("Hi=%v %v: TryUpdate(k, 0, below Hi) admitted a key at Hi", hi, agg)
			}
		}
	}
}

// TestAudit25FixedSnapshotSignedZeroBound: Lo: 0 and Lo: -0 are the same
// Config (== compares them equal, every operation behaves the same), yet
// a snapshot or Merge between two such sketches is refused as "another
// configuration" (ErrSnapshotMismatch on Lo), because the header check
// compares the bounds' bit patterns. sketch/doc.go: snapshots "refuse
// another configuration"; the same configuration should load.
func TestAudit25FixedSnapshotSignedZeroBound(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	a := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: 0, Hi: 10, Clock: clk})
	b := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: a25NegZero, Hi: 10, Clock: clk})
	if a.Config().Lo != b.Config().Lo {
		t.Fatal("Lo 0 and -0 compare unequal?")
	}
	a.UpdateString("k", 5)
	data, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UnmarshalBinary(data); err != nil {
		t.Errorf("UnmarshalBinary of a Lo: 0 snapshot into a Lo: -0 sketch: %v; want it restored (same configuration)", err)
	}
	if err := b.Merge(a); err != nil {
		t.Errorf("Merge of a Lo: 0 sketch into a Lo: -0 sketch: %v; want it merged (same configuration)", err)
	}
	// Same with Hi = -0 (Lo < 0).
	c := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -10, Hi: 0, Clock: clk})
	d := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Lo: -10, Hi: a25NegZero, Clock: clk})
	if err := d.Merge(c); err != nil {
		t.Errorf("Merge of a Hi: 0 sketch into a Hi: -0 sketch: %v; want it merged (same configuration)", err)
	}
}
