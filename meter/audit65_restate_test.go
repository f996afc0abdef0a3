package meter_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const a65T0 = 1_700_000_000_000

// a65RateJump saves a Rate of window win (PeriodWindows k) holding 10
// observations of "k" at T, while the clock jumps by jump ms before
// write N of the encode and a read of another key runs there (a horizon
// sweep: no write). It returns WriteTo's error and the snapshot.
func a65RateJump(t *testing.T, win time.Duration, k float64, jump int64, n int) (*meter.Rate, *sketchtest.FakeClock, []byte, error) {
	t.Helper()
	c := sketchtest.NewFakeClock()
	c.Set(a65T0)
	r, err := meter.NewRate(win, meter.WithSize(2, 1024), meter.WithClock(c), meter.WithSeed(65), meter.WithPeriodWindows(k))
	if err != nil {
		t.Fatal(err)
	}
	r.ObserveAt(c.Now(), "k", 10)
	w := &testhook.Writer{N: n, Hook: func() {
		c.Set(a65T0 + jump)
		r.PerSecond("other")
	}}
	_, err = r.WriteTo(w)
	return r, c, w.Buf.Bytes(), err
}

// TestAudit65FixedRateSweptToZeroRestoredBelowTruth (fixed in stop 47:
// a 0 under Exponential is read back from 2^-1022, which passes Hi over
// this lead, so the snapshot is refused, ErrTakeAgain; a restore of a
// snapshot taken never reads below the truth): docs/snapshots.md
// ("a score of 0 is 0 at every instant: age 0"; migrating.md Stop 47:
// "never below the truth from T on", "A Rate ... is now taken"). A Rate
// of window 1 min (PeriodWindows 40000: no Period ends) holds 10
// observations of k at T; during the encode the clock jumps 2^30 + 1000
// ms and a read of another key runs the horizon sweep, which re-stamps
// k's cells with their decayed value, 0 (e^-17895 underflows). The
// snapshot is taken, and restored on a clock at T it reads k as 0 per
// second where the never-saved Rate read 10/60 at T.
func TestAudit65FixedRateSweptToZeroRestoredBelowTruth(t *testing.T) {
	for _, n := range []int{2, 3} { // before the rotator's header, before the primary's
		r0, _, _, _ := a65RateJump(t, time.Minute, 40000, 0, 99) // no jump: the truth at T
		truth := r0.PerSecond("k")
		_, _, snap, err := a65RateJump(t, time.Minute, 40000, 1<<30+1000, n)
		if errors.Is(err, sketch.ErrTakeAgain) {
			continue // refused, as documented: the swept 0 read back passes Hi
		}
		if err != nil {
			t.Fatalf("Write %d: WriteTo: %v", n, err)
		}
		rc := sketchtest.NewFakeClock()
		rc.Set(a65T0)
		rr, err := meter.NewRate(time.Minute, meter.WithSize(2, 1024), meter.WithClock(rc), meter.WithSeed(65), meter.WithPeriodWindows(40000))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rr.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := rr.PerSecond("k"); got < truth {
			t.Errorf("Write %d: restored on a clock at T, k reads %v/s; the never-saved Rate read %v/s at T "+
				"(docs/snapshots.md \"a score of 0 is 0 at every instant: age 0\"; migrating.md Stop 47 \"never below the truth from T on\")", n, got, truth)
		}
	}
}

// TestAudit65FixedRateSweptSubnormalRefused (fixed in the docs, stop 47:
// persist.go now says "a Rate's count once its value read back passes
// its Hi", which the swept subnormal's does; the refusal is sound). The
// audit quoted meter/persist.go, Rate
// WriteTo: it fails "when ... the clock jumped over 2^24 ms with a cell
// written or re-stamped after the jump ... that only its stamp can
// state: a Novelty's mark, a Rate's count near its Hi" (Hi is
// MaxFloat32); migrating.md Stop 47: "A Rate ... is now taken". A Rate
// of window 1 h (PeriodWindows 400: no Period ends) with a count of 10
// at T, whose clock jumps 2^30 + 1000 ms during the encode with only a
// read there, is refused: the sweep leaves 10 x e^-298 rounded up to the
// least float32 subnormal (1.4e-45), whose read-back over 2^30 ms passes
// MaxFloat32, so it is stated by its stamp, over 2^24 ms after T. The
// count was nowhere near Hi and nothing was written.
func TestAudit65FixedRateSweptSubnormalRefused(t *testing.T) {
	for _, n := range []int{2, 3} {
		_, _, _, err := a65RateJump(t, time.Hour, 400, 1<<30+1000, n)
		if !errors.Is(err, sketch.ErrTakeAgain) {
			t.Errorf("Write %d: WriteTo = %v; want ErrTakeAgain: the swept count read back passes Hi (persist.go)", n, err)
		}
	}
}

// TestAudit65RateWriteDuringEncodeOverEstimate: an observation. A Rate
// of window 1 min (PeriodWindows 40000) with nothing before T; during
// the encode, 1 h after T, one observation of k. Restored on a clock at
// T the Rate never reads below the truth (0 before the write, 1/60 per
// second at it); the test logs how far above it reads: the write's 1 is
// read back over 1 h to e^60 = 1.1e26 (under MaxFloat32, so stated at
// age 0), i.e. 1.9e24 observations per second at T, for an hour in which
// the true rate is 0, decaying to 1/60 only at the write.
func TestAudit65RateWriteDuringEncodeOverEstimate(t *testing.T) {
	for _, lead := range []int64{60_000, 3_600_000, 1 << 24} {
		c := sketchtest.NewFakeClock()
		c.Set(a65T0)
		r, err := meter.NewRate(time.Minute, meter.WithSize(2, 1024), meter.WithClock(c), meter.WithSeed(65), meter.WithPeriodWindows(40000))
		if err != nil {
			t.Fatal(err)
		}
		w := &testhook.Writer{N: 3, Hook: func() {
			c.Set(a65T0 + lead)
			r.ObserveAt(c.Now(), "k", 1)
		}}
		if _, err := r.WriteTo(w); err != nil {
			t.Logf("lead %d: WriteTo refused: %v", lead, err)
			continue
		}
		rc := sketchtest.NewFakeClock()
		rc.Set(a65T0)
		rr, err := meter.NewRate(time.Minute, meter.WithSize(2, 1024), meter.WithClock(rc), meter.WithSeed(65), meter.WithPeriodWindows(40000))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rr.ReadFrom(bytes.NewReader(w.Buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		for _, f := range []float64{0, 0.5, 0.9, 1} {
			at := a65T0 + int64(f*float64(lead))
			rc.Set(at)
			got := rr.PerSecond("k")
			truth := 0.0
			if f == 1 {
				truth = 1.0 / 60
			}
			if got < truth*(1-1e-6) {
				t.Errorf("lead %d: at T%+d restored %v/s < truth %v/s", lead, at-a65T0, got, truth)
			}
			t.Logf("lead %d ms: restored at T%+d ms reads %.4g/s (truth %.4g/s)", lead, at-a65T0, got, truth)
		}
	}
}
