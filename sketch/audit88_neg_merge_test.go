package sketch_test

import (
	"bytes"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a88negHookClock is a FakeClock whose next reading, once armed, first
// runs a function (another goroutine's operation, made deterministic)
// and then returns the time it read before running it.
type a88negHookClock struct {
	*sketchtest.FakeClock
	armed atomic.Pointer[func()]
}

func (c *a88negHookClock) NowMillis() int64 {
	ms := c.FakeClock.NowMillis()
	if f := c.armed.Swap(nil); f != nil {
		(*f)()
	}
	return ms
}

func (c *a88negHookClock) arm(f func()) { c.armed.Store(&f) }

// TestAudit88NegMergeCreditWrittenDuringMerge: the limitation documented
// in docs/snapshots.md, "Merge" ("For a credit the old rule is not the
// safe side: held undecayed until the stamp, it reads below the union
// until the lead has passed ... Credits written during a merge are left
// there: stated, not fixed") and internal/core/merge.go ("Writes during
// the merge").
//
// s and other on one fake clock (each through its own Timebase),
// Exponential with a half-life of 1 s, Lo = -100, one key k alone in both
// sketches. Both hold k = -8 at T. s.Merge(other) reads s's time (T);
// then, before it reads the cells, a write lands 1 s later (the clock
// moves by 1 s), so the merged cell is stamped 1 s (the lead) after T and
// one side's credit, read at T, decays from T+1s instead of T:
//
//   - other: Update(k, -8) at T+1s: s's own -8 decays late. At T+1s s
//     reads -8 + -12 = -20 against a union truth of -4 + -12 = -16.
//   - s: Update(k, 0) at T+1s re-stamps s's cell (-4 at T+1s): other's
//     -8 decays late. At T+1s s reads -4 + -8 = -12 against -4 + -4 = -8.
//
// Regression bound, checked at the stamp (T+1s) and after: the key reads
// at least the union with the late credit taken undecayed over the lead
// (-8 held to T+1s), that is below the truth by at most that credit's
// own decay over the lead (4 at T+1s), decaying with it after. Under
// Exponential the deficit halves each half-life but does not reach 0:
// the merged value is the union's times 2^(lead/half-life) over the
// late part, so the read is not asserted at the truth after the lead.
func TestAudit88NegMergeCreditWrittenDuringMerge(t *testing.T) {
	const t0 = 1_700_000_000_000
	lambda := math.Ln2 // half-life 1 s
	decayed := func(v float64, ms int64) float64 { return v * math.Exp(-lambda*float64(ms)/1000) }
	for _, who := range []string{"other", "s"} {
		t.Run("write to "+who, func(t *testing.T) {
			fc := sketchtest.NewFakeClock()
			fc.Set(t0)
			sc, oc := &a88negHookClock{FakeClock: fc}, &a88negHookClock{FakeClock: fc}
			cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Exponential(lambda), Lo: -100, Hi: 100, Seed: 5}
			cfg.Clock = sc
			s := a88negSketch(t, cfg)
			cfg.Clock = oc
			other := a88negSketch(t, cfg)
			k := []byte("k")
			s.Update(k, -8)
			other.Update(k, -8)
			// Merge reads s's time, then other's: the write runs inside
			// the read of the sketch it does not write, so that sketch's
			// time is T and the written one's T+1s.
			const lead = 1000 // ms
			if who == "other" {
				sc.arm(func() {
					fc.Advance(lead * time.Millisecond)
					other.Update(k, -8)
				})
			} else {
				oc.arm(func() {
					fc.Advance(lead * time.Millisecond)
					s.Update(k, 0)
				})
			}
			if err := s.Merge(other); err != nil {
				t.Fatal(err)
			}
			if now := fc.NowMillis(); now != t0+lead {
				t.Fatalf("the clock reads T+%dms after the merge, want T+%dms", now-t0, lead)
			}
			for _, at := range []int64{lead, 1500, 2000, 4000} { // ms after T
				fc.Set(t0 + at)
				// Each stream's truth at T+at: the late credit is s's own
				// -8 for a write to other, other's -8 for a write to s.
				late := decayed(-8, at)
				written := decayed(-8, at) // the other side's -8 at T
				if who == "other" {
					written += decayed(-8, at-lead)
				}
				truth := late + written
				floor := decayed(-8, at-lead) + written // the late credit held undecayed over the lead
				got := s.Query(k)
				if tol := 1e-6 * -floor; got < floor-tol {
					t.Errorf("after Merge with a write to %s during it, k reads %v at T+%dms: below the union truth %v by %v, more than the late credit's own decay over the lead (%v, down to %v)", who, got, at, truth, truth-got, truth-floor, floor)
				}
				if got > truth+1e-6 {
					t.Logf("T+%dms: k reads %v, at or above the union truth %v: the documented under-estimate no longer shows", at, got, truth)
				}
			}
		})
	}
}

// TestAudit88NegSnapshotCreditWrittenDuringEncode: the limitation
// documented in internal/core/snapshot.go (MarshalBinary: a credit keeps
// its stamp, a negative age, restored that far after T: "a credit whose
// last write during the encode was itself negative reads that newer
// value, below its truth, between T and its stamp") and docs/snapshots.md
// ("For a credit the old rule is not the safe side").
//
// Exponential, half-life 1 s, one key alone: k = -8 at T. WriteTo takes
// its instant T; while it writes the header (before it reads any cell)
// the clock moves 1 s and Update(k, -1) lands: the cell holds -4 - 1 = -5
// stamped T+1s, stated with that stamp. Restored on a clock at T (no
// downtime), the key reads -5 from T to the stamp, while its truth is
// -8 x 2^-t (the -1 lands at T+1s): below it from about T+0.68s.
// Regression bounds: between T and the stamp the read is never below the
// value at the stamp (-5: held, not decayed further down), so never
// below the truth by more than the write made during the encode (1:
// the old credit only rises toward 0 before the stamp); at the stamp and
// after it reads at least the truth.
func TestAudit88NegSnapshotCreditWrittenDuringEncode(t *testing.T) {
	const t0 = 1_700_000_000_000
	lambda := math.Ln2
	fc := sketchtest.NewFakeClock()
	fc.Set(t0)
	cfg := sketch.Config{Levels: 2, CellsPerLevel: 64, Decay: decay.Exponential(lambda), Lo: -100, Hi: 100, Seed: 5, Clock: fc}
	s := a88negSketch(t, cfg)
	k := []byte("k")
	s.Update(k, -8)
	const lead, w = 1000, -1.0 // the write during the encode: w at T+lead ms
	var buf bytes.Buffer
	hw := &a88negHookWriter{w: &buf, first: func() {
		fc.Advance(lead * time.Millisecond)
		s.Update(k, w)
	}}
	if _, err := s.WriteTo(hw); err != nil {
		t.Fatal(err)
	}
	rc := sketchtest.NewFakeClock()
	rc.Set(t0)
	cfg.Clock = rc
	r := a88negSketch(t, cfg)
	if err := r.UnmarshalBinary(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	atStamp := -8*math.Exp(-lambda*lead/1000) + w // -5
	for _, at := range []int64{0, 500, 900, 999, 1000, 1500, 3000} {
		rc.Set(t0 + at)
		truth := -8 * math.Exp(-lambda*float64(at)/1000)
		if at >= lead {
			truth += w * math.Exp(-lambda*float64(at-lead)/1000)
		}
		got := r.Query(k)
		if at < lead {
			if got < atStamp-1e-6 || got < truth+w-1e-6 {
				t.Errorf("restored (no downtime), T+%dms, before the stamp: k reads %v for a truth of %v: below the value at the stamp (%v), or below the truth by more than the write made during the encode (%v)", at, got, truth, atStamp, -w)
			}
		} else if got < truth-1e-6 {
			t.Errorf("restored (no downtime), T+%dms, at or after the stamp (T+%dms): k reads %v, below its truth %v", at, lead, got, truth)
		}
	}
}

// a88negHookWriter runs first before its first Write (WriteTo's header,
// written before any cell is read).
type a88negHookWriter struct {
	w     *bytes.Buffer
	first func()
}

func (h *a88negHookWriter) Write(p []byte) (int, error) {
	if h.first != nil {
		f := h.first
		h.first = nil
		f()
	}
	return h.w.Write(p)
}
