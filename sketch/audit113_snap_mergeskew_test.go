package sketch_test

// Audit 113 (snapshots and merge): regression, passes. Merge of replicas
// whose clocks differ by more than the 32-bit stamp range (2^31 ms, 24.8
// days) either way, after each lived through idle gaps that re-base its
// stamps. Contract: docs/snapshots.md "Merge" (the instant on other's
// scale is "the difference of the two time.Times ... wall across
// clocks"; None is exact, a + b), API.md ("Min aggregation never
// under-estimates ... clock jumps"). Observed: holds (None exact, no key
// below s's own reading, other's keys kept when other is ahead).

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a113New(t *testing.T, cfg sketch.Config) *sketch.Sketch {
	t.Helper()
	s, err := sketch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAudit113SnapMergeSkewBeyondStampWrap(t *testing.T) {
	const T0 = 1_800_000_000_000
	day := int64(24 * 3600 * 1000)
	for _, law := range []struct {
		name string
		d    decay.Decay
	}{{"none", decay.None()}, {"exp", decay.Exponential(1e-9)}, {"lin", decay.Linear(1e-7)}} {
		for _, skew := range []int64{-60 * day, -30 * day, -25 * day, -1, 1, 25 * day, 30 * day, 60 * day} {
			for _, idle := range []int64{0, 26 * day, 40 * day} {
				name := fmt.Sprintf("%s/skew%d/idle%d", law.name, skew/day, idle/day)
				c1, c2 := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
				c1.Set(T0)
				c2.Set(T0 + skew)
				cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: law.d, Hi: 1e6, Seed: 3}
				cfg.Clock = c1
				s := a113New(t, cfg)
				cfg.Clock = c2
				o := a113New(t, cfg)
				// both live a while (re-bases)
				for i := 0; i < 5; i++ {
					s.UpdateString("a", 10)
					o.UpdateString("a", 7)
					o.UpdateString("b", 5)
					c1.Advance(time.Duration(idle/5+1) * time.Millisecond)
					c2.Advance(time.Duration(idle/5+1) * time.Millisecond)
				}
				qa, qb := s.QueryString("a"), o.QueryString("a")
				ob := o.QueryString("b")
				if err := s.Merge(o); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				ga, gb := s.QueryString("a"), s.QueryString("b")
				// other's value after skew adjustment: other's state as of its own clock
				// mapped onto s's instant: other is skew ms ahead of s.
				if ga < qa || gb <= 0 && ob > 0 && skew > 0 {
					t.Errorf("%s: merged a %v (s %v, o %v), b %v (o %v)", name, ga, qa, qb, gb, ob)
				}
				if law.name == "none" && (ga != qa+qb || gb != ob) {
					t.Errorf("%s: none: merged a %v want %v, b %v want %v", name, ga, qa+qb, gb, ob)
				}
				c1.Advance(time.Duration(30*day) * time.Millisecond)
				if law.name == "none" && (s.QueryString("a") != qa+qb) {
					t.Errorf("%s: none after idle: a %v want %v", name, s.QueryString("a"), qa+qb)
				}
			}
		}
	}
}
