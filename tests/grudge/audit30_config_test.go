package grudge_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
)

// audit30Field checks that err is a *grudge.ConfigError naming field and
// matching ErrInvalidConfig, with the field named in its text.
func audit30Field(t *testing.T, name string, err error, field string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: expected an error naming %q, got nil", name, field)
		return
	}
	if !errors.Is(err, grudge.ErrInvalidConfig) {
		t.Errorf("%s: errors.Is(err, ErrInvalidConfig) false: %v", name, err)
	}
	var ce *grudge.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("%s: not a *ConfigError: %T %v", name, err, err)
		return
	}
	if ce.Field != field {
		t.Errorf("%s: Field = %q, want %q (%v)", name, ce.Field, field, err)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("%s: message %q does not name %q", name, err.Error(), field)
	}
}

func TestAudit30ConfigErrorsNameField(t *testing.T) {
	inf := math.Inf(1)
	nan := math.NaN()
	cases := []struct {
		name  string
		cfg   grudge.Config
		field string
	}{
		{"Levels9", grudge.Config{Levels: 9, Hi: 1}, "Levels"},
		{"LevelsMax", grudge.Config{Levels: math.MaxUint32, Hi: 1}, "Levels"},
		{"CellsHuge", grudge.Config{CellsPerLevel: math.MaxUint32, Hi: 1}, "CellsPerLevel"},
		{"ZeroConfig", grudge.Config{}, "Hi"},
		{"LoPositive", grudge.Config{Lo: 1, Hi: 2}, "Lo"},
		{"HiNegative", grudge.Config{Lo: -2, Hi: -1}, "Hi"},
		{"LoEqHi", grudge.Config{Lo: -1, Hi: -1}, "Hi"},
		{"LoAboveHi", grudge.Config{Lo: 1, Hi: -1}, "Hi"},
		{"LoNaN", grudge.Config{Lo: nan, Hi: 1}, "Lo"},
		{"HiNaN", grudge.Config{Lo: 0, Hi: nan}, "Hi"},
		{"HiInfNone", grudge.Config{Hi: inf}, "Hi"},
		{"HiInfNoneValue", grudge.Config{Hi: inf, Decay: grudge.None}, "Hi"},
		{"HiInfNoneCall", grudge.Config{Hi: inf, Decay: grudge.None()}, "Hi"},
		{"LoMinusInfNone", grudge.Config{Lo: -inf, Hi: 1}, "Lo"},
		{"HiMinusInf", grudge.Config{Lo: -inf, Hi: -inf, Decay: grudge.Linear(1)}, "Hi"},
		{"LoPlusInf", grudge.Config{Lo: inf, Hi: inf, Decay: grudge.Linear(1)}, "Hi"},
		{"HiBeyondFloat32", grudge.Config{Hi: 1e39}, "Hi"},
		{"LoBeyondFloat32", grudge.Config{Lo: -1e39, Hi: 1}, "Lo"},
		{"ExpZero", grudge.Config{Hi: 1, Decay: grudge.Exponential(0)}, "Decay"},
		{"ExpNegative", grudge.Config{Hi: 1, Decay: grudge.Exponential(-1)}, "Decay"},
		{"ExpNaN", grudge.Config{Hi: 1, Decay: grudge.Exponential(nan)}, "Decay"},
		{"ExpInf", grudge.Config{Hi: 1, Decay: grudge.Exponential(inf)}, "Decay"},
		{"LinZero", grudge.Config{Hi: 1, Decay: grudge.Linear(0)}, "Decay"},
		{"LinNegative", grudge.Config{Hi: 1, Decay: grudge.Linear(-3)}, "Decay"},
		{"LinNaN", grudge.Config{Hi: 1, Decay: grudge.Linear(nan)}, "Decay"},
		{"LinInf", grudge.Config{Hi: 1, Decay: grudge.Linear(inf)}, "Decay"},
	}
	for _, c := range cases {
		s, err := grudge.New(c.cfg)
		if s != nil {
			t.Errorf("%s: New returned a sketch with the error %v", c.name, err)
		}
		audit30Field(t, c.name, err, c.field)
		if err != nil && !strings.HasPrefix(err.Error(), "sketch: ") {
			t.Errorf("%s: %q lacks the prefix \"sketch: \"", c.name, err)
		}
		// The same Config inside a RotatorConfig fails the same way.
		r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: c.cfg, Period: time.Second})
		if r != nil {
			r.Close()
			t.Errorf("%s: NewRotator returned a rotator", c.name)
		}
		audit30Field(t, c.name+"/rotator", err, c.field)
	}

	rcases := []struct {
		name  string
		cfg   grudge.RotatorConfig
		field string
	}{
		{"Gen1", grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Generations: 1, Period: time.Second}, "Generations"},
		{"Gen1025", grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Generations: 1025, Period: time.Second}, "Generations"},
		{"PeriodZero", grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}}, "Period"},
		{"PeriodNegative", grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: -time.Second}, "Period"},
		{"PeriodSubMs", grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Period: 999 * time.Microsecond}, "Period"},
	}
	for _, c := range rcases {
		r, err := grudge.NewRotator(c.cfg)
		if r != nil {
			r.Close()
		}
		audit30Field(t, c.name, err, c.field)
		if err != nil && !strings.HasPrefix(err.Error(), "rotator: ") {
			t.Errorf("%s: %q lacks the prefix \"rotator: \"", c.name, err)
		}
	}
}

func TestAudit30ConfigAccepts(t *testing.T) {
	inf := math.Inf(1)
	ok := []grudge.Config{
		{Hi: 1},
		{Lo: -1},
		{Lo: -1, Hi: 0},
		{Levels: 8, CellsPerLevel: 1, Hi: 1},
		{Levels: 1, CellsPerLevel: 1, Hi: 1},
		{Hi: inf, Decay: grudge.Linear(1)},
		{Hi: inf, Decay: grudge.Exponential(1)},
		{Lo: -inf, Hi: inf, Decay: grudge.Exponential(1)},
		{Hi: math.MaxFloat32},
		{Lo: -math.MaxFloat32, Hi: math.MaxFloat32},
		{Hi: 1, Decay: grudge.None},
		{Hi: 1, Decay: grudge.None()},
		{Hi: 1, Aggregator: func(s []float64) float64 { return s[0] }},
		{Hi: 1, Hasher: grudge.SipHash()},
		{Hi: 1, Hasher: grudge.Murmur3()},
		{Hi: 1, Clock: grudgetest.NewFakeClock()},
	}
	for i, c := range ok {
		if _, err := grudge.New(c); err != nil {
			t.Errorf("case %d: New(%+v) = %v, want nil", i, c, err)
		}
	}
	// With a Ticker, Period is optional.
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 1}, Ticker: tk})
	if err != nil {
		t.Fatalf("NewRotator with a Ticker and no Period: %v", err)
	}
	r.Close()
	if !tk.Stopped() {
		t.Errorf("Close did not stop the ticker")
	}
}

// Defaults as documented: Levels 0 means 4, CellsPerLevel 0 means 100,000,
// Generations 0 means 2, Aggregator nil means Min, Decay nil means None.
func TestAudit30Defaults(t *testing.T) {
	clk := grudgetest.NewFakeClock()
	s, err := grudge.New(grudge.Config{Hi: 100, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Native().Config()
	if c.Levels != 4 || c.CellsPerLevel != 100_000 {
		t.Errorf("defaults: Levels=%d CellsPerLevel=%d, want 4 and 100000", c.Levels, c.CellsPerLevel)
	}
	k := []byte("k")
	s.Update(k, 7)
	clk.Advance(1000 * 24 * time.Hour)
	d := s.QueryDetailed(k)
	if len(d.LevelScores) != 4 || len(d.CellIndexes) != 4 {
		t.Fatalf("QueryDetailed lens %d %d, want 4", len(d.LevelScores), len(d.CellIndexes))
	}
	if d.Aggregate != 7 {
		t.Errorf("nil Decay: score after 1000 days = %v, want 7 (None)", d.Aggregate)
	}
	for _, ix := range d.CellIndexes {
		if ix >= 100_000 {
			t.Errorf("cell index %d >= 100000", ix)
		}
	}
	// Generations 0 means 2: a write survives one tick, not two.
	tk := grudgetest.NewFakeTicker()
	r, err := grudge.NewRotator(grudge.RotatorConfig{Sketch: grudge.Config{Hi: 100}, Ticker: tk})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Update(k, 3)
	tk.Tick()
	if got := r.Query(k); got != 3 {
		t.Errorf("after 1 tick of 2 generations: %v, want 3", got)
	}
	tk.Tick()
	if got := r.Query(k); got != 0 {
		t.Errorf("after 2 ticks of 2 generations: %v, want 0", got)
	}
	if got := r.Rotations(); got != 2 {
		t.Errorf("Rotations = %d, want 2", got)
	}
}

// A HasherFactory that returns a nil Hasher is an invalid Hasher: New
// accepts it and the first operation panics with a nil dereference.
func TestAudit30FixedNilHasherAccepted(t *testing.T) {
	cfg := grudge.Config{Hi: 1, Hasher: func(uint64) grudge.Hasher { return nil }}
	s, err := grudge.New(cfg)
	if err != nil {
		audit30Field(t, "nil Hasher", err, "Hasher")
		return
	}
	var p any
	func() {
		defer func() { p = recover() }()
		s.Update([]byte("k"), 1)
	}()
	t.Errorf("HasherFactory returning a nil Hasher: expected New to fail with a *ConfigError naming \"Hasher\" "+
		"(docs/migrating.md: \"invalid configs are errors naming the field\"); got err=nil from New, then Update panicked: %v", p)
}
