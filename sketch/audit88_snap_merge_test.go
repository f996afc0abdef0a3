package sketch_test

// Audit 88 (snapshots and merge): Merge under the additive law.
//
// Contract: sketch/sketch.go Merge ("For Linear, overlap ... raises every
// cell by rate x overlap so that no key reads below the union of both
// streams"), internal/core/merge.go MergeWithin ("adds rate x overlap to
// every cell (clamped at Hi)"), docs/snapshots.md "Merge".

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a88MergeT0 = 1_750_000_000_000

func a88MergeNew(t *testing.T, clk sketch.Clock, d decay.Decay, lo, hi float64, seed uint64) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Decay: d, Lo: lo, Hi: hi, Seed: seed, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAudit88SnapMergeFixedOverlapSubMillisecond: Merge(other, overlap)
// under Linear must raise every cell by rate x overlap. overlap is a
// time.Duration, but it is truncated to whole milliseconds before the
// product (merge.go: rate * overlap.Milliseconds() / 1000), so an
// overlap of 1.9 ms raises by rate x 1 ms and one of 999 us by nothing.
//
// It matters because the clocks count whole milliseconds: two replicas
// that started from empty at 0.9 ms and are merged at 2.8 ms (1.9 ms
// later) have each drained for 2 clock ms, so the union exceeds a + b
// by rate x 2 ms, and the merge with the documented overlap (1.9 ms,
// "the time during which both may have held a positive score") reads
// below the union: 17 where the union is 18.
func TestAudit88SnapMergeFixedOverlapSubMillisecond(t *testing.T) {
	const rate = 1000.0 // 1 per ms
	t.Run("raise", func(t *testing.T) {
		for _, ov := range []time.Duration{999 * time.Microsecond, 1500 * time.Microsecond, 2500 * time.Microsecond} {
			clk := sketchtest.NewFakeClock()
			clk.Set(a88MergeT0)
			s := a88MergeNew(t, clk, decay.Linear(rate), 0, 1e6, 1)
			o := a88MergeNew(t, clk, decay.Linear(rate), 0, 1e6, 1)
			if err := s.Merge(o, ov); err != nil {
				t.Fatal(err)
			}
			want := rate * ov.Seconds()
			if got := s.QueryString("any"); got < want {
				t.Errorf("Merge(empty, %v) under Linear(%v): a cell reads %v, want rate x overlap = %v (sketch.go: raises every cell by rate x overlap)", ov, rate, got, want)
			}
		}
	})
	t.Run("union", func(t *testing.T) {
		clk := sketchtest.NewFakeClock()
		clk.Set(a88MergeT0)
		a := a88MergeNew(t, clk, decay.Linear(rate), 0, 1e6, 1)
		b := a88MergeNew(t, clk, decay.Linear(rate), 0, 1e6, 1)
		u := a88MergeNew(t, clk, decay.Linear(rate), 0, 1e6, 1)
		clk.Advance(900 * time.Microsecond) // still ms 0 on the sketches' clock
		a.UpdateString("k", 10)
		b.UpdateString("k", 10)
		u.UpdateString("k", 20)
		clk.Advance(1900 * time.Microsecond) // 2.8 ms: the clock reads +2 ms
		union := u.QueryString("k")
		if err := a.Merge(b, 1900*time.Microsecond); err != nil {
			t.Fatal(err)
		}
		if got := a.QueryString("k"); got < union {
			t.Errorf("both replicas positive for 1.9 ms (2 clock ms): Merge(b, 1.9ms) reads %v, below the union's %v", got, union)
		}
	})
}

// TestAudit88SnapMergeNeverBelowReplicaTruths: for None and Exponential,
// with positive and negative deltas (Lo < 0) and the sum clamped at Hi,
// the merged estimate of every key is at least min(Hi, truthA + truthB)
// (each replica's estimate is at least its truth under Min; decay is
// linear in the score), and at least each replica's own estimate where
// the deltas are non-negative. Replicas on clocks 0 and +3 ms from s's
// (a replica whose wall clock is behind is decayed by the gap, as the
// doc says: its writes count as that much older).
func TestAudit88SnapMergeNeverBelowReplicaTruths(t *testing.T) {
	laws := map[string]decay.Decay{"none": decay.None(), "exp": decay.Exponential(0.7)}
	for name, d := range laws {
		for _, skew := range []time.Duration{0, 3 * time.Millisecond} {
			for _, neg := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/skew=%v/neg=%v", name, skew, neg), func(t *testing.T) {
					ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
					ca.Set(a88MergeT0)
					cb.SetTime(time.UnixMilli(a88MergeT0).Add(skew))
					lo := 0.0
					if neg {
						lo = -50
					}
					const hi = 100
					a := a88MergeNew(t, ca, d, lo, hi, 9)
					b := a88MergeNew(t, cb, d, lo, hi, 9)
					type ev struct {
						at    int64 // ms after start, on the writer's own clock
						delta float64
					}
					truth := func(evs []ev, now int64) float64 {
						var s float64
						for _, e := range evs {
							switch name {
							case "none":
								s += e.delta
							case "exp":
								s += e.delta * math.Exp(-0.7*float64(now-e.at)/1000)
							}
						}
						return s
					}
					evA, evB := map[string][]ev{}, map[string][]ev{}
					for i := range 40 {
						key := fmt.Sprint("k", i%8)
						delta := float64(i%7) + 1
						if neg && i%3 == 0 {
							delta = -float64(i%5) - 1
						}
						at := int64(i * 11)
						ca.Set(a88MergeT0 + at)
						cb.SetTime(time.UnixMilli(a88MergeT0 + at).Add(skew))
						if i%2 == 0 {
							a.UpdateString(key, delta)
							evA[key] = append(evA[key], ev{at, delta})
						} else {
							b.UpdateString(key, 3*delta)
							evB[key] = append(evB[key], ev{at, 3 * delta})
						}
					}
					ca.Set(a88MergeT0 + 500)
					cb.SetTime(time.UnixMilli(a88MergeT0 + 500).Add(skew))
					before := map[string][2]float64{}
					for i := range 8 {
						k := fmt.Sprint("k", i)
						before[k] = [2]float64{a.QueryString(k), b.QueryString(k)}
					}
					if err := a.Merge(b); err != nil {
						t.Fatal(err)
					}
					for i := range 8 {
						k := fmt.Sprint("k", i)
						got := a.QueryString(k)
						if got < lo || got > hi || math.IsNaN(got) {
							t.Fatalf("%s: merged %v outside [%v, %v]", k, got, lo, hi)
						}
						// b's events happened at the same absolute times as
						// a's clock says; s's instant is a's +500.
						want := math.Min(hi, truth(evA[k], 500)+truth(evB[k], 500))
						want = math.Max(want, lo)
						if got < want-1e-4*math.Abs(want)-1e-6 {
							t.Errorf("%s: merged %v < min(Hi, truthA + truthB) = %v", k, got, want)
						}
						if !neg {
							if got < before[k][0]*(1-1e-6) || got < before[k][1]*(1-1e-6)-1e-6 {
								t.Errorf("%s: merged %v below a replica's own estimate %v", k, got, before[k])
							}
						}
					}
				})
			}
		}
	}
}

// TestAudit88SnapMergeRefusesLeavesUnchanged: a refused Merge (another
// Seed, another Hi, another law parameter, s itself) changes no cell of
// s, and its error matches ErrSnapshotMismatch.
func TestAudit88SnapMergeRefusesLeavesUnchanged(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a88MergeT0)
	s := a88MergeNew(t, clk, decay.Exponential(0.1), 0, 100, 1)
	for i := range 20 {
		s.UpdateString(fmt.Sprint("k", i), float64(i))
	}
	before, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	others := map[string]*sketch.Sketch{
		"seed":  a88MergeNew(t, clk, decay.Exponential(0.1), 0, 100, 2),
		"hi":    a88MergeNew(t, clk, decay.Exponential(0.1), 0, 101, 1),
		"param": a88MergeNew(t, clk, decay.Exponential(0.1000001), 0, 100, 1),
		"law":   a88MergeNew(t, clk, decay.Linear(0.1), 0, 100, 1),
		"self":  s,
	}
	for name, o := range others {
		if o != s {
			for i := range 20 {
				o.UpdateString(fmt.Sprint("k", i), 5)
			}
		}
		err := s.Merge(o, time.Second)
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: Merge = %v, want an error matching ErrSnapshotMismatch", name, err)
		}
		after, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if string(after) != string(before) {
			t.Errorf("%s: a refused Merge changed s", name)
		}
	}
}
