package sketchtest

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/sketch"
)

// Factory builds the Scorer under test for cfg. cfg.Clock is a *FakeClock
// when the check needs to drive time (and nil otherwise); Levels,
// CellsPerLevel, Decay, Lo, Hi and Aggregator are set. A wrapper that
// cannot honour a field (a fixed hasher, say) may ignore Seed and Hasher:
// no check depends on them.
type Factory func(t testing.TB, cfg sketch.Config) sketch.Scorer

// TestScorer checks the contract of sketch.Scorer (see package sketch)
// against the implementation newScorer builds, in the manner of
// testing/fstest.TestFS: one-sided error, the decay laws, the
// aggregators, the clamp, the TryUpdate sentinel for one key and for
// colliding keys, NaN/Inf panics that leave the cells untouched, a limit
// above Hi deciding as grudge does, clock safety (a backwards step is
// neither growth nor decay, after a read or a write), zero allocations on
// the hot methods (with each built-in aggregator and keys of 9 to 1000
// bytes), the time-first At forms when the Scorer has them, TryUpdate's
// decision (aggregate + delta <= limit in float64, negative deltas
// included, a denial writing nothing), the String twins doing what their
// []byte forms do, QueryDetailed's levels (decayed to now, one cell per
// index), idle times from 1 ms to years on slow laws, Hi = +Inf saturating
// at a finite score, and no goroutine outliving the Scorer (its
// t.Cleanup functions run). It is the one place these properties are
// tested. Each check is a subtest; under -short the concurrent ones run
// fewer repetitions. TestRotator adds the rotators' window.
func TestScorer(t *testing.T, newScorer Factory) {
	checkScorer(t, newScorer, 0)
}

// checkScorer is TestScorer for a Scorer that forgets a score once it has
// gone forget without a write (a rotator's Generations x Period), or never
// (forget 0).
func checkScorer(t *testing.T, newScorer Factory, forget time.Duration) {
	t.Run("OneSided", func(t *testing.T) { checkOneSided(t, newScorer) })
	t.Run("DecayLaws", func(t *testing.T) { checkDecayLaws(t, newScorer) })
	t.Run("Aggregators", func(t *testing.T) { checkAggregators(t, newScorer) })
	t.Run("Clamp", func(t *testing.T) { checkClamp(t, newScorer) })
	t.Run("Sentinel", func(t *testing.T) { checkSentinel(t, newScorer) })
	t.Run("Collisions", func(t *testing.T) { checkCollisions(t, newScorer) })
	t.Run("ConcurrentUpdates", func(t *testing.T) { checkConcurrentUpdates(t, newScorer) })
	t.Run("NonFinitePanics", func(t *testing.T) { checkNonFinite(t, newScorer) })
	t.Run("LimitAboveHi", func(t *testing.T) { checkLimitAboveHi(t, newScorer) })
	t.Run("ClockSafety", func(t *testing.T) { checkClockSafety(t, newScorer) })
	t.Run("ZeroAllocs", func(t *testing.T) { checkZeroAllocs(t, newScorer) })
	t.Run("AtForms", func(t *testing.T) { checkAtForms(t, newScorer) })
	t.Run("Decisions", func(t *testing.T) { checkDecisions(t, newScorer) })
	t.Run("Twins", func(t *testing.T) { checkTwins(t, newScorer) })
	t.Run("Detail", func(t *testing.T) { checkDetail(t, newScorer) })
	t.Run("LongIdle", func(t *testing.T) { checkLongIdle(t, newScorer, forget) })
	t.Run("HiInf", func(t *testing.T) { checkHiInf(t, newScorer) })
	t.Run("NoGoroutine", func(t *testing.T) { checkNoGoroutine(t, newScorer) })
}

// ForEachGOMAXPROCS runs f as subtests "procs=N" at GOMAXPROCS 1, 2, 4
// and 8, restoring the setting afterwards.
func ForEachGOMAXPROCS(t *testing.T, f func(t *testing.T)) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, p := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			runtime.GOMAXPROCS(p)
			f(t)
		})
	}
}

// Panics runs f and returns what it panicked with, as a string, or "" if
// it returned normally.
func Panics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
			if msg == "" {
				msg = "(empty panic value)"
			}
		}
	}()
	f()
	return ""
}

func reps(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// checkOneSided: with Min and non-negative deltas, every key's estimate is
// at least its own total, however many keys share cells.
func checkOneSided(t *testing.T, newScorer Factory) {
	s := newScorer(t, sketch.Config{Levels: 3, CellsPerLevel: 16, Hi: 1e9})
	truth := make([]float64, 200)
	for i := range 5000 {
		k := (i * 7919) % len(truth)
		d := float64(i%5) * 0.75
		s.Update(keyOf(k), d)
		truth[k] += d
	}
	for k, want := range truth {
		if got := s.Query(keyOf(k)); got < want {
			t.Fatalf("key %d: Query = %v < its true total %v", k, got, want)
		}
	}
}

func keyOf(i int) []byte { return []byte(fmt.Sprintf("key-%d", i)) }

// checkDecayLaws: a single key decays as its law says, to float32
// precision, and never below the law's value.
func checkDecayLaws(t *testing.T, newScorer Factory) {
	laws := []struct {
		law decay.Decay
	}{{decay.None()}, {decay.Exponential(0.5)}, {decay.Linear(3)}}
	for _, lw := range laws {
		t.Run(fmt.Sprintf("%v", lw.law), func(t *testing.T) {
			clk := NewFakeClock()
			clk.Set(1_000_000)
			s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: lw.law, Clock: clk})
			k := []byte("k")
			s.Update(k, 100)
			elapsed := int64(0)
			for _, step := range []time.Duration{time.Millisecond, 700 * time.Millisecond, 3 * time.Second, 5 * time.Minute} {
				clk.Advance(step)
				elapsed += step.Milliseconds()
				want := lw.law.Apply(100, elapsed)
				got := s.Query(k)
				if got < want || got > want+1e-5*max(1, want)+1e-6 {
					t.Fatalf("after %d ms: Query = %v, want %v (>=, within float32 rounding)", elapsed, got, want)
				}
			}
		})
	}
}

// checkAggregators: QueryDetailed's Score is the aggregator of its level
// scores, and Query agrees with it.
func checkAggregators(t *testing.T, newScorer Factory) {
	for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Mean, sketch.Max} {
		s := newScorer(t, sketch.Config{Levels: 4, CellsPerLevel: 8, Hi: 1e9, Aggregator: agg})
		for j := range 64 {
			s.Update(keyOf(j), float64(j%7))
		}
		k := keyOf(3)
		d := s.QueryDetailed(k)
		if len(d.Levels) != 4 {
			t.Fatalf("%v: QueryDetailed has %d levels, want 4", agg, len(d.Levels))
		}
		v := make([]float64, len(d.Levels))
		for l, lv := range d.Levels {
			v[l] = lv.Score
			if lv.Level != uint32(l) || lv.Index >= 8 {
				t.Fatalf("%v: level %d reports level %d, index %d", agg, l, lv.Level, lv.Index)
			}
		}
		if want := core.Aggregator(agg).Aggregate(v); d.Score != want {
			t.Fatalf("%v: QueryDetailed.Score = %v, aggregate of its levels %v is %v", agg, d.Score, v, want)
		}
		if q := s.Query(k); q != d.Score {
			t.Fatalf("%v: Query = %v, QueryDetailed.Score = %v", agg, q, d.Score)
		}
	}
}

// checkClamp: scores stay within [Lo, Hi], whatever is added.
func checkClamp(t *testing.T, newScorer Factory) {
	s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Lo: -5, Hi: 100})
	k := []byte("clamp")
	s.Update(k, 1e6)
	if got := s.Query(k); got != 100 {
		t.Fatalf("after +1e6: Query = %v, want Hi = 100", got)
	}
	if got := s.UpdateAndQuery(k, -1e6); got != -5 {
		t.Fatalf("after -1e6: UpdateAndQuery = %v, want Lo = -5", got)
	}
	if got := s.UpdateAndQueryString("clamp", 1e6); got != 100 {
		t.Fatalf("UpdateAndQueryString(+1e6) = %v, want 100", got)
	}
	if s.TryUpdate(k, 1, 100) {
		t.Fatal("TryUpdate(1, 100) admitted at Hi")
	}
	if !s.TryUpdate(k, -50, 100) || s.Query(k) != 50 {
		t.Fatalf("TryUpdate(-50, 100) at Hi: Query = %v, want 50", s.Query(k))
	}
	checkClampInexact(t, newScorer)
}

// checkClampInexact: with a Hi that no float32 holds (0.1, 7.7, 1e9+1,
// with 3 to 7 levels, whose Mean of capped levels can round above Hi),
// a key at the clamp reads Hi exactly, never above it, through every
// read and with every built-in aggregator, and TryUpdate(k, 0, Hi) is
// admitted there (Hi + 0 <= Hi).
func checkClampInexact(t *testing.T, newScorer Factory) {
	for _, c := range []struct {
		hi     float64
		levels uint32
	}{{0.1, 4}, {1.1, 4}, {1e9 + 1, 4}, {0.1, 3}, {7.7, 3}, {0.1, 7}, {100.1, 6}} {
		hi := c.hi
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			s := newScorer(t, sketch.Config{Levels: c.levels, CellsPerLevel: 64, Hi: hi, Aggregator: agg})
			k := []byte("clamp")
			// Hi exactly; a Mean may round a float64 ulp or two below.
			atHi := func(v float64) bool { return v == hi || agg == sketch.Mean && v < hi && v >= hi*(1-1e-15) }
			if got := s.UpdateAndQuery(k, 2*hi); !atHi(got) {
				t.Fatalf("Hi %v, %d levels, %v: UpdateAndQuery(2 Hi) = %v, want Hi", hi, c.levels, agg, got)
			}
			if got := s.Query(k); !atHi(got) {
				t.Fatalf("Hi %v, %d levels, %v: Query = %v, want Hi", hi, c.levels, agg, got)
			}
			d := s.QueryDetailed(k)
			if !atHi(d.Score) {
				t.Fatalf("Hi %v, %d levels, %v: QueryDetailed score %v, want Hi", hi, c.levels, agg, d.Score)
			}
			for _, lv := range d.Levels {
				if lv.Score != hi {
					t.Fatalf("Hi %v, %v: level %d reads %v, want Hi", hi, agg, lv.Level, lv.Score)
				}
			}
			if !s.TryUpdate(k, 0, hi) {
				t.Fatalf("Hi %v, %v: TryUpdate(0, Hi) denied at the clamp: Hi + 0 <= Hi", hi, agg)
			}
			if s.TryUpdate(k, hi/1e6, hi) {
				t.Fatalf("Hi %v, %v: TryUpdate(Hi/1e6, Hi) admitted at the clamp", hi, agg)
			}
		}
	}
}

// checkSentinel: 50 goroutines racing TryUpdate(k, 1, 1000), no decay,
// admit exactly 1000, through the []byte and the string entry points, at
// GOMAXPROCS 1, 2, 4 and 8.
func checkSentinel(t *testing.T, newScorer Factory) {
	const goroutines, limit = 50, 1000
	for _, str := range []bool{false, true} {
		t.Run(fmt.Sprintf("string=%v", str), func(t *testing.T) {
			ForEachGOMAXPROCS(t, func(t *testing.T) {
				for rep := range reps(20, 3) {
					s := newScorer(t, sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e9, Seed: uint64(rep)})
					try := func() bool { return s.TryUpdate([]byte("sentinel"), 1, limit) }
					if str {
						try = func() bool { return s.TryUpdateString("sentinel", 1, limit) }
					}
					if got := race(goroutines, try); got != limit {
						t.Fatalf("rep %d: admitted %d, want exactly %d", rep, got, limit)
					}
					for _, lv := range s.QueryDetailed([]byte("sentinel")).Levels {
						if lv.Score != limit {
							t.Fatalf("rep %d: level %d holds %v after the race, want %d", rep, lv.Level, lv.Score, limit)
						}
					}
				}
			})
		})
	}
}

// race starts n goroutines together, each calling try until it denies,
// and returns the number of admissions.
func race(n int, try func() bool) int64 {
	var admitted atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			for try() {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return admitted.Load()
}

// checkCollisions: with CellsPerLevel = 1 every key's estimate is the
// total, so over many distinct keys racing TryUpdate the admissions never
// exceed the limit; with M = 4 no key passes its own limit.
func checkCollisions(t *testing.T, newScorer Factory) {
	ForEachGOMAXPROCS(t, func(t *testing.T) {
		for rep := range reps(20, 3) {
			s := newScorer(t, sketch.Config{Levels: 3, CellsPerLevel: 1, Hi: 1e9, Seed: uint64(rep)})
			var next atomic.Int64
			const limit = 300
			got := race(32, func() bool {
				return s.TryUpdate(keyOf(int(next.Add(1))), 1, limit)
			})
			if got > limit {
				t.Fatalf("rep %d: %d admitted over colliding keys, limit %d", rep, got, limit)
			}
			if got != limit {
				t.Fatalf("rep %d: %d admitted over colliding keys, want exactly %d (no decay, positive deltas)", rep, got, limit)
			}
		}
	})
}

// checkNonFinite: a NaN or ±Inf delta or limit panics with a "sketch:"
// message and leaves every cell of the key as it was.
func checkNonFinite(t *testing.T, newScorer Factory) {
	clk := NewFakeClock()
	s := newScorer(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Lo: -1e6, Hi: 1e6, Decay: decay.Exponential(0.5), Clock: clk})
	key := []byte("victim")
	s.Update(key, 42)
	clk.Advance(1500 * time.Millisecond) // the cells now have an age
	ops := []struct {
		name string
		f    func(v float64)
	}{
		{"Update", func(v float64) { s.Update(key, v) }},
		{"UpdateString", func(v float64) { s.UpdateString("victim", v) }},
		{"UpdateAndQuery", func(v float64) { s.UpdateAndQuery(key, v) }},
		{"UpdateAndQueryString", func(v float64) { s.UpdateAndQueryString("victim", v) }},
		{"TryUpdate/delta", func(v float64) { s.TryUpdate(key, v, 1e6) }},
		{"TryUpdate/limit", func(v float64) { s.TryUpdate(key, 1, v) }},
		{"TryUpdateString/delta", func(v float64) { s.TryUpdateString("victim", v, 1e6) }},
		{"TryUpdateString/limit", func(v float64) { s.TryUpdateString("victim", 1, v) }},
	}
	for _, op := range ops {
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			before := s.QueryDetailed(key)
			msg := Panics(func() { op.f(v) })
			switch {
			case msg == "":
				t.Errorf("%s(%v) did not panic", op.name, v)
			case !strings.HasPrefix(msg, "sketch:"):
				t.Errorf("%s(%v) panicked with %q, want a message starting \"sketch:\"", op.name, v, msg)
			}
			if after := s.QueryDetailed(key); !reflect.DeepEqual(before, after) {
				t.Errorf("%s(%v) changed the key's cells: before %+v, after %+v", op.name, v, before, after)
			}
		}
	}
}

// checkLimitAboveHi: any finite limit is accepted, above Hi too (as in
// grudge), and the decision stays aggregate + delta <= limit: with Hi = 10
// and limit = 15, a key saturated at 10 is still admitted by delta 5
// (10 + 5 <= 15) and denied by delta 6; scores stay clamped at Hi.
func checkLimitAboveHi(t *testing.T, newScorer Factory) {
	s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 10})
	k := []byte("k")
	for i := range 3 {
		if !s.TryUpdate(k, 4, 20) {
			t.Fatalf("TryUpdate(4, limit 20) #%d denied at %v: the decision is aggregate + delta <= limit", i, s.Query(k))
		}
	}
	if got := s.Query(k); got != 10 {
		t.Fatalf("after 12 admitted into Hi 10: Query = %v, want the clamp 10", got)
	}
	if s.TryUpdateString("k", 6, 15) {
		t.Error("TryUpdate(6, limit 15) admitted at the clamp 10: 10 + 6 > 15")
	}
	if !s.TryUpdateString("k", 5, 15) {
		t.Error("TryUpdate(5, limit 15) denied at the clamp 10: 10 + 5 <= 15")
	}
	if !s.TryUpdate([]byte("other"), 0.5, 10.5) {
		t.Error("TryUpdate(0.5, limit Hi + 0.5) denied on a fresh key")
	}
	if got := s.Query(k); got != 10 {
		t.Errorf("Query = %v after admissions past Hi, want the clamp 10", got)
	}
}

// checkClockSafety: a clock that steps back counts as zero elapsed time:
// no score grows without an update, and long jumps forward decay fully.
func checkClockSafety(t *testing.T, newScorer Factory) {
	for _, law := range []decay.Decay{decay.Linear(1), decay.Exponential(0.1)} {
		clk := NewFakeClock()
		clk.Set(10_000_000)
		s := newScorer(t, sketch.Config{Levels: 4, CellsPerLevel: 256, Hi: 1e9, Decay: law, Clock: clk})
		k := []byte("k")
		s.Update(k, 50)
		clk.Advance(5 * time.Second)
		at := s.Query(k)
		// The clock never gets back to the latest time used here: every
		// step counts as zero elapsed time, neither growth nor decay.
		for _, step := range []time.Duration{-time.Second, -time.Hour, 500 * time.Millisecond, -24 * time.Hour} {
			clk.Advance(step)
			if got := s.Query(k); got > at {
				t.Fatalf("%v: Query rose from %v to %v after a clock step of %v", law, at, got, step)
			} else if got < at {
				t.Fatalf("%v: Query fell from %v to %v after a clock step of %v, before the latest time used: a step back is no elapsed time", law, at, got, step)
			}
		}
		clk.Set(10_000_000 + 6000) // a second past the latest time used
		if want := law.Apply(50, 6000); !within(s.Query(k), want) {
			t.Fatalf("%v: Query = %v a second past the latest time used (%v before), want %v", law, s.Query(k), at, want)
		}
		clk.Set(10_000_000 + (int64(1) << 33)) // ~99 days on
		if got := s.Query(k); got != 0 {
			t.Fatalf("%v: Query = %v after 99 days, want 0", law, got)
		}

		// After a write at T, a clock stepped back before T never raises
		// the score, and an update in the past adds at most its delta.
		w := []byte("written")
		s.Update(w, 100)
		clk.Advance(10 * time.Second)
		q1 := s.UpdateAndQuery(w, 0) // a write at T stamps the cells
		for _, back := range []time.Duration{time.Millisecond, time.Second, 5 * time.Second, time.Hour} {
			clk.Advance(-back)
			if q := s.Query(w); q > q1 {
				t.Fatalf("%v: clock stepped back %v after a write: Query = %v grew above %v", law, back, q, q1)
			}
			clk.Advance(back)
		}
		clk.Advance(-5 * time.Second)
		if got := s.UpdateAndQuery(w, 1); got > q1+1 {
			t.Fatalf("%v: an update in the past: %v > %v + 1", law, got, q1)
		}
	}
}

// checkConcurrentUpdates: goroutines racing Update, UpdateAndQuery and
// their string twins lose nothing: with no decay and whole deltas, a key
// alone reads exactly its total, and keys sharing every cell (one cell a
// level) read at least their own totals. (A read-modify-write that is
// not atomic passed every other check: audit 41.)
func checkConcurrentUpdates(t *testing.T, newScorer Factory) {
	ForEachGOMAXPROCS(t, func(t *testing.T) {
		const workers = 4
		n := reps(1000, 200)
		for _, cells := range []uint32{1024, 1} {
			s := newScorer(t, sketch.Config{Levels: 3, CellsPerLevel: cells, Hi: 1e9, Clock: NewFakeClock()})
			keys := []string{"racing-a", "racing-b"}
			if cells > 1 {
				keys = keys[:1]
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range n {
						k := keys[(w+i)%len(keys)]
						switch i % 4 {
						case 0:
							s.Update([]byte(k), 1)
						case 1:
							s.UpdateString(k, 1)
						case 2:
							s.UpdateAndQuery([]byte(k), 1)
						default:
							s.UpdateAndQueryString(k, 1)
						}
					}
				})
			}
			wg.Wait()
			total := float64(workers * n)
			if len(keys) == 1 {
				if got := s.QueryString(keys[0]); got != total {
					t.Fatalf("%d goroutines x %d racing updates of +1 on one key: Query = %v, want %v", workers, n, got, total)
				}
				continue
			}
			// Every key shares every cell: each cell holds the sum.
			for _, k := range keys {
				if got := s.QueryString(k); got != total {
					t.Fatalf("%d goroutines x %d racing updates of +1 on keys sharing one cell a level: Query(%s) = %v, want the cells' sum %v", workers, n, k, got, total)
				}
			}
		}
	})
}

// checkZeroAllocs: Update, Query, UpdateAndQuery, TryUpdate (admitted and
// denied) and their string twins do not allocate.
func checkZeroAllocs(t *testing.T, newScorer Factory) {
	for i, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
		clk := NewFakeClock()
		s := newScorer(t, sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e9, Decay: decay.Exponential(0.01), Aggregator: agg, Clock: clk})
		// A short key, one past the runtime's 32-byte conversion buffer,
		// and a long one.
		skey := []string{"alloc-key", strings.Repeat("k", 64), strings.Repeat("key/", 250)}[i]
		key := []byte(skey)
		const admit, deny = 1e9, -1.0
		var sink float64
		ops := []struct {
			name string
			f    func()
		}{
			{"Update", func() { s.Update(key, 1) }},
			{"Query", func() { sink += s.Query(key) }},
			{"UpdateAndQuery", func() { sink += s.UpdateAndQuery(key, 1) }},
			{"TryUpdate/admitted", func() { s.TryUpdate(key, 1, admit) }},
			{"TryUpdate/denied", func() { s.TryUpdate(key, 1, deny) }},
			{"UpdateString", func() { s.UpdateString(skey, 1) }},
			{"QueryString", func() { sink += s.QueryString(skey) }},
			{"UpdateAndQueryString", func() { sink += s.UpdateAndQueryString(skey, 1) }},
			{"TryUpdateString/admitted", func() { s.TryUpdateString(skey, 1, admit) }},
			{"TryUpdateString/denied", func() { s.TryUpdateString(skey, 1, deny) }},
		}
		// One run of 256 calls: testing.AllocsPerRun divides the mallocs by
		// the runs in integers, so 200 runs of one call each passed a
		// Scorer that allocated on every second call (audit 41).
		// The least of three measurements: the count is the process's, and
		// a runtime or test goroutine may allocate once during one (a
		// Scorer that allocates does so every time).
		const calls = 256
		for _, op := range ops {
			n := math.Inf(1)
			for range 3 {
				n = min(n, testing.AllocsPerRun(1, func() {
					for range calls {
						clk.Advance(time.Millisecond)
						op.f()
					}
				}))
				if n == 0 {
					break
				}
			}
			if n != 0 {
				t.Errorf("%v %s, a %d-byte key: %v allocations in %d calls, want 0", agg, op.name, len(key), n, calls)
			}
		}
		_ = sink
	}
}

// AtScorer is the time-first At forms that sketch.Sketch, the reference
// and the rotators have; TestScorer checks them when the Scorer has them.
type AtScorer interface {
	UpdateAt(t time.Time, key string, delta float64)
	QueryAt(t time.Time, key string) float64
	UpdateAndQueryAt(t time.Time, key string, delta float64) float64
	TryUpdateAt(t time.Time, key string, delta, limit float64) bool
}

// checkAtForms: a time from the clock's Now() or a stored wall time means
// what it says; a future time counts as the clock's reading and never
// stops decay; a past one counts as the latest time used.
func checkAtForms(t *testing.T, newScorer Factory) {
	clk := NewFakeClock()
	clk.Set(1_700_000_000_000)
	s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(10), Clock: clk})
	a, ok := s.(AtScorer)
	if !ok {
		return // the At forms are optional
	}
	k := "k"
	a.UpdateAt(clk.Now(), k, 100)
	a.UpdateAt(time.UnixMilli(clk.NowMillis()), "wall", 100)
	a.UpdateAt(clk.Now().Add(1000*time.Hour), "future", 50)
	clk.Advance(time.Second)
	if got := s.QueryString("future"); got != 40 {
		t.Errorf("Query = %v one second after UpdateAt(an hour ahead, 50) at 10/s, want 40: a future time counts as the clock's reading", got)
	}
	for name, got := range map[string]float64{
		"Query":                  s.Query([]byte(k)),
		"QueryAt(now)":           a.QueryAt(clk.Now(), k),
		"QueryAt(wall)":          a.QueryAt(time.UnixMilli(clk.NowMillis()), "wall"),
		"QueryAt(an hour ago)":   a.QueryAt(clk.Now().Add(-time.Hour), k),
		"QueryAt(an hour ahead)": a.QueryAt(clk.Now().Add(time.Hour), k),
	} {
		if got != 90 {
			t.Errorf("%s = %v one second after 100 at 10/s (and a future UpdateAt), want 90", name, got)
		}
	}
	if !a.TryUpdateAt(clk.Now(), k, 5, 95) || a.TryUpdateAt(clk.Now(), k, 1, 95) {
		t.Error("TryUpdateAt does not decide at the given time")
	}
	if got := a.UpdateAndQueryAt(clk.Now(), k, 5); got != 100 {
		t.Errorf("UpdateAndQueryAt = %v, want 100", got)
	}

	// A time between the latest time used and the clock's reading is the
	// time of the call.
	clk = NewFakeClock()
	clk.Set(1_700_000_000_000)
	s = newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Linear(10), Clock: clk})
	a = s.(AtScorer)
	t0 := clk.Now()
	a.UpdateAt(t0, k, 100)
	clk.Advance(5 * time.Second)
	if got := a.QueryAt(t0.Add(time.Second), k); got != 90 {
		t.Errorf("QueryAt(t0 + 1 s) = %v after UpdateAt(t0, 100) at 10/s, the clock at t0 + 5 s: want 90", got)
	}
	if !a.TryUpdateAt(t0.Add(2*time.Second), k, 20, 100) || a.TryUpdateAt(t0.Add(2*time.Second), k, 1, 100) {
		t.Errorf("TryUpdateAt(t0 + 2 s) does not decide on 80: %v", a.QueryAt(t0.Add(2*time.Second), k))
	}
	if got := a.UpdateAndQueryAt(t0.Add(3*time.Second), k, 0); got != 90 {
		t.Errorf("UpdateAndQueryAt(t0 + 3 s, 0) = %v, want 90 (100 at t0 + 2 s, less 10)", got)
	}
}
