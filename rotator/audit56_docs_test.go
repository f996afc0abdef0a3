package rotator_test

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// docs/snapshots.md: "If the set is promoted during the encode (a Period
// ends, or a grudge Ticker ticks), writes after the promotion go to a
// generation the snapshot does not hold, so WriteTo fails with an error
// saying to take the snapshot again". (An earlier version held promotions
// off during the encode; audit 55 showed the live rotator then forgot the
// writes made meanwhile.) The live rotator promotes on time and keeps
// every write; the refused snapshot is taken again once no deadline
// falls inside it, and restores them.
func TestAudit56PromotionDuringWriteToRefused(t *testing.T) {
	for _, jump := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond} {
		clock := sketchtest.NewFakeClock()
		cfg := rotator.Config{Sketch: sketch.Config{Hi: 1000, Levels: 2, CellsPerLevel: 256, Seed: 9, Clock: clock},
			Generations: 3, Period: 100 * time.Millisecond}
		r, err := rotator.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.UpdateString("old", 7)
		before := r.Stats()
		var during rotator.Stats
		w := &testhook.Writer{Hook: func() {
			clock.Advance(jump)
			r.UpdateString("x", 50)
			if !r.TryUpdateString("y", 5, 100) {
				t.Errorf("TryUpdate during the encode denied")
			}
			r.QueryString("old")
			during = r.Stats()
		}}
		if _, err := r.WriteTo(w); err == nil || !strings.Contains(err.Error(), "take the snapshot again") {
			t.Fatalf("jump %v: WriteTo across a promotion: %v, want the documented refusal", jump, err)
		}
		wantPeriods := uint64(jump / cfg.Period)
		if during.Promotions != before.Promotions+1 || during.Periods != before.Periods+wantPeriods {
			t.Errorf("jump %v: during the encode, %d promotions for %d periods; want 1 for %d (promotion on time)",
				jump, during.Promotions-before.Promotions, during.Periods-before.Periods, wantPeriods)
		}
		if got := r.QueryString("x"); math.Abs(got-50) > 1e-3 {
			t.Errorf("jump %v: live x = %v, want 50", jump, got)
		}
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatalf("jump %v: WriteTo again: %v", jump, err)
		}
		r2, err := rotator.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.UnmarshalBinary(buf.Bytes()); err != nil {
			t.Fatalf("jump %v: restore: %v", jump, err)
		}
		if got := r2.QueryString("x"); math.Abs(got-50) > 1e-3 {
			t.Errorf("jump %v: restored x = %v, want 50", jump, got)
		}
		if got := r2.QueryString("y"); math.Abs(got-5) > 1e-3 {
			t.Errorf("jump %v: restored y = %v, want 5", jump, got)
		}
	}
}
