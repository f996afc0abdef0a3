package sketch_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Idle times past the 32-bit stamp horizon. Cells
// stamp ms mod 2^32; an idle time of 2^31 ms (24.8 days) or more must
// still decay as the reference (int64 ms) decays it: API.md, "Any idle
// time, 1 ms to years, decays as the reference does". Every case builds
// the lock-free sketch and the reference from one Config, each on its
// own FakeClock moved in step, so both see the same times.

const (
	idleDay  = int64(24 * time.Hour / time.Millisecond)
	idleYear = 365 * idleDay
)

// idleTimes straddle 2^31 and 2^32 ms and reach 10 years.
var idleTimes = []int64{
	1, 1000, idleDay,
	1<<31 - 1, 1 << 31, 1<<31 + 1,
	25 * idleDay, 30 * idleDay, 45 * idleDay, 49 * idleDay,
	4_294_080_000, // 49.7 days
	1<<32 - 1, 1 << 32, 1<<32 + 1,
	3 << 31,
	idleYear, 10 * idleYear,
}

// idleStarts are clock readings of the first write: near 0, far from it,
// and next to the 2^31 and 2^32 stamp edges.
var idleStarts = []int64{0, 1, 1e12, 1<<31 - 5, 1<<32 - 5}

// idleLaws keep scores non-zero over years where they can (small
// lambdas and rates), and drain them where they cannot.
var idleLaws = []struct {
	name string
	law  func() decay.Decay
}{
	{"none", decay.None},
	{"exp1e-9", func() decay.Decay { return decay.Exponential(1e-9) }},
	{"exp1e-7", func() decay.Decay { return decay.Exponential(1e-7) }},
	{"exp1e-3", func() decay.Decay { return decay.Exponential(1e-3) }},
	{"lin1e-6", func() decay.Decay { return decay.Linear(1e-6) }},
	{"lin1e-4", func() decay.Decay { return decay.Linear(1e-4) }},
}

// idleClose reports whether lf matches ref: within float32 rounding
// (relative 1e-6, absolute 1e-30 for subnormal float32 results), and
// never below it by more than float64 rounding (the one-sided rule: the
// lock-free sketch rounds up, so it may only be above).
func idleClose(lf, ref float64) bool {
	if math.IsNaN(lf) || math.IsInf(lf, 0) {
		return false
	}
	tol := 1e-6*math.Abs(ref) + 1e-30
	below := 1e-12 * max(1, math.Abs(ref)) // float64 rounding of Linear's drop
	return lf <= ref+tol && lf >= ref-below
}

// idleCloseSwept is idleClose for a sketch kept busy over idle ms: every
// sweep (one per 2^29 ms of clock time while operations run) re-stamps an
// old cell, decaying it and rounding it up to float32 once more, so the
// upward error may grow by one float32 ulp (2^-23 relative) per sweep
// (docs/precision.md).
func idleCloseSwept(lf, ref float64, idle int64) bool {
	if math.IsNaN(lf) || math.IsInf(lf, 0) {
		return false
	}
	tol := (1e-6+float64(idle>>29+1)*0x1p-23)*math.Abs(ref) + 1e-30
	below := 1e-12 * max(1, math.Abs(ref))
	return lf <= ref+tol && lf >= ref-below
}

// idlePair is a lock-free sketch and the reference on clocks in step.
type idlePair struct {
	lf     *sketch.Sketch
	ref    *ref.Sketch
	lc, rc *sketchtest.FakeClock
}

func newIdlePair(t *testing.T, law decay.Decay, m uint32, epoch int64) *idlePair {
	t.Helper()
	p := &idlePair{lc: sketchtest.NewFakeClock(), rc: sketchtest.NewFakeClock()}
	p.lc.Set(epoch)
	p.rc.Set(epoch)
	cfg := sketch.Config{Levels: 4, CellsPerLevel: m, Decay: law, Hi: 1e9, Clock: p.lc}
	p.lf = mustNewSketch(t, cfg)
	cfg.Clock = p.rc
	p.ref = mustNewReference(t, cfg)
	return p
}

func (p *idlePair) set(ms int64) { p.lc.Set(ms); p.rc.Set(ms) }

// idleOps is the first access after the idle time: it returns what the
// operation itself reports from each side (NaN when nothing).
var idleOps = []struct {
	name string
	do   func(s sketch.Scorer, k []byte) float64
}{
	{"Query", func(s sketch.Scorer, k []byte) float64 { return s.Query(k) }},
	{"Update", func(s sketch.Scorer, k []byte) float64 { s.Update(k, 1); return math.NaN() }},
	{"UpdateAndQuery", func(s sketch.Scorer, k []byte) float64 { return s.UpdateAndQuery(k, 1) }},
	{"TryUpdate", func(s sketch.Scorer, k []byte) float64 {
		if s.TryUpdate(k, 1, 10) {
			return 1
		}
		return 0
	}},
}

// TestIdleHorizon writes a key (score 500), leaves the sketch idle, then
// accesses the key first with Query, Update, UpdateAndQuery or
// TryUpdate(k, 1, 10), for every law, idle time and start, with the
// sketch created at clock 0 and at the start: the operation's result and
// the key's Query afterwards match the reference's.
func TestIdleHorizon(t *testing.T) {
	starts, times := idleStarts, idleTimes
	if testing.Short() {
		starts = []int64{1, 1<<32 - 5}
		times = []int64{1000, 1 << 31, 1<<32 + 1, 30 * idleDay, 10 * idleYear}
	}
	key := []byte("idle")
	for _, law := range idleLaws {
		for _, op := range idleOps {
			t.Run("law="+law.name+"/op="+op.name, func(t *testing.T) {
				fails := 0
				for _, start := range starts {
					for _, epoch := range []int64{0, start} {
						for _, idle := range times {
							p := newIdlePair(t, law.law(), 64, epoch)
							p.set(start)
							p.lf.Update(key, 500)
							p.ref.Update(key, 500)
							p.set(start + idle)
							gotOp, wantOp := op.do(p.lf, key), op.do(p.ref, key)
							got, want := p.lf.Query(key), p.ref.Query(key)
							opOK := math.IsNaN(wantOp) && math.IsNaN(gotOp) || idleClose(gotOp, wantOp)
							if op.name == "TryUpdate" && gotOp != wantOp {
								opOK = false
							}
							if !opOK || !idleClose(got, want) {
								fails++
								if fails <= 8 {
									t.Errorf("epoch %d, write at %d, idle %d ms (%.2f days): %s returned %v, reference %v; Query %v, reference %v",
										epoch, start, idle, float64(idle)/float64(idleDay), op.name, gotOp, wantOp, got, want)
								}
							}
						}
					}
				}
				if fails > 8 {
					t.Errorf("... %d failing cases in all", fails)
				}
			})
		}
	}
}

// TestIdleOthersTouched leaves one key idle while other keys are written
// every 20 days (each gap below the 2^31 ms horizon), then reads the idle
// key: it decays as in the reference, whatever the other keys' writes did
// to the sketch's notion of time.
func TestIdleOthersTouched(t *testing.T) {
	times := []int64{30 * idleDay, 45 * idleDay, 60 * idleDay, idleYear, 3 * idleYear}
	if testing.Short() {
		times = []int64{45 * idleDay, idleYear}
	}
	key := []byte("idle")
	others := [][]byte{[]byte("o1"), []byte("o2"), []byte("o3")}
	for _, law := range idleLaws {
		t.Run("law="+law.name, func(t *testing.T) {
			for _, start := range []int64{0, 1e12, 1<<32 - 5} {
				for _, idle := range times {
					p := newIdlePair(t, law.law(), 1024, start)
					p.lf.Update(key, 500)
					p.ref.Update(key, 500)
					for at := 20 * idleDay; at < idle; at += 20 * idleDay {
						p.set(start + at)
						for _, o := range others {
							p.lf.Update(o, 7)
							p.ref.Update(o, 7)
						}
					}
					p.set(start + idle)
					if got, want := p.lf.Query(key), p.ref.Query(key); !idleCloseSwept(got, want, idle) {
						t.Errorf("start %d, idle %.1f days, others written every 20 days: Query %v, reference %v", start, float64(idle)/float64(idleDay), got, want)
					}
					for _, o := range others {
						if got, want := p.lf.Query(o), p.ref.Query(o); !idleCloseSwept(got, want, idle) {
							t.Errorf("start %d, idle %.1f days: other key %s: Query %v, reference %v", start, float64(idle)/float64(idleDay), o, got, want)
						}
					}
				}
			}
		})
	}
}

// TestIdleWholeSketch writes many keys, leaves the whole sketch idle,
// then reads every key (and writes and reads them again): each matches
// the reference.
func TestIdleWholeSketch(t *testing.T) {
	n := 300
	times := idleTimes
	if testing.Short() {
		n = 50
		times = []int64{1 << 31, 1<<32 + 1, 49 * idleDay, 10 * idleYear}
	}
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("whole-%d", i))
	}
	for _, law := range idleLaws {
		t.Run("law="+law.name, func(t *testing.T) {
			for _, idle := range times {
				const start = 1e12
				p := newIdlePair(t, law.law(), 256, start)
				for i, k := range keys {
					p.lf.Update(k, float64(1+i%50))
					p.ref.Update(k, float64(1+i%50))
				}
				p.set(start + idle)
				fails := 0
				for i, k := range keys {
					got, want := p.lf.Query(k), p.ref.Query(k)
					if i%2 == 0 {
						got, want = p.lf.UpdateAndQuery(k, 2), p.ref.UpdateAndQuery(k, 2)
					}
					if !idleClose(got, want) {
						fails++
						if fails <= 3 {
							t.Errorf("idle %.2f days: key %s: %v, reference %v", float64(idle)/float64(idleDay), k, got, want)
						}
					}
				}
				p.set(start + idle + 1000)
				for _, k := range keys {
					if got, want := p.lf.Query(k), p.ref.Query(k); !idleClose(got, want) {
						fails++
						if fails <= 3 {
							t.Errorf("idle %.2f days, 1 s after the reads: key %s: %v, reference %v", float64(idle)/float64(idleDay), k, got, want)
						}
					}
				}
				if fails > 3 {
					t.Errorf("idle %.2f days: %d mismatches in all", float64(idle)/float64(idleDay), fails)
				}
			}
		})
	}
}

// TestSweepKeepsLinearDrain: under the linear law a drained value above
// 2^24 is not a float32, and the horizon sweep stores it rounded up. The
// sweep stamps it earlier by the rounding's drain time (atom.Rules.Rebase),
// so the key keeps draining on its own schedule: read at every later
// millisecond it equals the exact drain of what was written, not the
// rounding (up to 1023 here) more. Before that, a limiter's RetryAfter
// computed before a sweep was late after it (TestRetryAfterInexact).
func TestSweepKeepsLinearDrain(t *testing.T) {
	const v0 = 1e10 // float32 step 1024 from 2^33 down to 2^33's half
	for _, start := range []int64{0, 123_457, 1<<31 - 5} {
		clk := sketchtest.NewFakeClock()
		clk.Set(start)
		s := mustNewSketch(t, sketch.Config{Levels: 4, CellsPerLevel: 64, Decay: decay.Linear(1000), Hi: 1e12, Clock: clk})
		key, other := []byte("drain"), []byte("other")
		s.Update(key, v0)
		// Another key's writes of 0 every day carry the sweeps (one
		// every 2^29 ms); Query, the minimum over 4 levels, reads key's
		// own cells wherever other shares one.
		for day := int64(1); day <= 40; day++ {
			clk.Set(start + day*idleDay + day) // off the whole-second grid
			s.Update(other, 0)
			want := v0 - float64(day*idleDay+day) // 1 unit per ms, exact in float64
			if got := s.Query(key); got != want {
				t.Fatalf("start %d, day %d: Query %v, want the exact drain %v (off by %v)", start, day, got, want, got-want)
			}
		}
	}
}
