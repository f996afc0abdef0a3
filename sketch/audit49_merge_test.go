package sketch_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a49Replicas builds three replicas (own fake clocks at the same wall
// time) fed disjoint parts of one stream of integer deltas over 40 s, and
// a single sketch fed the union. Keys are few and the sketch wide, so each
// key's union truth is its own sum.
type a49Event struct {
	at  int64
	key string
	v   float64
	rep int
}

// a49Truth is the closed-form truth of key at time at for the events of
// the replicas in reps: None a sum, Exponential a decayed sum, Linear the
// one-counter drain (max(0, x - rate*dt) + v, event by event).
func a49Truth(evs []a49Event, key string, reps map[int]bool, law string, param float64, at int64) float64 {
	x, last := 0.0, int64(0)
	for _, e := range evs {
		if e.key != key || !reps[e.rep] {
			continue
		}
		switch law {
		case "exp":
			x = x*math.Exp(-param*float64(e.at-last)/1000) + e.v
		case "linear":
			x = math.Max(0, x-param*float64(e.at-last)/1000) + e.v
		default:
			x += e.v
		}
		last = e.at
	}
	switch law {
	case "exp":
		x *= math.Exp(-param * float64(at-last) / 1000)
	case "linear":
		x = math.Max(0, x-param*float64(at-last)/1000)
	}
	return x
}

var a49Events []a49Event

func a49Replicas(t *testing.T, d decay.Decay, seed uint64) (reps []*sketch.Sketch, clks []*sketchtest.FakeClock, union *sketch.Sketch, uclk *sketchtest.FakeClock, cfg sketch.Config) {
	a49Events = a49Events[:0]
	const t0 = 50_000_000
	cfg = sketch.Config{Levels: 3, CellsPerLevel: 2048, Decay: d, Hi: 1e9, Seed: 21}
	uclk = sketchtest.NewFakeClock()
	uclk.Set(t0)
	ucfg := cfg
	ucfg.Clock = uclk
	union = mustNewSketch(t, ucfg)
	for range 3 {
		c := sketchtest.NewFakeClock()
		c.Set(t0)
		rc := cfg
		rc.Clock = c
		reps = append(reps, mustNewSketch(t, rc))
		clks = append(clks, c)
	}
	rng := rand.New(rand.NewPCG(seed, 49))
	now := int64(t0)
	for range 600 {
		now += int64(rng.IntN(130))
		k := fmt.Sprintf("m%d", rng.IntN(20))
		v := float64(rng.IntN(9) + 1)
		r := rng.IntN(3)
		clks[r].Set(now)
		reps[r].UpdateString(k, v)
		a49Events = append(a49Events, a49Event{now, k, v, r})
		uclk.Set(now)
		union.UpdateString(k, v)
	}
	for _, c := range clks {
		c.Set(now)
	}
	uclk.Set(now)
	return
}

// a49Clone restores a copy of s (same config, its own clock at the same
// reading): merging into the copy leaves s as it was.
func a49Clone(t *testing.T, s *sketch.Sketch, cfg sketch.Config, at int64) (*sketch.Sketch, *sketchtest.FakeClock) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(at)
	cfg.Clock = c
	d := mustNewSketch(t, cfg)
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return d, c
}

// TestAudit49MergeOrderGrouping: under the None law with integer deltas Merge
// is exact (docs/snapshots.md: "a + b: exact (integer deltas compare
// equal)"), so every order and grouping of three replicas' merges gives
// the union, key for key: (A+B)+C, (C+A)+B, A+(B+C), B+(C+A). Under
// Exponential every grouping is >= the closed-form union truth and within
// 1e-5 relative of the single sketch fed the union (the docs' table).
func TestAudit49MergeOrderGrouping(t *testing.T) {
	for _, lw := range []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"exp", decay.Exponential(0.05)}} {
		reps, clks, union, uclk, cfg := a49Replicas(t, lw.d, 7)
		now := uclk.NowMillis()
		A, B, C := reps[0], reps[1], reps[2]
		_ = clks
		group := func(x, y, z *sketch.Sketch, inner bool) *sketch.Sketch {
			if inner { // x + (y + z)
				yz, _ := a49Clone(t, y, cfg, now)
				if err := yz.Merge(z); err != nil {
					t.Fatal(err)
				}
				xc, _ := a49Clone(t, x, cfg, now)
				if err := xc.Merge(yz); err != nil {
					t.Fatal(err)
				}
				return xc
			}
			xy, _ := a49Clone(t, x, cfg, now)
			if err := xy.Merge(y); err != nil {
				t.Fatal(err)
			}
			if err := xy.Merge(z); err != nil {
				t.Fatal(err)
			}
			return xy
		}
		results := map[string]*sketch.Sketch{
			"(A+B)+C": group(A, B, C, false),
			"(C+A)+B": group(C, A, B, false),
			"A+(B+C)": group(A, B, C, true),
			"B+(C+A)": group(B, C, A, true),
		}
		for name, m := range results {
			for i := range 20 {
				k := fmt.Sprintf("m%d", i)
				got, want := m.QueryString(k), union.QueryString(k)
				if lw.name == "none" && got != want {
					t.Errorf("%s %s key %s: merged %v, union %v (exact under None)", lw.name, name, k, got, want)
				}
				if lw.name == "exp" {
					// The single sketch fed the union rounds up at every
					// write too, so compare with it within float32
					// rounding either way, and with the closed-form truth
					// as the floor.
					truth := a49Truth(a49Events, k, map[int]bool{0: true, 1: true, 2: true}, "exp", 0.05, now)
					if got < truth*(1-1e-12) || math.Abs(got-want) > 1e-5*want {
						t.Errorf("%s %s key %s: merged %v, union sketch %v, truth %v (want >= truth, within float32 rounding of the union)", lw.name, name, k, got, want, truth)
					}
				}
			}
		}
	}
}

// TestAudit49MergeAfterRestoreNeverBelowUnion: replica B is saved and
// restored in another process whose clock reads the same wall time plus
// a downtime (during which nothing happened), then merged into A (A's
// clock at that wall time too). Every key reads >= the truth of A's and
// B's streams together (closed form), at the merge and 1 s and 10 min
// later, for None, Exponential and Linear (Linear with Merge(o, T), T
// the streams' length, docs/snapshots.md's safe side). Downtimes 0, 1 ms,
// 5 s and 2^29 ms (the records are then decayed once on restore).
func TestAudit49MergeAfterRestoreNeverBelowUnion(t *testing.T) {
	for _, lw := range []struct {
		name  string
		d     decay.Decay
		param float64
	}{{"none", decay.None(), 0}, {"exp", decay.Exponential(0.05), 0.05}, {"linear", decay.Linear(2), 2}} {
		for _, down := range []int64{0, 1, 5000, 1 << 29} {
			reps, clks, _, uclk, cfg := a49Replicas(t, lw.d, 11)
			now := uclk.NowMillis()
			snap, err := reps[1].MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			later := now + down
			bc := sketchtest.NewFakeClock()
			bc.Set(later)
			bcfg := cfg
			bcfg.Clock = bc
			b := mustNewSketch(t, bcfg)
			if err := b.UnmarshalBinary(snap); err != nil {
				t.Fatal(err)
			}
			clks[0].Set(later)
			if lw.name == "linear" {
				err = reps[0].Merge(b, 90*time.Second)
			} else {
				err = reps[0].Merge(b)
			}
			if err != nil {
				t.Fatal(err)
			}
			ab := map[int]bool{0: true, 1: true}
			for _, step := range []int64{0, 1000, 600_000} {
				clks[0].Set(later + step)
				for i := range 20 {
					k := fmt.Sprintf("m%d", i)
					got := reps[0].QueryString(k)
					truth := a49Truth(a49Events, k, ab, lw.name, lw.param, later+step)
					if got < truth*(1-1e-12) {
						t.Errorf("%s downtime %d +%d ms key %s: A+restored B reads %v < truth of A's and B's streams %v", lw.name, down, step, k, got, truth)
					}
				}
			}
		}
	}
}
