package reference_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a41Hasher is a user's own Hasher (FNV-1a, seeded).
type a41Hasher uint64

func (h a41Hasher) Sum64(b []byte) uint64 {
	x := uint64(h) ^ 1469598103934665603
	for _, c := range b {
		x = (x ^ uint64(c)) * 1099511628211
	}
	return x
}
func (h a41Hasher) Sum64String(s string) uint64 { return h.Sum64([]byte(s)) }

// TestAudit41SameCells: for the same Config (Seed, Hasher, Levels,
// CellsPerLevel) the reference and sketch.New map every key to the same
// cells (QueryDetailed's Level/Index), as do a reference rotator and
// rotator.New (fresh: their primaries).
func TestAudit41SameCells(t *testing.T) {
	hashers := map[string]sketch.HasherFactory{"default": nil, "XXH3": sketch.XXH3(), "SipHash": sketch.SipHash(),
		"custom": func(seed uint64) sketch.Hasher { return a41Hasher(seed) }}
	n := 0
	for hname, h := range hashers {
		for _, levels := range []uint32{0, 1, 2, 5, 8} {
			for _, m := range []uint32{1, 2, 3, 7, 1000, 100003, 1 << 20} {
				seeds := []uint64{0, 41, math.MaxUint64}
				if m == 1<<20 {
					seeds = seeds[1:2] // big rows: one seed keeps -race fast
				}
				for _, seed := range seeds {
					cfg := sketch.Config{Levels: levels, CellsPerLevel: m, Hi: 100, Hasher: h, Seed: seed}
					s, err := sketch.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					r, err := reference.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					for k := range 40 {
						key := []byte(fmt.Sprintf("key-%d-%s", k, strings.Repeat("x", k)))
						a, b := s.QueryDetailed(key), r.QueryDetailed(key)
						if len(a.Levels) != len(b.Levels) {
							t.Fatalf("%s L=%d M=%d: %d vs %d levels", hname, levels, m, len(a.Levels), len(b.Levels))
						}
						for l := range a.Levels {
							if a.Levels[l].Level != b.Levels[l].Level || a.Levels[l].Index != b.Levels[l].Index {
								t.Fatalf("%s L=%d M=%d seed %d key %q level %d: sketch cell %d, reference cell %d", hname, levels, m, seed, key, l, a.Levels[l].Index, b.Levels[l].Index)
							}
						}
						n++
					}
				}
			}
		}
	}
	// Rotators: reference.NewRotator and rotator.New, fresh.
	for _, gens := range []uint32{0, 2, 3} {
		cfg := sketch.Config{Levels: 4, CellsPerLevel: 4099, Hi: 100, Seed: 9}
		ro, err := rotator.New(rotator.Config{Sketch: cfg, Generations: gens, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		rr, err := reference.NewRotator(reference.RotatorConfig{Sketch: cfg, Generations: gens, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for k := range 200 {
			key := []byte(fmt.Sprint("rk", k))
			a, b := ro.QueryDetailed(key), rr.QueryDetailed(key)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("generations %d key %q: rotator %+v, reference rotator %+v", gens, key, a, b)
			}
		}
		rr.Close()
		rr.Close() // idempotent
	}
	t.Logf("%d keys compared cell for cell", n)
}

// TestAudit41SameScores: the same single-threaded operations (Update,
// UpdateAndQuery, TryUpdate, clock steps both ways) on both, per law and
// aggregator: every cell of the sketch reads >= the reference's cell and
// within float32 rounding of it; TryUpdate decisions agree when the
// aggregates are not within rounding of the limit.
func TestAudit41SameScores(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 20))
	for _, lw := range []decay.Decay{decay.None(), decay.Linear(2), decay.Exponential(0.3)} {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			for _, b := range [][2]float64{{0, 1000}, {-50, 50}} {
				cs, cr := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
				cs.Set(5_000_000)
				cr.Set(5_000_000)
				cfg := sketch.Config{Levels: 3, CellsPerLevel: 32, Decay: lw, Aggregator: agg, Lo: b[0], Hi: b[1], Seed: 3}
				cfg.Clock = cs
				s, err := sketch.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Clock = cr
				r, err := reference.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				agree, decided := 0, 0
				for i := range 3000 {
					key := []byte(fmt.Sprint("k", rng.IntN(60)))
					d := math.Round(rng.NormFloat64()*40) / 4
					switch rng.IntN(5) {
					case 0, 1:
						s.Update(key, d)
						r.Update(key, d)
					case 2:
						a, c := s.UpdateAndQuery(key, d), r.UpdateAndQuery(key, d)
						if a < c-1e-9*math.Abs(c) && agg == sketch.Min && d >= 0 && b[0] == 0 {
							t.Fatalf("%v %v: op %d: UpdateAndQuery sketch %v < reference %v", lw, agg, i, a, c)
						}
					case 3:
						limit := math.Round(rng.Float64() * b[1])
						qs, qr := s.Query(key), r.Query(key)
						a, c := s.TryUpdate(key, d, limit), r.TryUpdate(key, d, limit)
						if math.Abs(qs+d-limit) > 1e-3*math.Max(1, math.Abs(limit)) && math.Abs(qr+d-limit) > 1e-3*math.Max(1, math.Abs(limit)) {
							decided++
							if a == c {
								agree++
							} else {
								t.Fatalf("%v %v: op %d: TryUpdate(%v, limit %v): sketch %v at %v, reference %v at %v", lw, agg, i, d, limit, a, qs, c, qr)
							}
						}
					default:
						step := time.Duration(rng.IntN(3000)-500) * time.Millisecond
						cs.Advance(step)
						cr.Advance(step)
					}
				}
				// every cell: sketch >= reference (never under), within rounding
				worst := 0.0
				for k := range 60 {
					key := []byte(fmt.Sprint("k", k))
					a, c := s.QueryDetailed(key), r.QueryDetailed(key)
					for l := range a.Levels {
						x, y := a.Levels[l].Score, c.Levels[l].Score
						if a.Levels[l].Index != c.Levels[l].Index {
							t.Fatalf("cells differ")
						}
						if x < y-1e-9*math.Abs(y)-1e-12 {
							t.Fatalf("%v %v [%v,%v]: key %d level %d: sketch cell %v < reference %v", lw, agg, b[0], b[1], k, l, x, y)
						}
						if diff := x - y; diff > 1e-4*math.Max(1, math.Abs(y)) {
							t.Fatalf("%v %v [%v,%v]: key %d level %d: sketch cell %v, reference %v: more than rounding apart", lw, agg, b[0], b[1], k, l, x, y)
						} else {
							worst = math.Max(worst, diff)
						}
					}
				}
				t.Logf("%v %v [%v,%v]: %d/%d clear TryUpdate decisions agree; worst cell excess %.3g", lw, agg, b[0], b[1], agree, decided, worst)
			}
		}
	}
}

// TestAudit41SameErrors: an invalid Config gives the reference the error
// sketch.New gives (same message, Field, ErrInvalidConfig), and an
// invalid RotatorConfig the error rotator.New gives.
func TestAudit41SameErrors(t *testing.T) {
	bad := []sketch.Config{
		{}, {Hi: -1}, {Lo: 1, Hi: 2}, {Lo: 5, Hi: 5}, {Hi: math.NaN()}, {Lo: math.NaN(), Hi: 1}, {Hi: math.Inf(1)},
		{Hi: 1e39}, {Lo: -1e39, Hi: 1}, {Levels: 9, Hi: 1}, {CellsPerLevel: 1<<30 + 1, Hi: 1}, {Hi: 1, Aggregator: 7},
		{Hi: 1, Decay: decay.Linear(0)}, {Hi: 1, Decay: decay.Exponential(math.NaN())}, {Hi: 1, MaxBytes: -1},
		{Hi: 1, Levels: 8, CellsPerLevel: 1 << 30},
	}
	for i, cfg := range bad {
		_, e1 := sketch.New(cfg)
		_, e2 := reference.New(cfg)
		if e1 == nil || e2 == nil {
			t.Errorf("config %d %+v: sketch.New %v, reference.New %v", i, cfg, e1, e2)
			continue
		}
		var c1, c2 *sketch.ConfigError
		if !errors.As(e1, &c1) || !errors.As(e2, &c2) || c1.Field != c2.Field || e1.Error() != e2.Error() || !errors.Is(e2, sketch.ErrInvalidConfig) {
			t.Errorf("config %d: sketch.New %q (%T), reference.New %q (%T)", i, e1, e1, e2, e2)
		}
	}
	for i, rc := range []struct {
		gens   uint32
		period time.Duration
		hi     float64
	}{{1, time.Second, 1}, {2, 0, 1}, {2, -time.Second, 1}, {2, time.Second, 0}, {2, time.Microsecond, 1}} {
		cfg := sketch.Config{Hi: rc.hi}
		_, e1 := rotator.New(rotator.Config{Sketch: cfg, Generations: rc.gens, Period: rc.period})
		r2, e2 := reference.NewRotator(reference.RotatorConfig{Sketch: cfg, Generations: rc.gens, Period: rc.period})
		if (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) {
			t.Errorf("rotator config %d: rotator.New %v, reference.NewRotator %v", i, e1, e2)
		}
		if r2 != nil {
			r2.Close()
		}
	}
}

// TestAudit41ReferenceSemantics: NaN/Inf deltas and limits panic with
// "sketch:" and leave the cells as they were; the At forms exist on the
// sketch and the rotator; a backwards step is no time; TryUpdate is exact
// under concurrency (also through the reference rotator).
func TestAudit41ReferenceSemantics(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	r, _ := reference.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1000, Decay: decay.Linear(1), Clock: clk})
	r.Update([]byte("k"), 10)
	before := r.QueryDetailed([]byte("k"))
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for name, f := range map[string]func(){
			"Update": func() { r.Update([]byte("k"), v) }, "TryUpdate delta": func() { r.TryUpdate([]byte("k"), v, 100) },
			"TryUpdate limit": func() { r.TryUpdateString("k", 1, v) }, "UpdateAndQuery": func() { r.UpdateAndQueryString("k", v) },
		} {
			if msg := sketchtest.Panics(f); !strings.HasPrefix(msg, "sketch:") {
				t.Errorf("%s(%v): panic %q", name, v, msg)
			}
		}
	}
	if after := r.QueryDetailed([]byte("k")); !reflect.DeepEqual(before, after) {
		t.Fatalf("cells changed by panicking calls: %+v -> %+v", before, after)
	}
	if _, ok := any(r).(sketchtest.AtScorer); !ok {
		t.Error("reference.Sketch lacks the At forms")
	}
	rr, err := reference.NewRotator(reference.RotatorConfig{Sketch: sketch.Config{Hi: 1e9, Levels: 4, CellsPerLevel: 1024}, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	if _, ok := rr.(sketchtest.AtScorer); !ok {
		t.Error("reference.NewRotator's value lacks the At forms (its doc says it has them)")
	}
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, sc := range []sketch.Scorer{rr} {
			key := fmt.Sprint("sentinel", time.Now().UnixNano())
			var admitted = make(chan int, 16)
			for range 16 {
				go func() {
					n := 0
					for sc.TryUpdateString(key, 1, 1000) {
						n++
					}
					admitted <- n
				}()
			}
			total := 0
			for range 16 {
				total += <-admitted
			}
			if total != 1000 {
				t.Fatalf("reference rotator: %d admitted, want 1000", total)
			}
		}
	})
}

// a41NaNLaw is a (faulty) custom law that returns NaN.
type a41NaNLaw struct{}

func (a41NaNLaw) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return math.NaN()
}

// TestAudit41FixedReferenceCustomLawNaN: sketch/doc.go, Guarantees:
// "These hold for Sketch, rotator.Rotator, the reference implementations
// ..." and list "no cell ever holds NaN or Inf" and "A Hi that no float32
// holds (0.1) is stored rounded up and read back capped at Hi: no read
// exceeds Hi"; API.md: the reference has "same semantics"; package decay:
// the sketch "sanitizes a custom law's faults (NaN, +-Inf, growth,
// crossing 0) to the safe side". With a faulty custom law the lock-free
// sketch reads the score undecayed (10), while the reference writes the
// law's result into its cells unclamped (decayLocked, from readCell): a
// NaN law leaves NaN in the cells and Query reads NaN; a +Inf law leaves
// +Inf in the cells (QueryDetailed's levels read +Inf, Query 15); a law
// that doubles leaves 20 in cells clamped at Hi = 15.
func TestAudit41FixedReferenceCustomLawNaN(t *testing.T) {
	type law struct {
		name string
		d    decay.Decay
	}
	var bad []string
	for _, lw := range []law{{"NaN", a41NaNLaw{}}, {"+Inf", a41InfLaw{}}, {"grows x2", a41Grow{}}} {
		cs, cr := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		const hi = 15
		s, err := sketch.New(sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: hi, Decay: lw.d, Clock: cs})
		if err != nil {
			t.Fatal(err)
		}
		r, err := reference.New(sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: hi, Decay: lw.d, Clock: cr})
		if err != nil {
			t.Fatal(err)
		}
		s.Update([]byte("k"), 10)
		r.Update([]byte("k"), 10)
		cs.Advance(time.Second)
		cr.Advance(time.Second)
		a, b := s.Query([]byte("k")), r.Query([]byte("k"))
		if a != b || math.IsNaN(b) || math.IsInf(b, 0) || b > hi {
			bad = append(bad, fmt.Sprintf("%s law, Hi %v: sketch Query %v, reference Query %v (reference cells %+v)", lw.name, hi, a, b, r.QueryDetailed([]byte("k")).Levels))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("want the reference to read as the sketch does (no NaN/Inf in a cell, no read above Hi, a faulty law read as no decay); got:\n%s", strings.Join(bad, "\n"))
	}
}

type a41InfLaw struct{}

func (a41InfLaw) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return math.Inf(1)
}

type a41Grow struct{}

func (a41Grow) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return 2 * s
}
