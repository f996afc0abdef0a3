package sketch_test

// Audit 54: a systematic sweep of shared/API.md, sections "decay",
// "sketch", "sketch/reference" and "sketch/sketchtest". Each test quotes
// the promise it checks and drives every implementation API.md says has
// the same semantics (sketch.New, rotator.New, reference.New,
// reference.NewRotator) through the public API only.

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a54Impl struct {
	name string
	make func(t testing.TB, cfg sketch.Config) sketch.Scorer
}

// a54Impls: the four Scorers of API.md. The rotators get a long period so
// no rotation happens within a test unless the clock is moved past it.
func a54Impls() []a54Impl {
	return []a54Impl{
		{"sketch", func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			s, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"rotator", func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: 2, Period: 1000 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			return r
		}},
		{"reference", func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			s, err := reference.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"reference.Rotator", func(t testing.TB, cfg sketch.Config) sketch.Scorer {
			r, err := reference.NewRotator(reference.RotatorConfig{Sketch: cfg, Generations: 2, Period: 1000 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			return r
		}},
	}
}

// TestAudit54NonFinitePanicsEveryForm: "NaN or +/-Inf delta or limit
// panics with a message that starts `sketch:`; no cell is ever left
// holding NaN or Inf." Every write form (the []byte methods, the string
// twins, the time-first At forms) on every implementation.
func TestAudit54NonFinitePanicsEveryForm(t *testing.T) {
	for _, im := range a54Impls() {
		t.Run(im.name, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(1_000_000)
			s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 4, Hi: 100, Decay: decay.Linear(0.5), Clock: fc})
			s.Update([]byte("k"), 5)
			at, hasAt := s.(sketchtest.AtScorer)
			if !hasAt {
				t.Errorf("%s has no At forms; API.md: one explicit-time form per operation", im.name)
			}
			now := fc.Now()
			for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				forms := map[string]func(){
					"Update":                 func() { s.Update([]byte("k"), v) },
					"UpdateAndQuery":         func() { s.UpdateAndQuery([]byte("k"), v) },
					"TryUpdate.delta":        func() { s.TryUpdate([]byte("k"), v, 10) },
					"TryUpdate.limit":        func() { s.TryUpdate([]byte("k"), 1, v) },
					"UpdateString":           func() { s.UpdateString("k", v) },
					"UpdateAndQueryString":   func() { s.UpdateAndQueryString("k", v) },
					"TryUpdateString.delta":  func() { s.TryUpdateString("k", v, 10) },
					"TryUpdateString.limit":  func() { s.TryUpdateString("k", 1, v) },
					"TryUpdate.delta.nohit":  func() { s.TryUpdate([]byte("k"), v, -1) },
					"TryUpdate.limit.noroom": func() { s.TryUpdate([]byte("k"), 1000, v) },
				}
				if hasAt {
					forms["UpdateAt"] = func() { at.UpdateAt(now, "k", v) }
					forms["UpdateAndQueryAt"] = func() { at.UpdateAndQueryAt(now, "k", v) }
					forms["TryUpdateAt.delta"] = func() { at.TryUpdateAt(now, "k", v, 10) }
					forms["TryUpdateAt.limit"] = func() { at.TryUpdateAt(now, "k", 1, v) }
				}
				for name, f := range forms {
					msg := sketchtest.Panics(f)
					if !strings.HasPrefix(msg, "sketch:") {
						t.Errorf("%s %s(%v): panic %q, want a message starting \"sketch:\"", im.name, name, v, msg)
					}
				}
			}
			if q := s.Query([]byte("k")); q != 5 {
				t.Errorf("%s: k = %v after the refused writes, want 5 (no cell changed)", im.name, q)
			}
			for i := range 256 {
				d := s.QueryDetailed([]byte{byte(i), 'x'})
				for _, lv := range d.Levels {
					if math.IsNaN(lv.Score) || math.IsInf(lv.Score, 0) {
						t.Fatalf("%s: a cell holds %v", im.name, lv.Score)
					}
				}
			}
		})
	}
}

// TestAudit54ExactAdmissionEveryScorer: "N goroutines racing
// TryUpdate(k, 1, 1000) with no decay admit exactly 1000, every run, and
// with every key colliding (CellsPerLevel=1) the total admitted over all
// keys never exceeds the limit." On every implementation, the []byte and
// string forms, at GOMAXPROCS 1, 2, 4 and 8.
func TestAudit54ExactAdmissionEveryScorer(t *testing.T) {
	const limit, g = 1000, 24
	for _, im := range a54Impls() {
		t.Run(im.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for _, mode := range []string{"onekey-bytes", "onekey-string", "colliding-bytes", "colliding-string"} {
					cells := uint32(4096)
					if strings.HasPrefix(mode, "colliding") {
						cells = 1
					}
					s := im.make(t, sketch.Config{Levels: 4, CellsPerLevel: cells, Hi: 1e6, Seed: 9, Clock: sketchtest.NewFakeClock()})
					var admitted atomic.Int64
					var start, wg sync.WaitGroup
					start.Add(1)
					for i := range g {
						wg.Add(1)
						go func() {
							defer wg.Done()
							key := "k"
							if strings.HasPrefix(mode, "colliding") {
								key = fmt.Sprintf("key-%d", i)
							}
							kb := []byte(key)
							start.Wait()
							for range 2 * limit / g {
								var ok bool
								if strings.HasSuffix(mode, "string") {
									ok = s.TryUpdateString(key, 1, limit)
								} else {
									ok = s.TryUpdate(kb, 1, limit)
								}
								if ok {
									admitted.Add(1)
								}
							}
						}()
					}
					start.Done()
					wg.Wait()
					if a := admitted.Load(); a != limit {
						t.Errorf("%s %s: admitted %d, want exactly %d", im.name, mode, a, limit)
					}
				}
			})
		})
	}
}

// TestAudit54TryUpdateAllOrNothing: "TryUpdate(k, d, limit) applies d to
// all L cells only if aggregate + d <= limit": a refused call changes no
// level's cell; an admitted negative delta applies to every level; the
// boundary aggregate + d == limit is admitted.
func TestAudit54TryUpdateAllOrNothing(t *testing.T) {
	for _, im := range a54Impls() {
		t.Run(im.name, func(t *testing.T) {
			s := im.make(t, sketch.Config{Levels: 4, CellsPerLevel: 512, Lo: -100, Hi: 100, Clock: sketchtest.NewFakeClock()})
			s.Update([]byte("k"), 7)
			before := s.QueryDetailed([]byte("k"))
			if s.TryUpdate([]byte("k"), 4, 10) {
				t.Fatal("TryUpdate(k, 4, 10) at 7 admitted")
			}
			after := s.QueryDetailed([]byte("k"))
			for l := range before.Levels {
				if before.Levels[l].Score != after.Levels[l].Score {
					t.Errorf("refused TryUpdate changed level %d: %v -> %v", l, before.Levels[l].Score, after.Levels[l].Score)
				}
			}
			if !s.TryUpdate([]byte("k"), 3, 10) {
				t.Error("TryUpdate(k, 3, 10) at 7 (7+3 == 10) refused: the decision is aggregate + d <= limit")
			}
			if !s.TryUpdate([]byte("k"), -12, -2) {
				t.Error("TryUpdate(k, -12, -2) at 10 refused")
			}
			for l, lv := range s.QueryDetailed([]byte("k")).Levels {
				if lv.Score != -2 {
					t.Errorf("level %d holds %v after 7+3-12, want -2 (applied to all L cells)", l, lv.Score)
				}
			}
		})
	}
}

// TestAudit54QueryNeverBelowTruth: "Min aggregation never
// under-estimates: Query(k) >= the key's true score (decay rounding is
// upward), whatever the clamps, ... clock jumps". Many keys in a tiny
// sketch (collisions on every level), non-negative deltas, clamping at Hi,
// forward jumps up to a year and backward steps (zero elapsed time). The
// truth is the key alone under the law, clamped at Hi, on the clock's
// largest reading so far.
func TestAudit54QueryNeverBelowTruth(t *testing.T) {
	laws := []decay.Decay{decay.Exponential(0.3), decay.Linear(1.5), decay.None()}
	for _, im := range a54Impls() {
		for li, law := range laws {
			t.Run(fmt.Sprintf("%s/%T", im.name, law), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(54, uint64(len(im.name))))
				fc := sketchtest.NewFakeClock()
				fc.Set(1_700_000_000_000)
				const hi = 50.0
				s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 5, Hi: hi, Decay: law, Clock: fc})
				const nkeys = 40
				truth := make([]float64, nkeys)
				// Under Linear(1.5) the truth is kept exact (a rational):
				// the law rounds its drain up since audit 86, so composing
				// it step by step in float64 lands above the exact score
				// by a few ulps a step, while the sketch decays each cell
				// in one step from its stamp.
				linear := li == 1
				exact := make([]*big.Rat, nkeys)
				for i := range exact {
					exact[i] = new(big.Rat)
				}
				stamp := make([]int64, nkeys)
				maxNow := fc.NowMillis()
				for i := range stamp {
					stamp[i] = maxNow
				}
				for step := range 4000 {
					switch r := rng.IntN(100); {
					case r < 2:
						fc.Set(fc.NowMillis() - rng.Int64N(100_000)) // backwards
					case r < 3 && !strings.Contains(im.name, "otator"): // rotators forget after their period, by design
						fc.Set(fc.NowMillis() + rng.Int64N(365*86_400_000))
					case r < 40:
						fc.Set(fc.NowMillis() + rng.Int64N(2000))
					}
					if now := fc.NowMillis(); now > maxNow {
						maxNow = now
					}
					k := rng.IntN(nkeys)
					key := fmt.Sprintf("key-%d", k)
					truth[k] = law.Apply(truth[k], maxNow-stamp[k])
					if linear {
						e := exact[k].Sub(exact[k], big.NewRat(3*(maxNow-stamp[k]), 2000))
						if e.Sign() < 0 {
							e.SetInt64(0)
						}
					}
					stamp[k] = maxNow
					if rng.IntN(2) == 0 {
						d := float64(rng.IntN(9)) + 0.25
						truth[k] = math.Min(hi, truth[k]+d)
						if linear {
							e := exact[k].Add(exact[k], new(big.Rat).SetFloat64(d))
							if e.Cmp(big.NewRat(hi, 1)) > 0 {
								e.SetInt64(hi)
							}
						}
						s.UpdateString(key, d)
					}
					if linear {
						truth[k], _ = exact[k].Float64()
						if new(big.Rat).SetFloat64(truth[k]).Cmp(exact[k]) > 0 {
							truth[k] = math.Nextafter(truth[k], 0) // at or below the exact score
						}
					}
					// The lock-free sketch rounds decay upward: strict. The
					// reference is plain float64 (grudge's arithmetic), so
					// a different subdivision of the same idle time may
					// land an ulp or two lower ("within float tolerance";
					// TestAudit54FindingReferenceBelowTruthUnderExponential
					// shows it below the exact score too).
					tol := 0.0
					if strings.HasPrefix(im.name, "reference") {
						tol = 1e-12 * truth[k]
					}
					if q := s.QueryString(key); q < truth[k]-tol {
						t.Fatalf("step %d key %d: Query %v < truth %v", step, k, q, truth[k])
					}
				}
			})
		}
	}
}

// TestAudit54Aggregators: "Aggregator // zero value means Min; Min, Max,
// Mean provided": Query is the min / max / mean of the per-level scores
// QueryDetailed reports, on every implementation.
func TestAudit54Aggregators(t *testing.T) {
	for _, im := range a54Impls() {
		for _, agg := range []sketch.Aggregator{0, sketch.Min, sketch.Max, sketch.Mean} {
			s := im.make(t, sketch.Config{Levels: 4, CellsPerLevel: 3, Hi: 1e6, Aggregator: agg, Clock: sketchtest.NewFakeClock()})
			for i := range 30 {
				s.UpdateString(fmt.Sprint("w", i), float64(i+1))
			}
			for i := range 30 {
				k := []byte(fmt.Sprint("w", i))
				d := s.QueryDetailed(k)
				lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
				for _, lv := range d.Levels {
					lo, hi, sum = math.Min(lo, lv.Score), math.Max(hi, lv.Score), sum+lv.Score
				}
				want := map[sketch.Aggregator]float64{sketch.Min: lo, sketch.Max: hi, sketch.Mean: sum / float64(len(d.Levels))}[agg]
				if q := s.Query(k); math.Abs(q-want) > 1e-9*math.Max(1, want) || math.Abs(d.Score-want) > 1e-9*math.Max(1, want) {
					t.Errorf("%s %v key %s: Query %v, Detail.Score %v, levels %+v, want %v", im.name, agg, k, q, d.Score, d.Levels, want)
				}
			}
		}
	}
}

// TestAudit54NilDecayIsNone: "Decay decay.Decay // nil means
// decay.None()": nothing decays across years of fake time.
func TestAudit54NilDecayIsNone(t *testing.T) {
	for _, im := range []a54Impl{a54Impls()[0], a54Impls()[2]} { // the rotators forget by design
		fc := sketchtest.NewFakeClock()
		s := im.make(t, sketch.Config{CellsPerLevel: 64, Hi: 100, Clock: fc})
		s.Update([]byte("k"), 12.5)
		fc.Advance(5 * 365 * 24 * time.Hour)
		if q := s.Query([]byte("k")); q != 12.5 {
			t.Errorf("%s: nil Decay, 5 years later: %v, want 12.5", im.name, q)
		}
	}
}

// TestAudit54ConfigErrorSweep: "Invalid Config: a *ConfigError naming the
// field and value, matched by errors.Is(err, ErrInvalidConfig)"; "Lo <= 0
// <= Hi and Lo < Hi"; "Levels ... at most 8"; "Hi = +Inf only with a
// decay that drains"; decay "Invalid parameters (NaN, Inf, <= 0) are
// reported by sketch.New as an error naming the field". Both New
// (sketch and reference) and rotator.New.
func TestAudit54ConfigErrorSweep(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name  string
		cfg   sketch.Config
		field string
		value string // the value as the message should show it
	}{
		{"LoEqHiZero", sketch.Config{}, "Hi", "0"},
		{"LoPositive", sketch.Config{Lo: 0.5, Hi: 10}, "Lo", "0.5"},
		{"HiNegative", sketch.Config{Lo: -10, Hi: -0.5}, "Hi", "-0.5"},
		{"LoNaN", sketch.Config{Lo: nan, Hi: 10}, "Lo", "NaN"},
		{"HiNaN", sketch.Config{Hi: nan}, "Hi", "NaN"},
		{"HiInfNilDecay", sketch.Config{Hi: inf}, "Hi", "Inf"},
		{"HiInfNone", sketch.Config{Hi: inf, Decay: decay.None()}, "Hi", "Inf"},
		{"LoMinusInfNilDecay", sketch.Config{Lo: -inf, Hi: 1}, "Lo", "Inf"},
		{"Levels9", sketch.Config{Levels: 9, Hi: 10}, "Levels", "9"},
		{"ExpNaN", sketch.Config{Hi: 10, Decay: decay.Exponential(nan)}, "Decay", "NaN"},
		{"ExpInf", sketch.Config{Hi: 10, Decay: decay.Exponential(inf)}, "Decay", "Inf"},
		{"ExpZero", sketch.Config{Hi: 10, Decay: decay.Exponential(0)}, "Decay", "0"},
		{"ExpNeg", sketch.Config{Hi: 10, Decay: decay.Exponential(-2)}, "Decay", "-2"},
		{"LinNaN", sketch.Config{Hi: 10, Decay: decay.Linear(nan)}, "Decay", "NaN"},
		{"LinInf", sketch.Config{Hi: 10, Decay: decay.Linear(inf)}, "Decay", "Inf"},
		{"LinZero", sketch.Config{Hi: 10, Decay: decay.Linear(0)}, "Decay", "0"},
		{"LinNeg", sketch.Config{Hi: 10, Decay: decay.Linear(-3)}, "Decay", "-3"},
	}
	ctors := map[string]func(sketch.Config) error{
		"sketch.New":    func(c sketch.Config) error { _, err := sketch.New(c); return err },
		"reference.New": func(c sketch.Config) error { _, err := reference.New(c); return err },
		"rotator.New": func(c sketch.Config) error {
			_, err := rotator.New(rotator.Config{Sketch: c, Period: time.Second})
			return err
		},
		"reference.NewRotator": func(c sketch.Config) error {
			r, err := reference.NewRotator(reference.RotatorConfig{Sketch: c, Period: time.Second})
			if err == nil {
				r.Close()
			}
			return err
		},
	}
	for _, tc := range cases {
		for cname, ctor := range ctors {
			tc.cfg.CellsPerLevel = 16
			err := ctor(tc.cfg)
			if err == nil {
				t.Errorf("%s %s: accepted", cname, tc.name)
				continue
			}
			var ce *sketch.ConfigError
			if !errors.Is(err, sketch.ErrInvalidConfig) || !errors.As(err, &ce) {
				t.Errorf("%s %s: %v (%T), want a *sketch.ConfigError matching ErrInvalidConfig", cname, tc.name, err, err)
				continue
			}
			if !strings.Contains(ce.Field, tc.field) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s %s: Field %q message %q, want the field %s named", cname, tc.name, ce.Field, err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.value) {
				t.Errorf("%s %s: message %q does not show the value %s", cname, tc.name, err, tc.value)
			}
		}
	}
	// Valid edges: Lo < 0 = Hi, Lo = 0 < Hi, Levels 1 and 8, Hi = +Inf
	// with draining laws.
	for _, cfg := range []sketch.Config{
		{Lo: -5, Hi: 0}, {Lo: 0, Hi: 1}, {Levels: 1, Hi: 1}, {Levels: 8, Hi: 1},
		{Hi: inf, Decay: decay.Linear(1)}, {Hi: inf, Decay: decay.Exponential(1)},
		{Lo: -inf, Hi: inf, Decay: decay.Linear(1)}, {Lo: -math.MaxFloat32, Hi: math.MaxFloat32},
	} {
		cfg.CellsPerLevel = 16
		for cname, ctor := range ctors {
			if err := ctor(cfg); err != nil {
				t.Errorf("%s(%+v): %v, want valid", cname, cfg, err)
			}
		}
	}
}

// TestAudit54BackwardsStepEveryScorer: "A backwards clock step counts as
// zero elapsed time, never as growth", on every implementation and at any
// size of step.
func TestAudit54BackwardsStepEveryScorer(t *testing.T) {
	for _, im := range a54Impls() {
		for _, back := range []int64{1, 999, 86_400_000, 400 * 86_400_000} {
			fc := sketchtest.NewFakeClock()
			fc.Set(1_700_000_000_000)
			s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 100, Decay: decay.Exponential(0.5), Clock: fc})
			s.Update([]byte("k"), 40)
			fc.Set(fc.NowMillis() - back)
			if q := s.Query([]byte("k")); q < 40 || q > 40.0001 {
				t.Errorf("%s: %d ms back: %v, want 40", im.name, back, q)
			}
			if q := s.UpdateAndQuery([]byte("k"), 2); q < 42 || q > 42.0001 {
				t.Errorf("%s: write %d ms back: %v, want 42", im.name, back, q)
			}
		}
	}
}

// TestAudit54FakeClockSet: "NewFakeClock() *FakeClock with
// Advance(time.Duration), Set, Now() time.Time and what the sketch's Clock
// needs"; a sketch driven through Set decays by the set distance.
func TestAudit54FakeClockSet(t *testing.T) {
	fc := sketchtest.NewFakeClock()
	var _ sketch.Clock = fc
	var _ func(int64) = fc.Set
	fc.Set(5_000)
	if fc.NowMillis() != 5_000 || fc.Now().UnixMilli() != 5_000 {
		t.Fatalf("Set(5000): NowMillis %d, Now %v", fc.NowMillis(), fc.Now())
	}
	s, err := sketch.New(sketch.Config{CellsPerLevel: 64, Hi: 100, Decay: decay.Linear(1), Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("k"), 10)
	fc.Set(8_000)
	if q := s.Query([]byte("k")); math.Abs(q-7) > 1e-4 {
		t.Errorf("after Set +3 s at 1/s: %v, want 7", q)
	}
}

// TestAudit54ConformanceSuites: "TestScorer(t, newFunc) (and one for
// rotators): the whole contract as a conformance suite" passes for the
// implementations API.md names.
func TestAudit54ConformanceSuites(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	for _, im := range []a54Impl{a54Impls()[0], a54Impls()[2]} {
		t.Run(im.name, func(t *testing.T) {
			sketchtest.TestScorer(t, func(t testing.TB, cfg sketch.Config) sketch.Scorer { return im.make(t, cfg) })
		})
	}
	t.Run("rotator", func(t *testing.T) {
		sketchtest.TestRotator(t, func(t testing.TB, cfg sketch.Config, g uint32, p time.Duration) sketch.Scorer {
			r, err := rotator.New(rotator.Config{Sketch: cfg, Generations: g, Period: p})
			if err != nil {
				t.Fatal(err)
			}
			return r
		})
	})
}

// TestAudit54DefaultsEveryScorer: "Levels uint32 // L; 0 means 4",
// "CellsPerLevel uint32 // M; 0 means 100_000", on every implementation
// ("Same Config, same methods, same semantics"): a key has 4 levels whose
// cell indexes lie in [0, 100000), and over many keys the largest index
// seen is close to 100000.
func TestAudit54DefaultsEveryScorer(t *testing.T) {
	for _, im := range a54Impls() {
		s := im.make(t, sketch.Config{Hi: 10, Clock: sketchtest.NewFakeClock()})
		maxIdx := uint32(0)
		for i := range 2000 {
			d := s.QueryDetailed([]byte(fmt.Sprint("key-", i)))
			if len(d.Levels) != 4 {
				t.Fatalf("%s: %d levels, want 4", im.name, len(d.Levels))
			}
			for _, lv := range d.Levels {
				if lv.Index >= 100_000 {
					t.Fatalf("%s: cell index %d >= 100000", im.name, lv.Index)
				}
				maxIdx = max(maxIdx, lv.Index)
			}
		}
		if maxIdx < 99_000 {
			t.Errorf("%s: largest cell index over 8000 draws %d, want close to 100000 (M defaulted to something smaller?)", im.name, maxIdx)
		}
	}
}
