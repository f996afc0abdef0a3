package sketch_test

// Audit 54, second part: deeper probes of API.md's sketch semantics (idle
// times across every power of two of milliseconds on a realistic clock,
// extreme magnitudes, time.Time conversion on the default clock, the At
// forms' allocations, SuggestLevels' formula, exactness across a rotation
// mid-race, the reference rotator's goroutine).

import (
	"fmt"
	"math"
	"runtime"
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

// TestAudit54IdlePowersOfTwo: "Any idle time, 1 ms to years, decays as the
// reference (int64 ms) does", with the clock at a 2026 Unix time (not 0),
// idle times at 2^k - 1, 2^k and 2^k + 1 ms for k up to 40 (35 years),
// Exponential and Linear, and one-sided ("Query(k) >= the key's true
// score").
func TestAudit54IdlePowersOfTwo(t *testing.T) {
	laws := map[string]decay.Decay{
		"exp":     decay.Exponential(1e-9 * 1000), // 1e-6/s... slow enough to leave a score after years
		"expfast": decay.Exponential(0.05),
		"lin":     decay.Linear(1e-5),
		"linfast": decay.Linear(3),
	}
	for name, law := range laws {
		for k := 0; k <= 40; k++ {
			for _, off := range []int64{-1, 0, 1} {
				idle := int64(1)<<k + off
				if idle < 1 {
					continue
				}
				fc := sketchtest.NewFakeClock()
				fc.Set(1_780_000_000_000)
				cfg := sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e9, Decay: law, Clock: fc}
				s, err := sketch.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				r, err := reference.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				s.Update([]byte("k"), 5000)
				r.Update([]byte("k"), 5000)
				fc.Set(fc.NowMillis() + idle)
				got, ref := s.Query([]byte("k")), r.Query([]byte("k"))
				truth := law.Apply(5000, idle)
				// float32 storage rounds up: at most 2^-23 relative above
				// the exact value, plus one float32 ulp of the score.
				if got < truth || got > truth*(1+4e-7)+1e-30 || math.Abs(ref-truth) > 1e-9*math.Max(1, truth) {
					t.Errorf("%s idle %d ms: sketch %v, reference %v, law %v", name, idle, got, ref, truth)
				}
				// A write after the idle starts from the decayed score.
				s.Update([]byte("k"), 1)
				if q := s.Query([]byte("k")); q < truth+1 || q > (truth+1)*(1+4e-7)+1e-30 {
					t.Errorf("%s idle %d ms then +1: %v, want %v", name, idle, q, truth+1)
				}
			}
		}
	}
}

// TestAudit54ExtremeMagnitudes: "no cell is ever left holding NaN or Inf"
// and reads are finite whatever finite deltas are written, with infinite
// clamps (Hi = +Inf, Lo = -Inf, with a draining law).
func TestAudit54ExtremeMagnitudes(t *testing.T) {
	for _, im := range a54Impls() {
		fc := sketchtest.NewFakeClock()
		s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 2, Lo: math.Inf(-1), Hi: math.Inf(1), Decay: decay.Linear(1), Clock: fc})
		for _, d := range []float64{math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64, -math.MaxFloat64, -math.MaxFloat64, 1e300, -1e-300, math.SmallestNonzeroFloat64} {
			s.Update([]byte("a"), d)
			s.UpdateString("b", -d)
			_ = s.UpdateAndQuery([]byte("c"), d)
			_ = s.TryUpdate([]byte("d"), d, math.MaxFloat64)
			for _, k := range []string{"a", "b", "c", "d"} {
				q := s.QueryString(k)
				dt := s.QueryDetailed([]byte(k))
				if math.IsNaN(q) || math.IsInf(q, 0) || math.IsNaN(dt.Score) || math.IsInf(dt.Score, 0) {
					t.Fatalf("%s: after delta %v key %s reads %v (detail %v)", im.name, d, k, q, dt.Score)
				}
				for _, lv := range dt.Levels {
					if math.IsNaN(lv.Score) || math.IsInf(lv.Score, 0) {
						t.Fatalf("%s: a cell holds %v", im.name, lv.Score)
					}
				}
			}
			fc.Advance(time.Millisecond)
		}
	}
}

// TestAudit54AtFormsDefaultClock: "A time.Time is converted to the
// sketch's own scale (monotonic reading when present), so time.Now(), a
// fake clock's Now() and a stored wall time mean what they say", on the
// default clock (Clock nil). A t before a time the sketch already used
// counts as that time and a t ahead of the clock as its reading (package
// doc, "Time never runs backwards"), so the test reads inside the window
// [write, now]: written 10 at w = time.Now(), then after at least 200 ms a
// read at w+100ms (monotonic, and as a stored wall time) shows 100 ms of
// Linear(1) decay.
func TestAudit54AtFormsDefaultClock(t *testing.T) {
	for _, im := range []a54Impl{a54Impls()[0], a54Impls()[1], a54Impls()[2]} {
		s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 256, Hi: 100, Decay: decay.Linear(1)})
		at := s.(sketchtest.AtScorer)
		w := time.Now()
		at.UpdateAt(w, "k", 10)
		time.Sleep(200 * time.Millisecond)
		for name, tt := range map[string]time.Time{"mono": w.Add(100 * time.Millisecond), "wall": w.Add(100 * time.Millisecond).Round(0)} {
			if q := at.QueryAt(tt, "k"); math.Abs(q-9.9) > 0.0025 {
				t.Errorf("%s %s: written 10 at w, read at w+100ms at 1/s: %v, want 9.9", im.name, name, q)
			}
		}
		if q := s.QueryString("k"); q > 9.8+0.0025 {
			t.Errorf("%s: read now (>= w+200ms): %v, want <= 9.8", im.name, q)
		}
	}
}

// TestAudit54AtFormsNoAllocs: the package doc, "Update, Query,
// UpdateAndQuery, TryUpdate, their String twins and their At forms never
// allocate", on the sketch and on the rotator ("same methods as Sketch").
func TestAudit54AtFormsNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for _, im := range a54Impls()[:2] {
		fc := sketchtest.NewFakeClock()
		s := im.make(t, sketch.Config{CellsPerLevel: 1024, Hi: 1e6, Decay: decay.Exponential(0.1), Clock: fc})
		at := s.(sketchtest.AtScorer)
		now := fc.Now()
		wall := now.Round(0)
		kb := []byte("key")
		for name, f := range map[string]func(){
			"UpdateAt":              func() { at.UpdateAt(now, "key", 1) },
			"QueryAt":               func() { _ = at.QueryAt(now, "key") },
			"UpdateAndQueryAt":      func() { _ = at.UpdateAndQueryAt(now, "key", 1) },
			"TryUpdateAt":           func() { _ = at.TryUpdateAt(now, "key", 1, 1e5) },
			"QueryAt(wall)":         func() { _ = at.QueryAt(wall, "key") },
			"Update":                func() { s.Update(kb, 1) },
			"TryUpdateString(deny)": func() { _ = s.TryUpdateString("key", 1, -1) },
		} {
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Errorf("%s %s: %v allocs/op, want 0", im.name, name, a)
			}
		}
	}
}

// TestAudit54SuggestLevelsFormula: "SuggestLevels(...) // sizing from the
// false-positive formula, as grudge has": the smallest L in 1..8 with
// (1 - (1 - 1/M)^H)^L <= p, 8 when none is, on a grid.
func TestAudit54SuggestLevelsFormula(t *testing.T) {
	for _, h := range []uint32{1, 10, 1000, 50_000, 100_000, 1_000_000} {
		for _, m := range []uint32{1, 2, 100, 10_000, 100_000, 1 << 20} {
			for _, p := range []float64{0.5, 0.1, 0.01, 1e-3, 1e-6, 1e-12} {
				q := 1 - math.Pow(1-1/float64(m), float64(h))
				want := uint32(8)
				for l := uint32(1); l <= 8; l++ {
					if math.Pow(q, float64(l)) <= p {
						want = l
						break
					}
				}
				got := sketch.SuggestLevels(h, m, p)
				if got != want {
					// Accept another answer only at a float tie: the
					// rate at got is p up to rounding.
					// (either level at the boundary: (1-(1-1/M)^H)^L == p
					// exactly, as for H=1, M=10^4, p=10^-12, L=3).
					rate := math.Pow(q, float64(got))
					tie := math.Abs(rate-p) <= 1e-9*p || math.Abs(math.Pow(q, float64(want))-p) <= 1e-9*p
					if !tie || (got != want+1 && got+1 != want) {
						t.Errorf("SuggestLevels(%d, %d, %v) = %d, want %d (rate at %d: %v)", h, m, p, got, want, want, rate)
					}
				}
			}
		}
	}
}

// TestAudit54RotatorExactAcrossRotation: N goroutines racing
// TryUpdate(k, 1, 1000) on a rotator admit exactly 1000 even when the
// clock crosses a period boundary mid-race ("rotation happens lazily on
// access"; every generation but the new one has seen every write, so the
// next primary holds them all).
func TestAudit54RotatorExactAcrossRotation(t *testing.T) {
	const limit, g = 1000, 16
	sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
		for _, gens := range []uint32{2, 3} {
			fc := sketchtest.NewFakeClock()
			r, err := rotator.New(rotator.Config{
				Sketch:      sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e6, Clock: fc},
				Generations: gens,
				Period:      time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			fc.Advance(500 * time.Millisecond)
			var admitted, calls atomic.Int64
			var once sync.Once
			var wg sync.WaitGroup
			for range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 2 * limit / g {
						if calls.Add(1) == limit/2 {
							once.Do(func() { fc.Advance(600 * time.Millisecond) }) // crosses t = 1 s
						}
						if r.TryUpdateString("k", 1, limit) {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if a := admitted.Load(); a != limit {
				t.Errorf("generations %d: admitted %d across a rotation, want exactly %d", gens, a, limit)
			}
			if p := r.Stats().Promotions; p != 1 {
				t.Errorf("generations %d: %d promotions, want 1", gens, p)
			}
		}
	})
}

// TestAudit54ReferenceRotatorCloseStopsGoroutine: reference.NewRotator
// "mirrors grudge's rotator (RWMutex)": a ticker goroutine that Close
// stops (idempotently), leaving no goroutine behind.
func TestAudit54ReferenceRotatorCloseStopsGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	var rs []reference.Rotator
	for i := range 5 {
		r, err := reference.NewRotator(reference.RotatorConfig{Sketch: sketch.Config{CellsPerLevel: 64, Hi: 10, Seed: uint64(i)}, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	for _, r := range rs {
		r.Close()
		r.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines outlive Close", n-before)
	}
}

// a54Hyper is a user's own conforming law: 1/score grows linearly in time
// (score / (1 + k*score*t)), monotone toward 0, never crossing it, exact
// under composition; it drains (every finite score tends to 0) but is
// neither exponential nor linear.
type a54Hyper struct{ k float64 }

func (h a54Hyper) Apply(score float64, dtMillis int64) float64 {
	if dtMillis <= 0 || score == 0 {
		return score
	}
	a := math.Abs(score)
	out := a / (1 + h.k*a*float64(dtMillis)/1000)
	return math.Copysign(out, score)
}

// TestAudit54CustomLawNeverBelowTruth: "Min aggregation never
// under-estimates: Query(k) >= the key's true score ..., whatever the
// clamps, roll-backs, refunds, rotations, clock jumps or conforming
// custom laws involved": a custom (hyperbolic) law, a crowded sketch,
// forward jumps; on the lock-free sketch strictly.
func TestAudit54CustomLawNeverBelowTruth(t *testing.T) {
	law := a54Hyper{k: 0.01}
	for _, seed := range []uint64{1, 2, 3} {
		fc := sketchtest.NewFakeClock()
		fc.Set(1_700_000_000_000)
		const hi = 1e6
		s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 5, Hi: hi, Decay: law, Clock: fc, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		const nkeys = 30
		truth := make([]float64, nkeys)
		stamp := make([]int64, nkeys)
		for i := range stamp {
			stamp[i] = fc.NowMillis()
		}
		for step := range 3000 {
			fc.Set(fc.NowMillis() + int64((step*7919)%5000))
			if step%500 == 0 {
				fc.Set(fc.NowMillis() + 86_400_000*int64(step%7))
			}
			k := (step * 31) % nkeys
			now := fc.NowMillis()
			truth[k] = law.Apply(truth[k], now-stamp[k])
			stamp[k] = now
			d := float64((step*13)%17) + 0.125
			truth[k] = math.Min(hi, truth[k]+d)
			s.UpdateString(fmt.Sprint("key-", k), d)
			for j := range nkeys {
				tj := law.Apply(truth[j], now-stamp[j])
				if q := s.QueryString(fmt.Sprint("key-", j)); q < tj {
					t.Fatalf("seed %d step %d key %d: Query %v < truth %v", seed, step, j, q, tj)
				}
			}
		}
	}
}

// TestAudit54HiNotAFloat32: package doc, "A Hi that no float32 holds
// (0.1) is stored rounded up and read back capped at Hi: no read exceeds
// Hi"; Config, "Lo, Hi ... within the float32 range": a Hi beyond it is a
// *ConfigError naming Hi, and MaxFloat32 itself is valid.
func TestAudit54HiNotAFloat32(t *testing.T) {
	for _, im := range a54Impls() {
		s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 8, Hi: 0.1, Clock: sketchtest.NewFakeClock()})
		for i := range 20 {
			k := []byte(fmt.Sprint("k", i))
			if q := s.UpdateAndQuery(k, 1); q > 0.1 {
				t.Errorf("%s: UpdateAndQuery read %v above Hi 0.1", im.name, q)
			}
			if q := s.Query(k); q > 0.1 {
				t.Errorf("%s: Query read %v above Hi 0.1", im.name, q)
			}
			d := s.QueryDetailed(k)
			if d.Score > 0.1 {
				t.Errorf("%s: Detail.Score %v above Hi 0.1", im.name, d.Score)
			}
			for _, lv := range d.Levels {
				if lv.Score > 0.1 {
					t.Errorf("%s: a level reads %v above Hi 0.1", im.name, lv.Score)
				}
			}
			// At Hi, TryUpdate(k, 0, 0.1) is admitted: aggregate + 0 <= limit.
			if !s.TryUpdate(k, 0, 0.1) {
				t.Errorf("%s: TryUpdate(k, 0, Hi) at Hi refused", im.name)
			}
		}
	}
	if _, err := sketch.New(sketch.Config{CellsPerLevel: 8, Hi: math.MaxFloat32}); err != nil {
		t.Errorf("Hi = MaxFloat32: %v", err)
	}
	if _, err := sketch.New(sketch.Config{CellsPerLevel: 8, Hi: 1e39}); err == nil {
		t.Error("Hi = 1e39 (beyond float32) accepted")
	}
	if _, err := sketch.New(sketch.Config{CellsPerLevel: 8, Lo: -1e39, Hi: 1}); err == nil {
		t.Error("Lo = -1e39 (beyond float32) accepted")
	}
}

// TestAudit54AnyFiniteLimit: "Any finite limit is accepted, as in
// grudge: the decision is aggregate + delta <= limit": the extremes of
// float64 as limits, and delta 0.
func TestAudit54AnyFiniteLimit(t *testing.T) {
	for _, im := range a54Impls() {
		s := im.make(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Lo: -100, Hi: 100, Clock: sketchtest.NewFakeClock()})
		if !s.TryUpdate([]byte("k"), 5, math.MaxFloat64) {
			t.Errorf("%s: TryUpdate(k, 5, MaxFloat64) refused", im.name)
		}
		if s.TryUpdate([]byte("k"), 0, -math.MaxFloat64) {
			t.Errorf("%s: TryUpdate(k, 0, -MaxFloat64) admitted", im.name)
		}
		if s.TryUpdate([]byte("k"), 0, 4.999) {
			t.Errorf("%s: TryUpdate(k, 0, 4.999) at 5 admitted", im.name)
		}
		if !s.TryUpdate([]byte("k"), 0, 5) {
			t.Errorf("%s: TryUpdate(k, 0, 5) at 5 refused", im.name)
		}
		if !s.TryUpdate([]byte("k"), -1e300, 0) {
			t.Errorf("%s: TryUpdate(k, -1e300, 0) refused", im.name)
		}
		if q := s.Query([]byte("k")); q != -100 {
			t.Errorf("%s: after -1e300: %v, want clamped at Lo -100", im.name, q)
		}
		if !s.TryUpdate([]byte("k"), math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64) {
			t.Errorf("%s: TryUpdate(k, 5e-324, 5e-324) at -100 refused", im.name)
		}
	}
}

// TestAudit54RotatorNeverBelowWindowTruth: "Min aggregation never
// under-estimates: Query(k) >= the key's true score ..., whatever the
// ... rotations ... involved" and "Reads from the oldest generation,
// writes to all": the oldest generation has seen every write made after
// now - (Generations-1) x Period, so Query is at least the key alone
// under the law, started empty at that instant, with those writes
// (monotone laws: more history can only leave more). A crowded rotator,
// forward jumps of up to three periods.
func TestAudit54RotatorNeverBelowWindowTruth(t *testing.T) {
	type write struct {
		ms int64
		d  float64
	}
	for _, gens := range []uint32{2, 3} {
		for lname, law := range map[string]decay.Decay{"exp": decay.Exponential(0.5), "lin": decay.Linear(2), "none": decay.None()} {
			fc := sketchtest.NewFakeClock()
			fc.Set(1_700_000_000_123)
			const hi, period = 200.0, 1000
			r, err := rotator.New(rotator.Config{
				Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 6, Hi: hi, Decay: law, Clock: fc},
				Generations: gens,
				Period:      period * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			const nkeys = 25
			hist := make([][]write, nkeys)
			truth := func(k int, now int64) float64 {
				cut := now - int64(gens-1)*period
				v, at := 0.0, cut
				for _, w := range hist[k] {
					if w.ms <= cut {
						continue
					}
					v = math.Min(hi, law.Apply(v, w.ms-at)+w.d)
					at = w.ms
				}
				return law.Apply(v, now-at)
			}
			for step := range 3000 {
				switch x := (step * 2654435761) % 100; {
				case x < 2:
					fc.Set(fc.NowMillis() + int64(x+1)*period + int64(step%period))
				case x < 50:
					fc.Set(fc.NowMillis() + int64(step%97))
				}
				now := fc.NowMillis()
				k := (step * 7) % nkeys
				d := float64(step%11) + 0.5
				r.UpdateString(fmt.Sprint("key-", k), d)
				hist[k] = append(hist[k], write{now, d})
				for j := range nkeys {
					if q, want := r.QueryString(fmt.Sprint("key-", j)), truth(j, now); q < want {
						t.Fatalf("G=%d %s step %d key %d: Query %v < window truth %v", gens, lname, step, j, q, want)
					}
				}
			}
		}
	}
}
