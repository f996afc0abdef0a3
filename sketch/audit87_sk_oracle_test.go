package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a87Gaps are idle gaps at the edges of the 32-bit relative ages, the
// exponential tables and the horizon sweep, and years.
var a87Gaps = []int64{
	1, 7, 999, 1<<24 - 1, 1 << 24, 1<<24 + 1, 1 << 29, 1<<30 + 3,
	1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1, 1 << 32, 1<<32 + 1, 3 << 32,
	365 * 86_400_000, 5 * 365 * 86_400_000,
}

// a87Truth is one key's true score: v at time last (the time of its last
// write, as a cell's stamp), and an upper bound on how far above the
// truth the sketch may read (float32 steps, nudges, sweeps).
type a87Truth struct {
	v, budget float64
	last      int64
}

func (o *a87Truth) at(d decay.Decay, ms int64) float64 {
	if ms <= o.last || o.v == 0 {
		return o.v
	}
	return d.Apply(o.v, ms-o.last)
}

// write applies delta at ms (clamped to [lo, hi]) and charges the
// budget: one float32 step of the magnitudes involved per write and per
// sweep (at most a couple per operation).
func (o *a87Truth) write(d decay.Decay, ms int64, delta, lo, hi float64) {
	dv := o.at(d, ms)
	nv := min(max(dv+delta, lo), hi)
	o.budget += 0x1p-21 * (math.Abs(dv) + math.Abs(nv) + math.Abs(o.v))
	o.v, o.last = nv, ms
}

// TestAudit87SkOracleNeverBelowAndTracks: API.md, "Min aggregation never
// under-estimates: Query(k) >= the key's true score ... whatever the
// clamps, roll-backs, refunds, rotations, clock jumps", "A backwards
// clock step counts as zero elapsed time", "Any idle time, 1 ms to years,
// decays as the reference (int64 ms) does", and doc.go's At rule ("an At
// time ahead of the clock counts as the clock's reading"; at.go: a time
// before one already used counts as that time). Keys that share no cell
// (checked with QueryDetailed), mixed-sign deltas with Lo < 0, scores
// pinned at Hi and Lo, TryUpdate admissions and denials, idle gaps at the
// 2^24/2^29/2^31/2^32 ms edges and years, backwards steps, and the At
// forms with times ahead of and behind the clock; per law (None, whole
// and fractional Linear, fast, slow and sub-nudge Exponential) and
// aggregator. Each read is at or above a float64 model of the key
// (decayed from its last write, as a stamp is; clamped), and within a
// float32-step budget above it; a TryUpdate admits exactly when the
// Query just before at the same time plus delta is at most limit, and a
// denial changes no reading.
func TestAudit87SkOracleNeverBelowAndTracks(t *testing.T) {
	laws := []struct {
		name string
		d    decay.Decay
	}{
		{"none", decay.None()},
		{"lin1000", decay.Linear(1000)},
		{"lin0.37", decay.Linear(0.37)},
		{"lin1e-6", decay.Linear(1e-6)},
		{"exp0.5", decay.Exponential(0.5)},
		{"exp1e-6", decay.Exponential(1e-6)},
		{"exp1e-10", decay.Exponential(1e-10)},
	}
	bounds := []struct{ lo, hi float64 }{{0, 100}, {-50, 1e9}, {-1e6, 1e6}}
	aggs := []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean}
	for li, lw := range laws {
		for bi, b := range bounds {
			for ai, agg := range aggs {
				name := fmt.Sprintf("%s/lo=%g,hi=%g/%v", lw.name, b.lo, b.hi, agg)
				t.Run(name, func(t *testing.T) {
					a87RunOracle(t, lw.d, b.lo, b.hi, agg, uint64(li*100+bi*10+ai))
				})
			}
		}
	}
}

func a87RunOracle(t *testing.T, law decay.Decay, lo, hi float64, agg sketch.Aggregator, seed uint64) {
	rng := rand.New(rand.NewPCG(87, seed))
	clk := sketchtest.NewFakeClock()
	start := []int64{0, 1_700_000_000_000, 1<<32 - 3, -5_000}[seed%4]
	clk.Set(start)
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 2048, Lo: lo, Hi: hi, Decay: law, Aggregator: agg, Seed: 87, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"alpha", "beta", "gamma", "delta"}
	seen := map[[2]uint32]string{}
	for _, k := range keys {
		for _, l := range s.QueryDetailed([]byte(k)).Levels {
			id := [2]uint32{l.Level, l.Index}
			if o, ok := seen[id]; ok {
				t.Fatalf("keys %q and %q share level %d cell %d: pick other keys", o, k, l.Level, l.Index)
			}
			seen[id] = k
		}
	}
	truth := make([]a87Truth, len(keys))
	for i := range truth {
		truth[i].last = start
	}
	hw := start
	deltas := []float64{1, 2.5, -1, -3, 0.1, -0.1, 1e3, -1e3, 7e5, -7e5, 2 * hi, 2*lo - 1, 0, 1e-9, -1e-9}
	eff := func(tm int64) int64 { // the time an operation at tm runs at
		e := max(hw, min(tm, clk.NowMillis()))
		if e-hw >= 1<<29 {
			// The horizon sweep may re-stamp every cell, rounding up.
			for i := range truth {
				truth[i].budget += 0x1p-21 * (math.Abs(truth[i].v) + math.Abs(truth[i].at(law, e)))
			}
		}
		hw = e
		return e
	}
	check := func(step int, what string, k int, got float64, ms int64) {
		t.Helper()
		o := &truth[k]
		want := o.at(law, ms)
		if math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("step %d %s key %s: read %v", step, what, keys[k], got)
		}
		mag := math.Abs(want) + math.Abs(o.v)
		if got < want-0x1p-46*mag {
			t.Fatalf("step %d %s key %s at %d: read %.17g below the truth %.17g (last write at %d, v=%.17g)",
				step, what, keys[k], ms, got, want, o.last, o.v)
		}
		if got > want+o.budget+0x1p-38*mag+1e-300 {
			t.Fatalf("step %d %s key %s at %d: read %.17g more than the budget %.3g above the truth %.17g",
				step, what, keys[k], ms, got, o.budget, want)
		}
		if got > hi || got < lo-1e-9*math.Abs(lo) {
			t.Fatalf("step %d %s key %s: read %v outside [%v, %v]", step, what, keys[k], got, lo, hi)
		}
	}
	for step := range testsize.Pick(1200, 300) {
		switch r := rng.IntN(100); {
		case r < 6:
			clk.Set(clk.NowMillis() + a87Gaps[rng.IntN(len(a87Gaps))])
		case r < 10:
			back := []int64{1, 1000, 1 << 31, 1 << 32, 1<<32 + 1}[rng.IntN(5)]
			clk.Set(clk.NowMillis() - back)
		case r < 50:
			clk.Set(clk.NowMillis() + rng.Int64N(3000))
		}
		// An At time: the clock's, ahead of it, or behind it.
		var tm int64
		switch r := rng.IntN(4); r {
		case 0:
			tm = clk.NowMillis()
		case 1:
			tm = clk.NowMillis() + []int64{1, 1000, 1 << 31, 1 << 32}[rng.IntN(4)]
		default:
			tm = clk.NowMillis() - []int64{1, 1000, 1 << 31, 1<<32 + 1}[rng.IntN(4)]
		}
		at := time.UnixMilli(tm)
		k := rng.IntN(len(keys))
		key := keys[k]
		d := deltas[rng.IntN(len(deltas))]
		o := &truth[k]
		switch op := rng.IntN(9); op {
		case 0, 1:
			ms := eff(clk.NowMillis())
			if op == 0 {
				s.Update([]byte(key), d)
			} else {
				s.UpdateString(key, d)
			}
			o.write(law, ms, d, lo, hi)
			check(step, "Query after Update", k, s.QueryString(key), eff(clk.NowMillis()))
		case 2:
			ms := eff(tm)
			s.UpdateAt(at, key, d)
			o.write(law, ms, d, lo, hi)
			check(step, "QueryAt after UpdateAt", k, s.QueryAt(at, key), eff(tm))
		case 3:
			ms := eff(clk.NowMillis())
			got := s.UpdateAndQuery([]byte(key), d)
			o.write(law, ms, d, lo, hi)
			check(step, "UpdateAndQuery", k, got, ms)
			if q := s.QueryString(key); q != got && eff(clk.NowMillis()) == ms {
				t.Fatalf("step %d: UpdateAndQuery %v, then Query at the same time %v", step, got, q)
			}
		case 4:
			ms := eff(tm)
			got := s.UpdateAndQueryAt(at, key, d)
			o.write(law, ms, d, lo, hi)
			check(step, "UpdateAndQueryAt", k, got, ms)
		case 5, 6, 7:
			var q float64
			var ms int64
			if op == 7 {
				ms = eff(tm)
				q = s.QueryAt(at, key)
			} else {
				ms = eff(clk.NowMillis())
				q = s.QueryString(key)
			}
			check(step, "Query", k, q, ms)
			limits := []float64{q + d, math.Nextafter(q+d, math.Inf(-1)), q + d + 1, 3 * hi, lo, -1e12, 1e12, q}
			limit := limits[rng.IntN(len(limits))]
			var ok bool
			switch op {
			case 5:
				ok = s.TryUpdate([]byte(key), d, limit)
			case 6:
				ok = s.TryUpdateString(key, d, limit)
			default:
				ok = s.TryUpdateAt(at, key, d, limit)
			}
			if want := q+d <= limit; ok != want {
				t.Fatalf("step %d: TryUpdate(%q, %v, %v) = %v after a Query of %v at the same time", step, key, d, limit, ok, q)
			}
			again := func() float64 { // a Query at the time of the first
				if op == 7 {
					return s.QueryAt(at, key)
				}
				return s.QueryString(key)
			}
			if ok {
				o.write(law, ms, d, lo, hi)
				check(step, "Query after an admission", k, again(), ms)
			} else if q2 := again(); q2 != q {
				t.Fatalf("step %d: a denied TryUpdate moved the key from %v to %v", step, q, q2)
			}
		default:
			ms := eff(clk.NowMillis())
			det := s.QueryDetailed([]byte(key))
			check(step, "QueryDetailed", k, det.Score, ms)
			for _, l := range det.Levels {
				check(step, fmt.Sprintf("QueryDetailed level %d", l.Level), k, l.Score, ms)
			}
		}
	}
	// Every key at the end, after one more long idle.
	clk.Set(clk.NowMillis() + 1<<32 + 5)
	ms := eff(clk.NowMillis())
	for k, key := range keys {
		check(-1, "final Query", k, s.QueryString(key), ms)
	}
}
