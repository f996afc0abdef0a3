package sketchtest

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
)

// within reports whether got is want or above it by at most float32
// rounding and the exponential's bias (a relative 1e-5, as
// checkDecayLaws allows), and below it by at most float64 rounding (a
// relative 1e-12: a float64 Scorer that writes decayed scores back, as
// the reference does, composes the law in steps).
func within(got, want float64) bool {
	return got >= want-1e-12*math.Abs(want) && got <= want+1e-5*max(1, math.Abs(want))+1e-6
}

// checkDecisions: TryUpdate decides aggregate + delta <= limit in
// float64, for negative deltas too and at limits no float32 step
// reaches, and a denial writes nothing.
func checkDecisions(t *testing.T, newScorer Factory) {
	s := newScorer(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Lo: -1e9, Hi: 1e9})
	type step struct {
		key          string
		delta, limit float64
		admit        bool
		after        float64 // the key's Query after the call
	}
	for i, c := range []step{
		{"neg", 50, 1e6, true, 50},
		{"neg", -10, 30, false, 50}, // 40 > 30: a negative delta is decided too
		{"neg", -25, 30, true, 25},  // 25 <= 30
		{"neg", -25, 0, true, 0},    // 0 <= 0
		{"deny", 8, 100, true, 8},
		{"deny", 5, 10, false, 8}, // denied: nothing written, not even up to the limit
		{"deny", 2, 10, true, 10},
		{"deny", 0, 10, true, 10},
		{"deny", 0, 9.999, false, 10},
		{"f32", 1 << 24, 1e9, true, 1 << 24},
		{"f32", 1, 1 << 24, false, 1 << 24}, // 2^24 + 1 > 2^24, though float32 cannot tell
		{"small", 1000, 1e9, true, 1000},
		{"small", 1e-5, 1000, false, 1000}, // 1000 + 1e-5 > 1000
		{"small", 1e-5, 1000 + 2e-5, true, 1000 + 1e-5},
	} {
		if got := s.TryUpdateString(c.key, c.delta, c.limit); got != c.admit {
			t.Fatalf("step %d: TryUpdate(%q, %v, limit %v) = %v, want %v (the key read %v)", i, c.key, c.delta, c.limit, got, c.admit, s.QueryString(c.key))
		}
		if got := s.QueryString(c.key); !within(got, c.after) {
			t.Fatalf("step %d: after TryUpdate(%q, %v, limit %v): Query = %v, want %v", i, c.key, c.delta, c.limit, got, c.after)
		}
	}
}

// checkTwins: each String twin does what its []byte form does, on the
// same key.
func checkTwins(t *testing.T, newScorer Factory) {
	// A short key, one past the runtime's 32-byte conversion buffer, and a
	// long one: a string twin must hash the whole key.
	for _, k := range []string{"twin", "twin/" + strings.Repeat("x", 35), strings.Repeat("twin/", 60)} {
		checkTwinsKey(t, newScorer, k)
	}
}

// checkTwinsKey is checkTwins for one key.
func checkTwinsKey(t *testing.T, newScorer Factory, k string) {
	clk := NewFakeClock()
	s := newScorer(t, sketch.Config{Levels: 4, CellsPerLevel: 256, Hi: 1e9, Decay: decay.Linear(1), Clock: clk})
	b := []byte(k)
	s.UpdateString(k, 5)
	if got := s.Query(b); got != 5 {
		t.Fatalf("UpdateString(5), then Query = %v, want 5", got)
	}
	s.Update(b, 2)
	clk.Advance(500 * time.Millisecond)
	if got, want := s.QueryString(k), s.Query(b); got != want || !within(got, 6.5) {
		t.Fatalf("QueryString = %v, Query = %v, want both 6.5", got, want)
	}
	if got := s.UpdateAndQueryString(k, 1); !within(got, 7.5) {
		t.Fatalf("UpdateAndQueryString(1) = %v, want 7.5", got)
	}
	if got := s.UpdateAndQuery(b, 1); !within(got, 8.5) {
		t.Fatalf("UpdateAndQuery(1) after UpdateAndQueryString = %v, want 8.5", got)
	}
	if !s.TryUpdateString(k, 1.5, 10) || s.TryUpdateString(k, 0.5, 10) {
		t.Fatalf("TryUpdateString does not decide on the key's 8.5: %v", s.QueryString(k))
	}
	if got := s.Query(b); !within(got, 10) {
		t.Fatalf("Query = %v after TryUpdateString(1.5), want 10", got)
	}
	if s.TryUpdate(b, 0.5, 10) || !s.TryUpdate(b, 0, 10) {
		t.Fatalf("TryUpdate disagrees with TryUpdateString at 10: %v", s.Query(b))
	}
}

// checkDetail: QueryDetailed reports each level's cell decayed to the
// time of the call, its Score is the aggregate of those and equals Query
// at the same time, and two keys reporting one cell report one score.
func checkDetail(t *testing.T, newScorer Factory) {
	for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
		clk := NewFakeClock()
		clk.Set(5_000_000)
		const levels, m = 3, 8
		s := newScorer(t, sketch.Config{Levels: levels, CellsPerLevel: m, Hi: 1e9, Decay: decay.Linear(2), Aggregator: agg, Clock: clk})
		const keys = 40
		for j := range keys {
			s.Update(keyOf(j), float64(10+j*j%97))
		}
		clk.Advance(1500 * time.Millisecond) // every cell decays by 3
		type seen struct {
			key   int
			score float64
		}
		cells := make(map[[2]uint32]seen)
		for j := range keys {
			d := s.QueryDetailed(keyOf(j))
			if len(d.Levels) != levels {
				t.Fatalf("%v: QueryDetailed has %d levels, want %d", agg, len(d.Levels), levels)
			}
			v := make([]float64, levels)
			for l, lv := range d.Levels {
				v[l] = lv.Score
				if lv.Level != uint32(l) || lv.Index >= m {
					t.Fatalf("%v: key %d: level %d reports level %d, index %d", agg, j, l, lv.Level, lv.Index)
				}
				c := [2]uint32{lv.Level, lv.Index}
				if o, ok := cells[c]; ok && o.score != lv.Score {
					t.Fatalf("%v: keys %d and %d both report cell %d of level %d, with scores %v and %v", agg, o.key, j, lv.Index, lv.Level, o.score, lv.Score)
				}
				cells[c] = seen{j, lv.Score}
			}
			if want := aggregate(agg, v); !(math.Abs(d.Score-want) <= 1e-12*max(1, math.Abs(want))) {
				t.Fatalf("%v: key %d: QueryDetailed.Score = %v, the aggregate of its levels %v is %v", agg, j, d.Score, v, want)
			}
			if q := s.Query(keyOf(j)); q != d.Score {
				t.Fatalf("%v: key %d: Query = %v, QueryDetailed.Score = %v at the same time (decayed levels %v)", agg, j, q, d.Score, v)
			}
		}
		if len(cells) < levels*2 {
			t.Fatalf("%v: %d keys report only %d distinct cells over %d levels of %d", agg, keys, len(cells), levels, m)
		}
	}
}

// aggregate is the built-in aggregators' arithmetic, written out.
func aggregate(agg sketch.Aggregator, v []float64) float64 {
	r := v[0]
	switch agg {
	case sketch.Max:
		for _, x := range v[1:] {
			r = max(r, x)
		}
	case sketch.Mean:
		for _, x := range v[1:] {
			r += x
		}
		r /= float64(len(v))
	default:
		for _, x := range v[1:] {
			r = min(r, x)
		}
	}
	return r
}

// checkLongIdle: idle times from 1 ms to years decay as the law says, on
// laws slow enough that a wrong age does not hide behind a score at 0:
// each idle time on a fresh Scorer, then one Scorer read at growing
// times. A Scorer that forgets (forget > 0) reads 0 from forget on.
func checkLongIdle(t *testing.T, newScorer Factory, forget time.Duration) {
	within := func(got, want float64, idle int64) bool {
		if forget > 0 && idle >= forget.Milliseconds() {
			return got == 0
		}
		return within(got, want)
	}
	// Past the sketch's exponential tables (2^24 ms), hours, the stamp
	// horizon's edges, then months and years; for a Scorer that forgets,
	// also an hour before it does (every other long idle there only
	// checks that the score is gone).
	idles := []int64{1, 1<<24 + 1, 10 * 3_600_000, 1 << 31, 1<<32 - 1, 1 << 32, 1<<32 + 5000, 99 * 86_400_000, 1 << 36, 3 * 365 * 86_400_000}
	if f := forget.Milliseconds(); f > 2*3_600_000 {
		idles = append(idles, f-3_600_000)
		slices.Sort(idles)
	}
	for _, law := range []decay.Decay{decay.Exponential(1e-7), decay.Exponential(1e-9), decay.Linear(1e-7)} {
		for _, idle := range idles {
			clk := NewFakeClock()
			clk.Set(1_000_000)
			s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: law, Clock: clk})
			s.Update([]byte("idle"), 50)
			clk.Advance(time.Duration(idle) * time.Millisecond)
			if got, want := s.Query([]byte("idle")), law.Apply(50, idle); !within(got, want, idle) {
				t.Fatalf("%v: Query = %v after %d ms idle, want %v", law, got, idle, want)
			}
		}
		clk := NewFakeClock()
		clk.Set(1_000_000)
		s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e9, Decay: law, Clock: clk})
		s.Update([]byte("idle"), 50)
		for _, idle := range idles {
			clk.Set(1_000_000 + idle)
			if got, want := s.Query([]byte("idle")), law.Apply(50, idle); !within(got, want, idle) {
				t.Fatalf("%v: read at growing times: Query = %v after %d ms idle, want %v", law, got, idle, want)
			}
		}
	}
}

// checkHiInf: with Hi = +Inf (and a decay that drains) a score saturates
// at a finite value at least MaxFloat32, whatever is added; no read is
// ever Inf.
func checkHiInf(t *testing.T, newScorer Factory) {
	// A frozen clock: a saturated score decays like any other.
	s := newScorer(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: math.Inf(1), Decay: decay.Exponential(0.1), Clock: NewFakeClock()})
	k := []byte("huge")
	check := func(what string, got float64) {
		t.Helper()
		if math.IsInf(got, 0) || math.IsNaN(got) || got < math.MaxFloat32 {
			t.Fatalf("Hi = +Inf: %s = %v, want a finite score >= MaxFloat32 (saturated)", what, got)
		}
	}
	s.Update(k, 1e39)
	check("Query after +1e39", s.Query(k))
	s.Update(k, math.MaxFloat64)
	check("Query after +MaxFloat64", s.Query(k))
	check("UpdateAndQuery(+MaxFloat64)", s.UpdateAndQuery(k, math.MaxFloat64))
	d := s.QueryDetailed(k)
	check("QueryDetailed.Score", d.Score)
	for _, lv := range d.Levels {
		check(fmt.Sprintf("level %d", lv.Level), lv.Score)
	}
	if s.TryUpdate(k, 1e39, math.MaxFloat64) != (d.Score+1e39 <= math.MaxFloat64) {
		t.Fatalf("Hi = +Inf: TryUpdate(1e39, MaxFloat64) at %v does not decide aggregate + delta <= limit", d.Score)
	}
	check("Query after TryUpdate", s.Query(k))
}

// checkNoGoroutine: no goroutine outlives the Scorers built in a subtest
// once its t.Cleanup functions have run (a Scorer with a ticker closes it
// there); one goroutine per Scorer left running fails.
func checkNoGoroutine(t *testing.T, newScorer Factory) {
	const n = 20
	before := settledGoroutines()
	t.Run("build", func(t *testing.T) {
		clk := NewFakeClock()
		for range n {
			s := newScorer(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 100, Decay: decay.Linear(1), Clock: clk})
			s.Update([]byte("k"), 1)
			clk.Advance(time.Second)
			s.Query([]byte("k"))
		}
	})
	// Goroutines stopped by Close may take a moment to exit; half of n
	// leaves room for goroutines other tests start meanwhile.
	grown := 0
	for range 100 {
		if grown = runtime.NumGoroutine() - before; grown < n/2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d goroutines more than before building %d Scorers (their cleanups done): a goroutine per Scorer outlives it; stacks:\n%s", grown, n, stacks())
}

// settledGoroutines returns the goroutine count once the goroutines of
// earlier checks have exited (it stops falling), waiting at most a
// second: a count taken while they exit would hide new ones.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(2 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

func stacks() string {
	buf := make([]byte, 1<<16)
	buf = buf[:runtime.Stack(buf, true)]
	if s := string(buf); len(s) > 4000 {
		return s[:4000] + "\n..."
	}
	return strings.TrimSpace(string(buf))
}
