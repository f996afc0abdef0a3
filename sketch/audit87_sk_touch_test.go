package sketch_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a87Configs are configurations off the common path: a custom
// aggregator, a Hi no float32 holds (reads capped), Lo < 0 with Linear,
// an infinite Hi, Max and Mean.
func a87Configs() map[string]sketch.Config {
	return map[string]sketch.Config{
		"aggfunc":  {Levels: 5, CellsPerLevel: 64, Hi: 1e6, Decay: decay.Exponential(0.3), AggregateFunc: a87Median},
		"hi0.1":    {Levels: 3, CellsPerLevel: 64, Hi: 0.1, Decay: decay.Exponential(0.3)},
		"linearLo": {Levels: 4, CellsPerLevel: 64, Lo: -50, Hi: 50, Decay: decay.Linear(3)},
		"hiInf":    {Levels: 8, CellsPerLevel: 64, Hi: math.Inf(1), Decay: decay.Linear(1e6)},
		"max":      {Levels: 2, CellsPerLevel: 64, Hi: 1e3, Aggregator: sketch.Max, Decay: decay.Exponential(2)},
		"mean":     {Levels: 7, CellsPerLevel: 64, Lo: -1e3, Hi: 1e3, Aggregator: sketch.Mean, Hasher: sketch.SipHash()},
		"custom":   {Levels: 2, CellsPerLevel: 64, Hi: 1e3, Decay: a87Halving{}},
	}
}

// TestAudit87SkNoAllocsOffPath: API.md, "no allocation on Update, Query,
// UpdateAndQuery, TryUpdate and the string twins", doc.go: "... their
// String twins and their At forms never allocate", on the configurations
// earlier audits did not measure (a custom AggregateFunc, a Hi no
// float32 holds, Lo < 0, infinite Hi, a custom law), with the clock
// moving between calls (every call decays), TryUpdate both admitting and
// denying, and negative deltas.
func TestAudit87SkNoAllocsOffPath(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	for name, cfg := range a87Configs() {
		clk := sketchtest.NewFakeClock()
		clk.Set(5_000_000)
		cfg.Clock = clk
		s, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		k, ks := []byte("key"), "key"
		tick := func() { clk.Advance(3 * time.Millisecond) }
		ops := map[string]func(){
			"Update":               func() { tick(); s.Update(k, 1) },
			"Update negative":      func() { tick(); s.Update(k, -1) },
			"Query":                func() { tick(); _ = s.Query(k) },
			"UpdateAndQuery":       func() { tick(); _ = s.UpdateAndQuery(k, 0.5) },
			"TryUpdate admit":      func() { tick(); _ = s.TryUpdate(k, 0.01, 1e300) },
			"TryUpdate deny":       func() { tick(); _ = s.TryUpdate(k, 1, -1e300) },
			"TryUpdate same ms":    func() { _ = s.TryUpdate(k, 0, 1e300) },
			"UpdateString":         func() { tick(); s.UpdateString(ks, 2) },
			"QueryString":          func() { tick(); _ = s.QueryString(ks) },
			"UpdateAndQueryString": func() { tick(); _ = s.UpdateAndQueryString(ks, -0.25) },
			"TryUpdateString":      func() { tick(); _ = s.TryUpdateString(ks, 1, 1e300) },
			"UpdateAt":             func() { tick(); s.UpdateAt(clk.Now(), ks, 1) },
			"QueryAt":              func() { tick(); _ = s.QueryAt(clk.Now().Add(time.Hour), ks) },
			"UpdateAndQueryAt":     func() { tick(); _ = s.UpdateAndQueryAt(clk.Now().Add(-time.Hour), ks, 1) },
			"TryUpdateAt":          func() { tick(); _ = s.TryUpdateAt(clk.Now(), ks, 1, 1e300) },
		}
		for op, f := range ops {
			f()
			if a := testing.AllocsPerRun(100, f); a != 0 {
				t.Errorf("%s %s: %v allocations per call, want 0", name, op, a)
			}
		}
	}
}

// a87Cells decodes a snapshot's cell records (docs/snapshots.md: 88-byte
// header, then per cell a u32 float32 score and a u32 age).
func a87Cells(t *testing.T, s *sketch.Sketch) []uint64 {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Config()
	n := int(cfg.Levels * cfg.CellsPerLevel)
	if len(b) != 88+8*n+4 {
		t.Fatalf("snapshot of %d bytes, want %d", len(b), 88+8*n+4)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[88+8*i:])
	}
	return out
}

// TestAudit87SkWritesOnlyItsCells: API.md, "Every operation touches
// exactly L cells": a write changes the key's L cells (the ones
// QueryDetailed names) and no other, and a read or a denial changes
// none, on each configuration of TestAudit87SkNoAllocsOffPath, the clock
// moving between operations (cells compared by snapshot records taken at
// one instant before and after the operation).
func TestAudit87SkWritesOnlyItsCells(t *testing.T) {
	for name, cfg := range a87Configs() {
		clk := sketchtest.NewFakeClock()
		clk.Set(9_000_000)
		cfg.Clock = clk
		s, err := sketch.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := int(cfg.CellsPerLevel)
		for i := range 40 {
			s.UpdateString(fmt.Sprint("bg", i), float64(i%5)+0.5)
		}
		for step := range 60 {
			clk.Advance(time.Duration(1+step%7) * time.Millisecond)
			key := fmt.Sprint("k", step%9)
			own := map[int]bool{}
			for _, l := range s.QueryDetailed([]byte(key)).Levels {
				own[int(l.Level)*m+int(l.Index)] = true
			}
			before := a87Cells(t, s)
			var write bool
			switch step % 6 {
			case 0:
				s.UpdateString(key, 1.5)
				write = true
			case 1:
				_ = s.UpdateAndQueryString(key, -0.5)
				write = true
			case 2:
				write = s.TryUpdateString(key, 0.75, 1e300)
				if !write {
					t.Errorf("%s step %d: TryUpdate under a limit of 1e300 denied", name, step)
				}
			case 3:
				if s.TryUpdateString(key, 1, -1e300) {
					t.Errorf("%s step %d: TryUpdate under a limit of -1e300 admitted", name, step)
				}
			case 4:
				_ = s.QueryString(key)
			default:
				_ = s.QueryAt(clk.Now(), key)
			}
			after := a87Cells(t, s)
			changed := 0
			for i := range before {
				if before[i] == after[i] {
					continue
				}
				changed++
				if !own[i] {
					t.Errorf("%s step %d: operation %d on %s changed cell %d (level %d index %d), not one of its own", name, step, step%6, key, i, i/m, i%m)
				}
			}
			if !write && changed != 0 {
				t.Errorf("%s step %d: a read or denial changed %d cells", name, step, changed)
			}
			if changed > int(cfg.Levels) {
				t.Errorf("%s step %d: %d cells changed, more than L=%d", name, step, changed, cfg.Levels)
			}
		}
	}
}
