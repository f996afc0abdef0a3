package sketch_test

// Audit 134: "an estimate is never below the truth" along a service's
// life: replica A saved, down for a while (replica B keeps taking traffic
// meanwhile, some keys on both), restored on a new clock, fed again; B
// saved and restored after its own downtime; then A's restored sketch
// merges B's restored sketch (Linear with an overlap covering the whole
// history), and is read at once and later. Small sketches (L=3, M=16, 40
// keys) so that keys collide.
//
// Contract: docs/snapshots.md "Time across restarts" (each cell "ages by
// age + downtime"; a restore "answers every Query exactly as the original
// would at the same wall time"), "Merge" (None, Exponential: a + b, exact
// up to rounding upward; Linear "Merge(other, T) with T > 0 ... a + b +
// rate*T >= union" with T "at least the time since both started from
// empty"); sketch.Merge ("Merge promises the union for None, Exponential
// and Linear only"); the count-min promise: with non-negative deltas every
// aggregator reads at or above the key's own score (README: an estimate
// never below the truth). The custom law (a half-life of 5 s, no inverse)
// is followed through the saves and restores only, no merge.
//
// The truth of a key is its own deltas (both replicas' writes: the union)
// under the law at wall time, computed in float64.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type a134HalfLife struct{}

func (a134HalfLife) Apply(s float64, dt int64) float64 {
	if dt <= 0 {
		return s
	}
	return s * math.Pow(0.5, float64(dt)/5000)
}

type a134Ev struct {
	t     int64
	key   int
	d     float64
	owner int // 1: A, 2: B
}

func a134Truth(law string, evs []a134Ev, key int, at int64, owners int) float64 {
	var sel []a134Ev
	for _, e := range evs {
		if e.key == key && e.t <= at && e.owner&owners != 0 {
			sel = append(sel, e)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool { return sel[i].t < sel[j].t })
	v, last := 0.0, int64(math.MinInt64)
	for _, e := range sel {
		if last != math.MinInt64 {
			v = a134Apply(law, v, e.t-last)
		}
		v += e.d
		last = e.t
	}
	if last != math.MinInt64 {
		v = a134Apply(law, v, at-last)
	}
	return v
}

func a134Apply(law string, v float64, dt int64) float64 {
	switch law {
	case "none":
		return v
	case "exp":
		return v * math.Exp(-0.05*float64(dt)/1000)
	case "exp2":
		return v * math.Exp(-0.02*float64(dt)/1000)
	case "linear":
		return math.Max(0, v-2*float64(dt)/1000)
	}
	return a134HalfLife{}.Apply(v, dt)
}

func a134Law(law string) decay.Decay {
	switch law {
	case "none":
		return decay.None()
	case "exp":
		return decay.Exponential(0.05)
	case "linear":
		return decay.Linear(2)
	}
	return a134HalfLife{}
}

func TestAudit134SnapRestoreContinueMergeNeverBelowTruth(t *testing.T) {
	const w0 = int64(1_790_000_000_000)
	const keys = 40
	downtimes := []int64{0, 1, 5_000, 2 * 3600_000, 8 * 24 * 3600_000}
	for _, law := range []string{"none", "exp", "linear", "custom"} {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			for trial := range 10 {
				name := fmt.Sprintf("%s/%v/%d", law, agg, trial)
				rng := rand.New(rand.NewPCG(134, uint64(trial)))
				dA := downtimes[rng.IntN(len(downtimes))]
				dB := downtimes[rng.IntN(len(downtimes))]
				t.Run(name, func(t *testing.T) {
					cfg := func(c sketch.Clock) sketch.Config {
						return sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: a134Law(law), Aggregator: agg, Hi: 1e9, Seed: 77, Clock: c}
					}
					mk := func(at int64) (*sketch.Sketch, *sketchtest.FakeClock) {
						c := sketchtest.NewFakeClock()
						c.Set(at)
						s, err := sketch.New(cfg(c))
						if err != nil {
							t.Fatal(err)
						}
						return s, c
					}
					var evs []a134Ev
					write := func(owner int, s *sketch.Sketch, c *sketchtest.FakeClock, at int64) {
						c.Set(at)
						k := rng.IntN(keys)
						d := float64(1 + rng.IntN(9))
						s.UpdateString(fmt.Sprint("key", k), d)
						evs = append(evs, a134Ev{at, k, d, owner})
					}
					check := func(what string, owners int, s *sketch.Sketch, c *sketchtest.FakeClock, at int64) {
						t.Helper()
						c.Set(at)
						for k := range keys {
							got := s.QueryString(fmt.Sprint("key", k))
							want := a134Truth(law, evs, k, at, owners)
							if got < want*(1-1e-6)-1e-9 {
								t.Fatalf("%s (downtimes %d, %d ms): key%d reads %v, truth %v", what, dA, dB, k, got, want)
							}
						}
					}
					a, ca := mk(w0)
					b, cb := mk(w0 + 1234) // another epoch
					now := w0 + 1234
					for range 150 {
						now += int64(rng.IntN(40))
						if rng.IntN(2) == 0 {
							write(1, a, ca, now)
						} else {
							write(2, b, cb, now)
						}
					}
					check("A before its save", 1, a, ca, now)
					ca.Set(now)
					snapA, err := a.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					tA := now
					// A is down for dA; B keeps going (at most 100 events
					// spread over the downtime).
					for i := range 100 {
						at := tA + dA*int64(i+1)/101
						if at > now {
							now = at
						}
						write(2, b, cb, now)
					}
					now = max(now, tA+dA)
					a2, ca2 := mk(now)
					if err := a2.UnmarshalBinary(snapA); err != nil {
						t.Fatal(err)
					}
					check("A restored", 1, a2, ca2, now)
					for range 150 {
						now += int64(rng.IntN(40))
						if rng.IntN(2) == 0 {
							write(1, a2, ca2, now)
						} else {
							write(2, b, cb, now)
						}
					}
					check("A restored, fed again", 1, a2, ca2, now)
					cb.Set(now)
					snapB, err := b.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					tB := now
					for i := range 50 {
						at := tB + dB*int64(i+1)/51
						if at > now {
							now = at
						}
						write(1, a2, ca2, now)
					}
					now = max(now, tB+dB)
					b2, cb2 := mk(now)
					if err := b2.UnmarshalBinary(snapB); err != nil {
						t.Fatal(err)
					}
					if law == "custom" {
						check("B restored", 2, b2, cb2, now)
						return
					}
					ca2.Set(now)
					var overlap time.Duration
					if law == "linear" {
						overlap = time.Duration(now-w0) * time.Millisecond
					}
					if err := a2.Merge(b2, overlap); err != nil {
						t.Fatal(err)
					}
					check("merged", 3, a2, ca2, now)
					check("merged, 1 s later", 3, a2, ca2, now+1000)
					check("merged, 1 h later", 3, a2, ca2, now+3600_000)
				})
			}
		}
	}
}
