package snapshot_test

// audit23: snapshots and merge under clocks that move while they run.
//
// The contract (sketch.Sketch.WriteTo, docs/snapshots.md "Consistency
// under concurrent updates"): "T is one clock reading at the start ...
// With non-negative deltas, every update that completed before WriteTo
// was called is fully included (and decayed to T)"; Merge: "other's cells
// are read as WriteTo reads them", and the merged key "is never below
// either input's truth".

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

const audit23T0 = 1_700_000_000_000

func audit23ExpCfg(clk sketch.Clock) sketch.Config {
	return sketch.Config{Levels: 4, CellsPerLevel: 1024, Hi: 1e12, Seed: 7,
		Decay: decay.Exponential(1), Clock: clk}
}

// TestAudit23FixedWriteToLaterWriteLosesMass: a sketch (Exponential,
// lambda 1/s) holds k = 1000 at T. While WriteTo runs (after T was read,
// before the cells are loaded: here, during the Write of the header) the
// clock advances 1 s and k gets +1. The snapshot records k's cells as
// "age 0 at T" holding 1000/e + 1, so the 1000 completed before WriteTo
// was called are decayed twice over that second: restored on a clock at
// the original's time, k reads 135.7, the original 368.9, and the truth
// of the updates completed before WriteTo (1000 decayed to now) is 367.9.
// Contract: "every update that completed before WriteTo was called is
// fully included (and decayed to T)"; sketch doc: "Query(k) >= the key's
// true score".
func TestAudit23FixedWriteToLaterWriteLosesMass(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit23T0)
	s, err := sketch.New(audit23ExpCfg(clk))
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	s.Update(k, 1000)
	w := &testhook.Writer{N: 1, Hook: func() {
		clk.Advance(time.Second)
		s.Update(k, 1) // a writer running alongside the save
	}}
	if _, err := s.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.Set(clk.NowMillis()) // restored at the original's time: no downtime
	r, _ := sketch.New(audit23ExpCfg(clk2))
	if _, err := r.ReadFrom(bytes.NewReader(w.Buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	truth := 1000 * math.Exp(-1) // completed before WriteTo, decayed to now
	orig, got := s.Query(k), r.Query(k)
	if got < truth*(1-1e-6) {
		t.Errorf("restored k = %.4f, below the truth %.4f of the updates completed before WriteTo (the original reads %.4f)", got, truth, orig)
	}
}

// TestAudit23FixedRotatorWriteToLaterWriteLosesMass: the same through
// a rotator (and snapshot.WriteFile / Load): the write happens while the
// primary's header is written (the rotator header is Write 1, the
// primary's Write 2).
func TestAudit23FixedRotatorWriteToLaterWriteLosesMass(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit23T0)
	rc := rotator.Config{Sketch: audit23ExpCfg(clk), Period: time.Hour}
	rt, err := rotator.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	rt.Update(k, 1000)
	w := &testhook.Writer{N: 2, Hook: func() {
		clk.Advance(time.Second)
		rt.Update(k, 1)
	}}
	if _, err := rt.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.snap")
	if err := os.WriteFile(path, w.Buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.Set(clk.NowMillis())
	rc2 := rc
	rc2.Sketch.Clock = clk2
	r2, _ := rotator.New(rc2)
	if err := snapshot.Load(path, r2); err != nil {
		t.Fatal(err)
	}
	truth := 1000 * math.Exp(-1)
	if got := r2.Query(k); got < truth*(1-1e-6) {
		t.Errorf("restored k = %.4f, below the truth %.4f (the original reads %.4f)", got, truth, rt.Query(k))
	}
}

// audit23HookExp is a conforming custom law (exponential, lambda per
// second) whose Apply runs hook once, the first time it is called while
// armed: a deterministic stand-in for a writer running alongside Merge.
type audit23HookExp struct {
	lambda float64
	armed  *bool
	hook   func()
}

func (d audit23HookExp) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	if d.armed != nil && *d.armed {
		*d.armed = false
		d.hook()
	}
	return score * math.Exp(-d.lambda*float64(dt)/1000)
}

// TestAudit23FixedMergeLaterWriteLosesMass: other holds k = 1000
// (L = 2); Merge reads other's time, then its cells one by one. A write
// to other 1 s later (clock advanced) lands after Merge loaded k's
// level-0 cell and before its level-1 cell: that cell (1000/e + 1, stamped
// after the merge instant) counts as age 0 at the merge instant, and k's
// merged estimate in s (empty before) is 368.9, below other's own truth
// at that instant, 1000. Contract: Merge "never below either input's
// truth"; other "read as WriteTo reads it".
func TestAudit23FixedMergeLaterWriteLosesMass(t *testing.T) {
	cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	cs.Set(audit23T0)
	co.Set(audit23T0)
	armed := false
	var other *sketch.Sketch
	k := []byte("k")
	hook := func() {
		co.Advance(time.Second) // one world: s's clock moves too
		cs.Advance(time.Second)
		other.Update(k, 1)
	}
	base := sketch.Config{Levels: 2, CellsPerLevel: 64, Hi: 1e12, Seed: 3}
	cfgS, cfgO := base, base
	cfgS.Decay, cfgS.Clock = audit23HookExp{lambda: 1}, cs
	cfgO.Decay, cfgO.Clock = audit23HookExp{lambda: 1, armed: &armed, hook: hook}, co
	s, err := sketch.New(cfgS)
	if err != nil {
		t.Fatal(err)
	}
	other, err = sketch.New(cfgO)
	if err != nil {
		t.Fatal(err)
	}
	other.Update(k, 1000)
	cs.Advance(10 * time.Millisecond) // both clocks 10 ms on: other's cells are read with dt > 0
	co.Advance(10 * time.Millisecond)
	truth := other.Query(k) // ~990, at the merge instant
	armed = true
	if err := s.Merge(other); err != nil {
		t.Fatal(err)
	}
	if armed {
		t.Fatal("the hook did not run: the test no longer reaches the interleaving")
	}
	// After the merge, both clocks 1 s on: s holds at least other's
	// truth before the racing write, decayed to now (the write itself may
	// be missing at some cells: WriteTo's per-cell rule). Stating the
	// later-stamped cell at the merge instant lost it (135.7).
	if got, want := s.Query(k), truth*math.Exp(-1); got < want*(1-1e-6) {
		t.Errorf("merged k = %.4f, below other's truth before the write, decayed to now, %.4f", got, want)
	}
}

// TestAudit23MergeNeverLoses: Merge of None and Exponential sketches on
// separate fake clocks (other behind, ahead, level; both clocks stepped
// back after their writes, so their high-water marks lead) reads, for
// every key, at least a + b decayed by the gap when other is behind: a
// and b each side's Query at the instant Merge uses (neither clock moves
// in between), never less. Sequential: no writer runs alongside.
func TestAudit23MergeNeverLoses(t *testing.T) {
	for _, law := range []struct {
		name string
		d    decay.Decay
		f    func(v float64, ms int64) float64
	}{
		{"none", decay.None(), func(v float64, ms int64) float64 { return v }},
		{"exp", decay.Exponential(0.5), func(v float64, ms int64) float64 { return v * math.Exp(-0.5*float64(ms)/1000) }},
	} {
		for _, skew := range []int64{-3000, -500, 0, 700, 2500} {
			cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
			cs.Set(audit23T0)
			co.Set(audit23T0)
			var hwS, hwO int64
			cfg := sketch.Config{Levels: 4, CellsPerLevel: 256, Hi: 1e12, Seed: 5, Decay: law.d}
			cfgS, cfgO := cfg, cfg
			cfgS.Clock, cfgO.Clock = cs, co
			s, _ := sketch.New(cfgS)
			o, _ := sketch.New(cfgO)
			hwS, hwO = cs.NowMillis(), co.NowMillis()
			keys := []string{"a", "b", "c", "d", "e", "f", "g"}
			for i := range 60 {
				k := keys[i%len(keys)]
				v := float64(1 + i%7)
				if i%3 != 0 {
					s.UpdateString(k, v)
					hwS = max(hwS, cs.NowMillis())
				} else {
					o.UpdateString(k, v*10)
					hwO = max(hwO, co.NowMillis())
				}
				cs.Advance(37 * time.Millisecond)
				co.Advance(29 * time.Millisecond)
			}
			cs.Advance(-time.Second)
			co.Advance(-time.Second + time.Duration(skew)*time.Millisecond)
			msS, msO := max(hwS, cs.NowMillis()), max(hwO, co.NowMillis())
			var a, b [7]float64
			for i, k := range keys {
				a[i], b[i] = s.QueryString(k), o.QueryString(k)
			}
			if err := s.Merge(o); err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				want := a[i] + law.f(b[i], max(msS-msO, 0))
				if got := s.QueryString(k); got < want*(1-1e-6) {
					t.Errorf("%s skew %d: merged %s = %v, below a + b = %v + %v (decayed over %d ms) = %v",
						law.name, skew, k, got, a[i], b[i], max(msS-msO, 0), want)
				}
			}
		}
	}
}

// TestAudit23MergeLinearOverlapCoversUnion: docs/snapshots.md, Merge:
// "Linear, Merge(o, T) with T > 0: a + b + rate*T >= union" for T at
// least the time since both started from empty. Two replicas and a
// union sketch on one fake clock that steps forward and back (the time
// they use is the high-water mark, so T is the mark's progress), random
// non-negative streams split between the replicas: after Merge(b, T)
// every key reads at least the union's estimate; and Merge(b) (no
// overlap) at least max(a, b).
func TestAudit23MergeLinearOverlapCoversUnion(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := sketchtest.NewFakeClock()
		clk.Set(audit23T0)
		cfg := sketch.Config{Levels: 3, CellsPerLevel: 32, Hi: 1e9, Seed: 11, Decay: decay.Linear(2), Clock: clk}
		a, _ := sketch.New(cfg)
		b, _ := sketch.New(cfg)
		u, _ := sketch.New(cfg)
		a0, _ := sketch.New(cfg)
		hw, start := clk.NowMillis(), clk.NowMillis()
		keys := 40
		for range 2000 {
			switch rng.IntN(5) {
			case 0:
				clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
			case 1:
				clk.Advance(-time.Duration(rng.IntN(500)) * time.Millisecond)
			}
			hw = max(hw, clk.NowMillis())
			k := []byte(fmt.Sprint("k", rng.IntN(keys)))
			d := float64(rng.IntN(3))
			if rng.IntN(2) == 0 {
				a.Update(k, d)
				a0.Update(k, d)
			} else {
				b.Update(k, d)
			}
			u.Update(k, d)
		}
		var av, bv [40]float64
		for i := range keys {
			k := []byte(fmt.Sprint("k", i))
			av[i], bv[i] = a.Query(k), b.Query(k)
		}
		overlap := time.Duration(hw-start) * time.Millisecond
		if err := a.Merge(b, overlap); err != nil {
			t.Fatal(err)
		}
		if err := a0.Merge(b); err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			k := []byte(fmt.Sprint("k", i))
			if got, want := a.Query(k), u.Query(k); got < want*(1-1e-6) {
				t.Errorf("seed %d: %s merged with overlap %v reads %v, below the union's %v", seed, k, overlap, got, want)
			}
			if got, want := a0.Query(k), math.Max(av[i], bv[i]); got < want*(1-1e-6) {
				t.Errorf("seed %d: %s merged without overlap reads %v, below max(a, b) = %v", seed, k, got, want)
			}
		}
	}
}
