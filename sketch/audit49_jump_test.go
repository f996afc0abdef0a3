package sketch_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a49JumpCase: a sketch saved while its clock jumps by jump ms during the
// encode, and a write at the new time; restored on a clock that reads
// the write's wall time. Returns (restored estimate, original estimate,
// truth at that instant), or WriteTo's error.
func a49JumpCase(t *testing.T, lambda float64, t0, jump int64) (restored, original, truth float64, err error) {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(t0)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Exponential(lambda), Hi: 1e9, Seed: 49, Clock: clk}
	s := mustNewSketch(t, cfg)
	var buf bytes.Buffer
	w := &testhook.Writer{W: &buf, Hook: func() {
		// The clock jumps during the encode (after T was read), and a
		// write lands at the new time.
		clk.Set(t0 + jump)
		s.UpdateString("k", 50)
	}}
	if _, err := s.WriteTo(w); err != nil {
		return 0, 0, 0, err
	}
	original = s.QueryString("k")
	truth = 50 // written at t0+jump, read at t0+jump
	rclk := sketchtest.NewFakeClock()
	rclk.Set(t0 + jump) // the restore happens at the wall time of the write
	rcfg := cfg
	rcfg.Clock = rclk
	r := mustNewSketch(t, rcfg)
	if err := r.UnmarshalBinary(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	restored = r.QueryString("k")
	return restored, original, truth, nil
}

// TestAudit49JumpDuringEncodeShort: a jump of a few ms, or up to
// maxAhead (2^24 ms), during WriteTo: the write is restored stamped after
// T, as the doc says, so it reads its truth at its own wall time.
func TestAudit49JumpDuringEncodeShort(t *testing.T) {
	for _, jump := range []int64{1, 7, 1000, 1 << 20, 1<<24 - 1, 1 << 24} {
		got, orig, truth, err := a49JumpCase(t, 1e-4, 1_000_000_000, jump)
		if err != nil {
			t.Fatalf("jump %d ms: %v", jump, err)
		}
		if got < truth || math.Abs(got-orig) > 1e-3*truth {
			t.Errorf("jump %d ms: restored %v, original %v, truth %v", jump, got, orig, truth)
		}
	}
}

// TestAudit49FixedJumpDuringEncodeRestoredBelowTruth (fixed: WriteTo
// fails when a cell was written more than 2^24 ms after T, which a
// restore cannot state; before, the write of 50 restored as 42.3 after a
// 9.3 h jump, 24.9 after a day): sketch/sketch.go (WriteTo) and
// docs/snapshots.md, "Consistency under concurrent updates": "a cell
// stamped after T, written during the encode, has a negative age and is
// restored stamped that far after T, so it does not decay before it was
// written"; sketch/doc.go: never below the truth, "whatever the ... clock
// jumps".
func TestAudit49FixedJumpDuringEncodeRestoredBelowTruth(t *testing.T) {
	const lambda = 1e-5 // half-life 19 h
	for _, c := range []struct {
		t0, jump int64
		what     string
	}{
		{1_000_000_000, 1<<24 + 1, "2^24 + 1 ms: just past maxAhead"},
		{1_000_000_000, 1 << 25, "9.3 h: past maxAhead (2^24 ms)"},
		{1_000_000_000, 86_400_000, "1 day"},
		{1_000_000_000, 1<<31 + 5_000, "2^31 + 5 s"},
		// Past 2^32 ms: the 32-bit stamp wraps.
		{1_000_000_000, 1<<32 + 86_400_000, "2^32 + 1 day"},
	} {
		got, orig, truth, err := a49JumpCase(t, lambda, c.t0, c.jump)
		if err != nil {
			if !strings.Contains(err.Error(), "take the snapshot again") {
				t.Errorf("jump %s: WriteTo failed with %q, not the documented clock-jump error", c.what, err)
			}
			continue
		}
		t.Logf("jump %s: restored %v, never-saved sketch %v, truth %v", c.what, got, orig, truth)
		if got < truth {
			t.Errorf("jump %s during WriteTo: restored estimate %v < truth %v (the never-saved sketch reads %v at the same wall time); "+
				"docs/snapshots.md: a cell written during the encode \"is restored stamped that far after T, so it does not decay before it was written\"",
				c.what, got, truth, orig)
		}
	}
}

// a49HookExp is a custom law (score x e^(-lambda x s)) that runs hook
// once, at the first Apply after it is armed.
type a49HookExp struct {
	lambda float64
	hook   *func()
}

func (l a49HookExp) Apply(score float64, dt int64) float64 {
	if dt <= 0 {
		return score
	}
	if f := *l.hook; f != nil {
		*l.hook = nil
		f()
	}
	return score * math.Exp(-l.lambda*float64(dt)/1000)
}

// a49MergeJump: other (L=2, M=1, Max, so the second level is loaded
// after the hook) is 1 ms behind s. During s.Merge(other), at the first
// decay of other's first cell, other's clock jumps by jump ms and
// other.Update("k", 50) runs. s is then read at the same wall instant as
// that write.
func a49MergeJump(t *testing.T, jump int64) (got, truth float64) {
	const lambda = 1e-5
	hook := new(func())
	law := a49HookExp{lambda: lambda, hook: hook}
	cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	cs.Set(1_000_000_000)
	co.Set(1_000_000_000 - 1)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 1, Decay: law, Aggregator: sketch.Max, Hi: 1e9, Seed: 3}
	cfg.Clock = cs
	s := mustNewSketch(t, cfg)
	cfg.Clock = co
	other := mustNewSketch(t, cfg)
	other.UpdateString("primer", 1)
	co.Set(co.NowMillis() + 10)
	cs.Set(cs.NowMillis() + 10)
	*hook = func() {
		co.Set(co.NowMillis() + jump)
		other.UpdateString("k", 50)
	}
	if err := s.Merge(other); err != nil {
		t.Fatal(err)
	}
	if *hook != nil {
		t.Fatal("the hook did not run during the merge")
	}
	cs.Set(cs.NowMillis() + jump + 1) // s's reading at the write's wall instant (other is 1 ms behind)
	return s.QueryString("k"), 50
}

// TestAudit49MergeJumpShort: a write during the merge a few ms to 2^24 ms
// later on other's clock keeps its value until its own time (the custom
// law's rule: "the merged cell is stamped as far after s's instant").
func TestAudit49MergeJumpShort(t *testing.T) {
	for _, jump := range []int64{1, 500, 1 << 20, 1 << 24} {
		got, truth := a49MergeJump(t, jump)
		if got < truth*(1-1e-6) {
			t.Errorf("jump %d ms: merged %v < truth %v", jump, got, truth)
		}
	}
}

// TestAudit49FixedMergeJumpBelowTruth (fixed: the provided laws read a
// later cell back by their inverse over the whole lead, not one capped at
// 2^24 ms; a custom law keeps the cap, as the Merge doc now says):
// internal/core/merge.go (Merge): a cell of other written later "is
// merged ... so b does not decay before it was written". Before the
// fix, a write 9.3 h ahead merged as 42.9 for 50, one a day ahead 25.1.
func TestAudit49FixedMergeJumpBelowTruth(t *testing.T) {
	const lambda = 1e-5
	for _, jump := range []int64{1 << 25, 86_400_000, 1 << 30} {
		// A provided law: other's clock is jump ahead of s's, and its
		// write of 50 is stamped there.
		cs, co := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		cs.Set(1_000_000_000)
		co.Set(1_000_000_000 + jump)
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 8, Decay: decay.Exponential(lambda), Hi: 1e9, Seed: 3, Clock: cs}
		s := mustNewSketch(t, cfg)
		cfg.Clock = co
		other := mustNewSketch(t, cfg)
		other.UpdateString("k", 50)
		if err := s.Merge(other); err != nil {
			t.Fatal(err)
		}
		cs.Set(1_000_000_000 + jump) // s at the write's instant
		if got := s.QueryString("k"); got < 50 {
			t.Errorf("Exponential, other %d ms ahead: s reads %v at the instant of other's write of 50 (merge.go: read back by the law's inverse)", jump, got)
		}
		// A custom law: the lead is capped at 2^24 ms (the Merge doc), so
		// the write decays by the excess and no more.
		got, _ := a49MergeJump(t, jump)
		floor := 50 * math.Exp(-lambda*float64(jump-1<<24)/1000) * (1 - 1e-6)
		t.Logf("custom law, jump %d ms: merged %v at the write's instant (documented floor %v)", jump, got, floor)
		if got < floor {
			t.Errorf("custom law, jump %d ms during Merge: s reads %v, below 50 decayed over the lead past 2^24 ms (%v)", jump, got, floor)
		}
	}
}
