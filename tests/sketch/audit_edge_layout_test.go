package sketch_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAuditEdgeDetailLayout: QueryDetailed reports levels 0..L-1 in order,
// indexes in [0, M), the same cells as the reference for the same Config,
// and a Score equal to Query, for both hashers and several seeds.
func TestAuditEdgeDetailLayout(t *testing.T) {
	for _, hf := range []struct {
		name string
		f    sketch.HasherFactory
	}{{"xxh3", sketch.XXH3()}, {"siphash", sketch.SipHash()}, {"nil", nil}} {
		for _, m := range []uint32{1, 2, 3, 1000, 100_003} {
			for _, seed := range []uint64{0, 1, math.MaxUint64} {
				for _, agg := range allAggregators {
					clk := sketchtest.NewFakeClock()
					cfg := sketch.Config{Levels: 5, CellsPerLevel: m, Hasher: hf.f, Seed: seed, Hi: 1e6, Decay: decay.Exponential(0.1), Aggregator: agg, Clock: clk}
					s := mustNewSketch(t, cfg)
					r, err := reference.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					for i := range 40 {
						k := []byte(fmt.Sprintf("key-%d", i))
						s.Update(k, float64(i))
						r.Update(k, float64(i))
					}
					clk.Advance(1234 * time.Millisecond)
					for i := range 40 {
						k := []byte(fmt.Sprintf("key-%d", i))
						d, rd := s.QueryDetailed(k), r.QueryDetailed(k)
						if len(d.Levels) != 5 || len(rd.Levels) != 5 {
							t.Fatalf("levels %d / reference %d; want 5", len(d.Levels), len(rd.Levels))
						}
						for l, lv := range d.Levels {
							if lv.Level != uint32(l) || lv.Index >= m {
								t.Fatalf("%s M=%d: level entry %d = %+v", hf.name, m, l, lv)
							}
							if lv.Index != rd.Levels[l].Index || lv.Level != rd.Levels[l].Level {
								t.Fatalf("%s M=%d seed=%d: level %d index %d, reference %d", hf.name, m, seed, l, lv.Index, rd.Levels[l].Index)
							}
							if rs := rd.Levels[l].Score; lv.Score < rs || lv.Score > rs*(1+1e-6)+1e-6 {
								t.Fatalf("%s M=%d: level %d score %v, reference %v", hf.name, m, l, lv.Score, rs)
							}
						}
						if q := s.Query(k); q != d.Score {
							t.Fatalf("%s M=%d agg=%v: Query %v != QueryDetailed.Score %v", hf.name, m, agg, q, d.Score)
						}
						if q := s.QueryString(string(k)); q != d.Score {
							t.Fatalf("QueryString %v != QueryDetailed.Score %v", q, d.Score)
						}
					}
				}
			}
		}
	}
}

// TestAuditEdgeSeedChangesLayout: different seeds give different layouts
// (for SipHash the key is expanded from the seed, and for XXH3 too).
func TestAuditEdgeSeedChangesLayout(t *testing.T) {
	for _, hf := range []sketch.HasherFactory{sketch.SipHash(), sketch.XXH3()} {
		layout := func(seed uint64) [][]uint32 {
			s := mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 1 << 16, Hasher: hf, Seed: seed, Hi: 1})
			var out [][]uint32
			for i := range 64 {
				d := s.QueryDetailed([]byte(fmt.Sprint(i)))
				var ix []uint32
				for _, lv := range d.Levels {
					ix = append(ix, lv.Index)
				}
				out = append(out, ix)
			}
			return out
		}
		seeds := []uint64{0, 1, 2, 1 << 32, 1 << 63, math.MaxUint64}
		ls := make([][][]uint32, len(seeds))
		for i, sd := range seeds {
			ls[i] = layout(sd)
		}
		for i := range seeds {
			for j := i + 1; j < len(seeds); j++ {
				same := 0
				for k := range ls[i] {
					for l := range ls[i][k] {
						if ls[i][k][l] == ls[j][k][l] {
							same++
						}
					}
				}
				if same > 8 { // expected ~0 of 256 at M=65536
					t.Errorf("seeds %d and %d share %d of 256 cell choices", seeds[i], seeds[j], same)
				}
			}
		}
		// Levels are independent: a key does not use the same index on
		// every level.
		s := mustNewSketch(t, sketch.Config{Levels: 8, CellsPerLevel: 1 << 16, Hasher: hf, Seed: 7, Hi: 1})
		allSame := 0
		for i := range 64 {
			d := s.QueryDetailed([]byte(fmt.Sprint(i)))
			eq := true
			for _, lv := range d.Levels[1:] {
				eq = eq && lv.Index == d.Levels[0].Index
			}
			if eq {
				allSame++
			}
		}
		if allSame > 0 {
			t.Errorf("%d of 64 keys use the same index on all 8 levels", allSame)
		}
	}
}

// TestAuditEdgeNoAllocs: the string twins and the At forms do not
// allocate, with each hasher, with a custom law and with AggregateFunc.
func TestAuditEdgeNoAllocs(t *testing.T) {
	cfgs := []sketch.Config{
		{Hasher: sketch.SipHash(), Seed: 9},
		{Hasher: sketch.XXH3(), Decay: decay.Linear(1)},
		{Decay: decay.Exponential(1), Aggregator: sketch.Mean},
		{AggregateFunc: func(v []float64) float64 { return v[0] }, Decay: halfLaw{}},
	}
	for i, cfg := range cfgs {
		clk := sketchtest.NewFakeClock()
		cfg.Levels, cfg.CellsPerLevel, cfg.Hi, cfg.Clock = 4, 1024, 1e9, clk
		s := mustNewSketch(t, cfg)
		key := "some-key-that-is-long-enough-to-matter"
		bkey := []byte(key)
		ops := map[string]func(){
			"UpdateString":         func() { clk.Advance(time.Millisecond); s.UpdateString(key, 1) },
			"QueryString":          func() { clk.Advance(time.Millisecond); _ = s.QueryString(key) },
			"UpdateAndQueryString": func() { clk.Advance(time.Millisecond); _ = s.UpdateAndQueryString(key, 1) },
			"TryUpdateString":      func() { clk.Advance(time.Millisecond); _ = s.TryUpdateString(key, 1, 1e6) },
			"UpdateAt":             func() { clk.Advance(time.Millisecond); s.UpdateAt(clk.Now(), key, 1) },
			"QueryAt":              func() { clk.Advance(time.Millisecond); _ = s.QueryAt(clk.Now(), key) },
			"UpdateAndQueryAt":     func() { clk.Advance(time.Millisecond); _ = s.UpdateAndQueryAt(clk.Now(), key, 1) },
			"TryUpdateAt":          func() { clk.Advance(time.Millisecond); _ = s.TryUpdateAt(clk.Now(), key, 1, 1e6) },
			"Update":               func() { clk.Advance(time.Millisecond); s.Update(bkey, 1) },
		}
		for name, op := range ops {
			op()
			if a := testing.AllocsPerRun(200, op); a != 0 {
				t.Errorf("config %d: %s allocates %v per call", i, name, a)
			}
		}
	}
}

type halfLaw struct{}

func (halfLaw) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Exp2(-float64(dt)/1000)
}

// TestAuditEdgeAtTimes: the At forms with the zero time, far past, far
// future, and a time.Now() (monotonic, wall far ahead of a fake clock at
// 1970) never grow a score nor decay it early.
func TestAuditEdgeAtTimes(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000_000)
	s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 64, Hi: 1e9, Decay: decay.Linear(1), Clock: clk})
	s.UpdateString("k", 100)
	far := []time.Time{
		{}, time.Unix(0, 0), time.Unix(-1<<40, 0), time.Unix(1<<40, 0), time.Now(),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), clk.Now().Add(-time.Hour),
		clk.Now().Add(time.Hour),
	}
	for _, at := range far {
		if v := s.QueryAt(at, "k"); v != 100 {
			t.Errorf("QueryAt(%v) = %v; want 100 (past: no growth; future: the clock's reading)", at, v)
		}
		if v := s.UpdateAndQueryAt(at, "k", 0); v != 100 {
			t.Errorf("UpdateAndQueryAt(%v, 0) = %v; want 100", at, v)
		}
		if !s.TryUpdateAt(at, "k", 0, 100) {
			t.Errorf("TryUpdateAt(%v, 0, 100) denied", at)
		}
	}
	// Time still runs: a second of the clock decays by 1.
	clk.Advance(time.Second)
	if v := s.QueryString("k"); v != 99 {
		t.Errorf("after 1 s: %v; want 99", v)
	}
	if v := s.QueryAt(clk.Now(), "k"); v != 99 {
		t.Errorf("QueryAt(clock's Now) after 1 s: %v; want 99", v)
	}
	// A time between two readings is what it says.
	s.UpdateString("j", 100)
	clk.Advance(10 * time.Second)
	if v := s.QueryAt(clk.Now().Add(-5*time.Second), "j"); v != 95 {
		t.Errorf("QueryAt(now-5s) = %v; want 95", v)
	}
}

// TestAuditEdgeClockExtremes: a clock near the ends of int64, negative
// times, and jumps of years decay as int64 ms would.
func TestAuditEdgeClockExtremes(t *testing.T) {
	for _, start := range []int64{math.MinInt64 / 2, -1 << 40, -1, 0, 1 << 40, math.MaxInt64 / 4} {
		clk := sketchtest.NewFakeClock()
		clk.Set(start)
		s := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 16, Hi: 1e30, Decay: decay.Linear(1), Clock: clk})
		s.UpdateString("k", 1e12)
		var elapsed int64
		for _, step := range []int64{1, 1 << 31, 1 << 32, 5 * 365 * 86_400_000, 1 << 31} {
			clk.Set(clk.NowMillis() + step)
			elapsed += step
			want := math.Max(1e12-float64(elapsed)/1000, 0)
			got := s.QueryString("k")
			if got < want || got > want*(1+1e-6)+1 {
				t.Errorf("start %d, elapsed %d ms: %v; want %v", start, elapsed, got, want)
			}
		}
	}
}

// TestAuditEdgePanickingAggregateFunc: an AggregateFunc that panics
// propagates its panic, and afterwards TryUpdate on the same key (same
// stripe) is not wedged, nor are cells corrupted.
func TestAuditEdgePanickingAggregateFunc(t *testing.T) {
	var mu sync.Mutex
	boom := false
	agg := func(v []float64) float64 {
		mu.Lock()
		b := boom
		mu.Unlock()
		if b {
			panic("boom")
		}
		m := v[0]
		for _, x := range v {
			m = math.Min(m, x)
		}
		return m
	}
	clk := sketchtest.NewFakeClock()
	s := mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 64, Hi: 1e6, AggregateFunc: agg, Clock: clk})
	set := func(b bool) { mu.Lock(); boom = b; mu.Unlock() }
	s.UpdateString("k", 5)
	for _, op := range []func(){
		func() { s.TryUpdateString("k", 1, 100) },
		func() { s.UpdateAndQueryString("k", 1) },
		func() { s.QueryString("k") },
		func() { s.QueryDetailed([]byte("k")) },
	} {
		set(true)
		func() {
			defer func() { _ = recover() }()
			op()
		}()
		set(false)
	}
	done := make(chan bool)
	go func() { done <- s.TryUpdateString("k", 1, 100) }()
	select {
	case ok := <-done:
		if !ok {
			t.Errorf("TryUpdate after a panicking aggregate denied")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("TryUpdate wedged after a panicking AggregateFunc")
	}
	v := s.QueryString("k")
	if math.IsNaN(v) || v < 6 || v > 9 {
		t.Errorf("Query = %v; want 6..9", v)
	}
	// NaN from AggregateFunc: TryUpdate denies (NaN + d <= limit is
	// false), nothing written.
	nanAgg := mustNewSketch(t, sketch.Config{Levels: 2, CellsPerLevel: 8, Hi: 10, AggregateFunc: func([]float64) float64 { return math.NaN() }, Clock: clk})
	if nanAgg.TryUpdateString("k", 1, 100) {
		t.Errorf("TryUpdate admitted on a NaN aggregate")
	}
	for _, lv := range nanAgg.QueryDetailed([]byte("k")).Levels {
		if lv.Score != 0 {
			t.Errorf("level %d holds %v after a denied TryUpdate", lv.Level, lv.Score)
		}
	}
}
