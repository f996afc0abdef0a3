package rotator_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a55T0 = 1_700_000_000_000

func a55New(t *testing.T, clk sketch.Clock, n uint32, period time.Duration) *rotator.Rotator {
	t.Helper()
	r, err := rotator.New(rotator.Config{
		Sketch:      sketch.Config{Levels: 3, CellsPerLevel: 256, Decay: decay.None(), Hi: 1e9, Seed: 55, Clock: clk},
		Generations: n,
		Period:      period,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAudit55FixedLiveRotatorForgetsWritesMadeDuringWriteTo (fixed: promotions are no longer held off
// during WriteTo, which fails instead): a rotator
// (N = 2, Period 100 ms, no decay, first deadline +100 ms) is saved at
// +90 ms; during the encode the clock moves to +150 ms and k is written
// once. Since the audit 53 fix no promotion happens during the encode, so
// the write goes to the old set [g0, g1] only. The first operation after
// WriteTo promotes to [g1, newborn], the newborn built after the write. At
// +200 ms the newborn is the primary and lacks the write: the LIVE rotator
// (the one that was saved, not a restored copy) reads k = 0, 50 ms after
// the write, where a never-saved twin given the same operations reads 1
// until +300 ms. rotator/doc.go: "An operation whose time is past the
// deadline ... works on [the next set], so its writes are in every
// generation that follows"; core/rotator_snapshot.go WriteTo: "the
// retiring generation lives that much longer (more kept, never less)".
func TestAudit55FixedLiveRotatorForgetsWritesMadeDuringWriteTo(t *testing.T) {
	for _, n := range []uint32{2, 3} {
		sc, tc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
		sc.Set(a55T0)
		tc.Set(a55T0)
		saved, twin := a55New(t, sc, n, 100*time.Millisecond), a55New(t, tc, n, 100*time.Millisecond)
		sc.Set(a55T0 + 90)
		tc.Set(a55T0 + 90)
		var buf bytes.Buffer
		if _, err := saved.WriteTo(&testhook.Writer{W: &buf, N: 1, Hook: func() {
			sc.Set(a55T0 + 150)
			saved.UpdateString("k", 1)
		}}); err != nil && !strings.Contains(err.Error(), "take the snapshot again") {
			t.Fatalf("N=%d: WriteTo: %v", n, err)
		}
		tc.Set(a55T0 + 150)
		twin.UpdateString("k", 1)
		// The twin keeps k as primary-visible until its newborn retires:
		// (N-1) periods after the +200 deadline... check every 10 ms up
		// to the last instant the twin still reads it.
		for at := int64(150); at < 150+int64(n)*100; at += 10 {
			sc.Set(a55T0 + at)
			tc.Set(a55T0 + at)
			s, w := saved.QueryString("k"), twin.QueryString("k")
			if w == 0 {
				break
			}
			if s < w {
				t.Errorf("N=%d: at +%d ms (write made at +150 ms during WriteTo) the saved live rotator reads k = %v, "+
					"a never-saved twin %v (rotator/doc.go: a write past the deadline \"is in every generation that follows\"; "+
					"WriteTo doc: \"more kept, never less\")", n, at, s, w)
				break
			}
		}
	}
}

// TestAudit55FixedTryUpdateAdmitsTwiceAfterDelayedPromotion (fixed: promotions are no longer held off
// during WriteTo, which fails instead): the same
// as a limiter: TryUpdate(k, 1, limit 1) admitted at +150 ms during the
// encode (deadline +100 passed, promotion delayed). A never-saved twin
// denies a second TryUpdate until its newborn (which holds the admission)
// retires at +300 ms (N = 2); the saved rotator admits again at +200 ms.
func TestAudit55FixedTryUpdateAdmitsTwiceAfterDelayedPromotion(t *testing.T) {
	sc, tc := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
	sc.Set(a55T0)
	tc.Set(a55T0)
	saved, twin := a55New(t, sc, 2, 100*time.Millisecond), a55New(t, tc, 2, 100*time.Millisecond)
	sc.Set(a55T0 + 90)
	var first bool
	if _, err := saved.WriteTo(&testhook.Writer{W: io.Discard, N: 1, Hook: func() {
		sc.Set(a55T0 + 150)
		first = saved.TryUpdateString("k", 1, 1)
	}}); err != nil && !strings.Contains(err.Error(), "take the snapshot again") {
		t.Fatal(err)
	}
	tc.Set(a55T0 + 150)
	if !first || !twin.TryUpdateString("k", 1, 1) {
		t.Fatal("first TryUpdate denied")
	}
	sc.Set(a55T0 + 200)
	tc.Set(a55T0 + 200)
	s, w := saved.TryUpdateString("k", 1, 1), twin.TryUpdateString("k", 1, 1)
	if s != w {
		t.Errorf("at +200 ms, 50 ms after an admission at +150 ms made during WriteTo: saved rotator admits again = %v, never-saved twin = %v "+
			"(same operations; rotator/doc.go: writes past the deadline \"are in every generation that follows\")", s, w)
	}
}

// TestAudit55FixedSlowWriteToKeepsScoresPastGenerationsTimesPeriod (fixed: promotions are no longer held off
// during WriteTo, which fails instead): a
// score is written at +0; a WriteTo whose writer is slow (an upload)
// runs while the clock moves to +10 periods (N = 2, Period 100 ms): every
// operation during the encode still reads the score in full, 1000 ms
// after its write, and a limiter's TryUpdate(k, 1, 1) is denied there.
// rotator/config.go: "A score lives at most Generations x Period after
// its last write"; rotator/doc.go Guarantees: "a write is gone from every
// generation at most N x Period after it was made" (no exception for a
// snapshot in progress; only the WriteTo doc says the retiring generation
// "lives that much longer").
func TestAudit55FixedSlowWriteToKeepsScoresPastGenerationsTimesPeriod(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(a55T0)
	r := a55New(t, clk, 2, 100*time.Millisecond)
	r.UpdateString("k", 1)
	var q float64
	var admitted bool
	if _, err := r.WriteTo(&testhook.Writer{W: io.Discard, N: 1, Hook: func() {
		clk.Set(a55T0 + 1000)
		q = r.QueryString("k")
		admitted = r.TryUpdateString("k", 1, 1)
	}}); err != nil && !strings.Contains(err.Error(), "take the snapshot again") {
		t.Fatal(err)
	}
	if q != 0 || !admitted {
		t.Errorf("1000 ms (10 periods, N = 2) after its only write, during a slow WriteTo: Query = %v (want 0), TryUpdate(k, 1, 1) admitted = %v (want true) "+
			"(rotator/config.go: \"A score lives at most Generations x Period after its last write\")", q, admitted)
	}
}
