package sketch_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch"
)

// a152PlainClock is a clock without Now: its Timebase anchors at
// time.Now(), and a reading far from the anchor is a wall time far from
// today.
type a152PlainClock struct{ ms int64 }

func (c *a152PlainClock) NowMillis() int64 { return c.ms }

// TestAudit152FixedSnapshotWallWrapsForPlainClock (audit 152): a
// sketch on a clock without Now, built while the clock read MinInt64 ms
// (its anchor is time.Now(), so reading MinInt64 stands for today), then
// moved to MaxInt64 ms: its snapshot instant is Time(MaxInt64), 2^64-1 ms
// (584 million years) after today, which 0038162's farTime now computes
// exactly; but WriteTo stores Time(ms).UnixMilli() (internal/core/
// snapshot.go:354), and UnixMilli wraps in int64 past 292 million years:
// the header's instant reads as 1 ms before the anchor, i.e. today. A
// restore on a clock one hour after today then counts an hour of
// downtime, and k (50, Linear(1/s)) reads 0, below its truth: the
// restoring clock is 584 million years behind the instant, so there is
// no downtime (50).
//
// internal/core/snapshot.go: "The header carries the snapshot instant as
// a wall time (Unix ms), so a restore on another process clock decays
// every cell by its age at the snapshot plus the downtime"; limit/doc.go
// and sketch: a restore never reads below the truth ("A restoring clock
// that reads earlier than the snapshot's instant counts its reading as
// that instant (no drain at the restore)"). Observed: header instant =
// anchor's Unix ms - 1; k reads 0. Fix: bound the wall instant instead
// of wrapping: a helper (e.g. core.WallMs(t) = t.Unix() saturated at
// +-farWall, or boundWall on a saturating conversion) for every
// Time(ms).UnixMilli() in snapshot headers and restores (core/snapshot.go
// 140, 354, 594; rotator_snapshot.go 105, 106, 270; bucket/snapshot.go
// 152, 272).
func TestAudit152FixedSnapshotWallWrapsForPlainClock(t *testing.T) {
	clk := &a152PlainClock{math.MinInt64}
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: a152Lin{1}, Hi: 1e9, Seed: 152, Clock: clk}
	before := time.Now()
	s := mustNewSketch(t, cfg)
	clk.ms = math.MaxInt64
	s.UpdateString("k", 50)
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// The header's instant (atWall): find it as the only int64 field
	// near today's Unix ms (the epoch's wall is the other; both wrap).
	le := binary.LittleEndian
	today := before.UnixMilli()
	var near []int64
	for j := 0; j+8 <= 88; j += 4 {
		if v := int64(le.Uint64(b[j:])); v > today-3_600_000 && v < today+3_600_000 {
			near = append(near, v)
		}
	}
	r := restoredAt(t, cfg, b, today+3_600_000) // an hour after today: 584 million years before the instant
	if got := r.QueryString("k"); math.Abs(got-50) > 1e-3 {
		t.Errorf("snapshot taken at Time(MaxInt64) (584 My after today) restored an hour after today: k reads %v, want 50 (no downtime); header wall fields near today: %v", got, near)
	}
}

// TestAudit152SnapshotWallFarNoWrapHolds: the control of the finding
// above: a clock without Now built at 0 ms and moved to 2^62 ms (the
// instant's Unix ms, today + 2^62, fits int64): restored an hour after
// today (the instant is 146 million years later) k reads 50, no
// downtime; and the wrapped case restored an hour before today reads 50
// too (the wrapped instant, today - 1 ms, is then after the clock).
func TestAudit152SnapshotWallFarNoWrapHolds(t *testing.T) {
	for _, c := range []struct{ from, to, shift int64 }{
		{0, 1 << 62, 3_600_000}, {math.MinInt64, math.MaxInt64, -3_600_000},
	} {
		clk := &a152PlainClock{c.from}
		cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: a152Lin{1}, Hi: 1e9, Seed: 152, Clock: clk}
		today := time.Now().UnixMilli()
		s := mustNewSketch(t, cfg)
		clk.ms = c.to
		s.UpdateString("k", 50)
		var buf bytes.Buffer
		if _, err := s.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		r := restoredAt(t, cfg, buf.Bytes(), today+c.shift)
		if got := r.QueryString("k"); math.Abs(got-50) > 1e-3 {
			t.Errorf("clock %d -> %d, restored at today%+d ms: k reads %v, want 50", c.from, c.to, c.shift, got)
		}
	}
}
