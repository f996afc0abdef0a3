package sketch_test

// Audit 134: merge order. docs/snapshots.md "Merge", the exactness table
// against "one sketch fed the union": None "a + b: exact (integer deltas
// compare equal)"; Exponential "a + b: exact ... up to one float32 ulp
// (upward) per cell per merge" (within 1e-5 relative). Exactness implies
// the order does not matter: A.Merge(B) and B.Merge(A), (A+B)+C and
// A+(B+C), each restored from snapshots first or not, all read the union
// sketch's value (None: equal; Exponential: within the table's 1e-5
// relative, both ways, since the union sketch rounds up on each of its
// own updates and reads up to ~1.3e-6 above a merge here; and never below
// the key's float64 truth), for every aggregator, keys colliding (M = 16).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit134MergeOrderIsUnion(t *testing.T) {
	const t0 = int64(1_790_000_000_000)
	for _, lawName := range []string{"none", "exp"} {
		for _, agg := range []sketch.Aggregator{sketch.Min, sketch.Max, sketch.Mean} {
			t.Run(fmt.Sprint(lawName, "/", agg), func(t *testing.T) {
				law := decay.None()
				if lawName == "exp" {
					law = decay.Exponential(0.02)
				}
				rng := rand.New(rand.NewPCG(134, 7))
				clocks := make([]*sketchtest.FakeClock, 4) // A, B, C, U
				cfgs := make([]sketch.Config, 4)
				mk := func(i int) *sketch.Sketch {
					s, err := sketch.New(cfgs[i])
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				for i := range clocks {
					clocks[i] = sketchtest.NewFakeClock()
					clocks[i].Set(t0 + int64(i)*17) // other epochs
					cfgs[i] = sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: law, Aggregator: agg, Hi: 1e12, Seed: 9, Clock: clocks[i]}
				}
				reps := []*sketch.Sketch{mk(0), mk(1), mk(2)}
				u := mk(3)
				var evs []a134Ev
				now := t0 + 100
				for range 600 {
					now += int64(rng.IntN(30))
					r := rng.IntN(3)
					k := fmt.Sprint("k", rng.IntN(30))
					d := float64(1 + rng.IntN(20))
					clocks[r].Set(now)
					reps[r].UpdateString(k, d)
					clocks[3].Set(now)
					u.UpdateString(k, d)
					var ki int
					fmt.Sscan(k[1:], &ki)
					evs = append(evs, a134Ev{now, ki, d, 1})
				}
				now += 250
				for _, c := range clocks {
					c.Set(now)
				}
				snaps := make([][]byte, 3)
				for i, s := range reps {
					b, err := s.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					snaps[i] = b
				}
				// copyOf returns a fresh sketch on replica i's clock
				// holding replica i's snapshot.
				copyOf := func(i int) *sketch.Sketch {
					s := mk(i)
					if err := s.UnmarshalBinary(snaps[i]); err != nil {
						t.Fatal(err)
					}
					return s
				}
				merge := func(into, from *sketch.Sketch) *sketch.Sketch {
					if err := into.Merge(from); err != nil {
						t.Fatal(err)
					}
					return into
				}
				orders := map[string]*sketch.Sketch{
					"A+B+C":   merge(merge(copyOf(0), copyOf(1)), copyOf(2)),
					"C+B+A":   merge(merge(copyOf(2), copyOf(1)), copyOf(0)),
					"B+(C+A)": merge(copyOf(1), merge(copyOf(2), copyOf(0))),
					"A+(B+C)": merge(copyOf(0), merge(copyOf(1), copyOf(2))),
					"live":    merge(merge(reps[0], reps[1]), reps[2]),
				}
				for _, later := range []int64{0, 5000} {
					for _, c := range clocks {
						c.Set(now + later)
					}
					for k := range 30 {
						key := fmt.Sprint("k", k)
						want := u.QueryString(key)
						truth := a134Truth(map[string]string{"none": "none", "exp": "exp2"}[lawName], evs, k, now+later, 1)
						for name, s := range orders {
							got := s.QueryString(key)
							ok := got == want
							if lawName == "exp" {
								// The table's own tolerance against the
								// union sketch, and never below the truth.
								ok = math.Abs(got-want) <= 1e-5*want && got >= truth*(1-1e-12)
							}
							if !ok {
								t.Fatalf("%s, %d ms later: %s reads %v, the union sketch %v, truth %v", name, later, key, got, want, truth)
							}
						}
					}
				}
			})
		}
	}
}
