package meter_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testhook"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Layout of a meter snapshot with WithSize(2, 4096) (8192 cells: one
// 64 KiB chunk per generation) and the default 2 generations:
//
//	1 meter header, 2 rotator header (its instant already read),
//	3 g0 header, 4 g0 cells, 5 g0 sum, 6 g1 header, 7 g1 cells,
//	8 g1 sum, 9 rotator sum.
//
// A hook before write N runs after the cells of every chunk flushed
// before N were loaded: a write made by a hook at N <= 3 is in the
// primary, at N <= 6 in the second generation.
const (
	a62T0       = int64(1_700_000_000_000)
	a62InG0     = 3
	a62InG1     = 6
	a62LastHook = 9
)

func a62Novelty(t *testing.T, c *sketchtest.FakeClock, T time.Duration) *meter.Novelty {
	t.Helper()
	n, err := meter.NewNovelty(T, meter.WithSize(2, 4096), meter.WithPeriodWindows(1), meter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func a62Rate(t *testing.T, c *sketchtest.FakeClock, W time.Duration) *meter.Rate {
	t.Helper()
	r, err := meter.NewRate(W, meter.WithSize(2, 4096), meter.WithPeriodWindows(1), meter.WithClock(c))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// a62Mark is an exact oracle's record: key marked n at wall ms at; from
// is the first wall ms at which the restored primary is required to hold
// it (the mark reached only the second generation: from its promotion).
type a62Mark struct {
	key  string
	at   int64
	n    float64
	from int64
}

// TestAudit62NoveltyEncodeClockMovesRestoreEverywhere: a Novelty (T =
// 100 ms, PeriodWindows 1, deadline at +100) marks k at +40 and is saved
// at +50; before write N of the encode (every N) the clock moves forward
// by d (1, 20, 49 ms: before the deadline; 50 ms and 1 day: past it, so
// a write there promotes and WriteTo must fail with an error matching
// sketch.ErrTakeAgain) or back by d, and w is marked (or not). The snapshot is restored on clocks 1 h, 1 ms behind, equal
// to, 1 ms, 30 ms and 200 ms ahead of the instant, and walked every ms
// across its promotions: k, and w when the snapshot's primary (N <= 3)
// or second generation (N <= 6, from the promotion) holds it, is seen
// until T after its mark on the restore's time line (the instant mapped
// to the restore when the clock is behind: downtime 0). persist.go: "A
// key marked within T of the snapshot's instant is seen until T after
// its mark, the downtime counted"; novelty.go: "no false negatives
// within T".
func TestAudit62NoveltyEncodeClockMovesRestoreEverywhere(t *testing.T) {
	testsize.Serial(t)
	const T = 100
	S := a62T0 + 50
	for di, d := range []int64{1, 20, 49, -1, -20, -86_400_000, 50, 86_400_000} {
		if !testsize.Keep(di, 2) {
			continue
		}
		for N := 2; N <= a62LastHook; N++ {
			for _, write := range []bool{false, true} {
				c := sketchtest.NewFakeClock()
				c.Set(a62T0)
				nv := a62Novelty(t, c, T*time.Millisecond)
				c.Set(a62T0 + 40)
				nv.Seen("k")
				c.Set(S)
				marks := []a62Mark{{key: "k", at: a62T0 + 40}}
				hw := &testhook.Writer{N: N, Hook: func() {
					c.Set(S + d)
					if write {
						nv.Seen("w")
						at := max(S+d, S) // the Timebase never runs back
						switch {
						case N <= a62InG0:
							marks = append(marks, a62Mark{key: "w", at: at})
						case N <= a62InG1:
							marks = append(marks, a62Mark{key: "w", at: at, from: a62T0 + T})
						}
					}
				}}
				_, err := nv.WriteTo(hw)
				if promoted := write && S+d >= a62T0+T && N < a62LastHook; promoted { // the last write, the sum, comes after the check
					// the write promoted the set during the encode
					if !errors.Is(err, sketch.ErrTakeAgain) {
						t.Errorf("d=%d N=%d: a write past the deadline during the encode: WriteTo = %v, want an error matching sketch.ErrTakeAgain", d, N, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("d=%d N=%d write=%v: WriteTo: %v (no promotion, no jump over 2^24 ms)", d, N, write, err)
				}
				snap := hw.Buf.Bytes()
				for _, off := range []int64{-3_600_000, -1, 0, 1, 30, 200} {
					c2 := sketchtest.NewFakeClock()
					r0 := S + off
					c2.Set(r0)
					m := a62Novelty(t, c2, T*time.Millisecond)
					if _, err := m.ReadFrom(bytes.NewReader(snap)); err != nil {
						t.Fatalf("ReadFrom: %v", err)
					}
					shift := min(off, 0) // wall ms x of the original is x+shift on the restore's line
					bad := false
					for tau := r0; tau <= a62T0+300+shift && !bad; tau++ {
						c2.Set(tau)
						for _, mk := range marks {
							a := mk.at + shift
							if tau < a || tau >= a+T-1 || tau < mk.from+shift {
								continue
							}
							if !m.Contains(mk.key) {
								t.Errorf("d=%d N=%d write=%v restore off %d ms: %s (marked at +%d) unseen at +%d on the restore's line (%d ms after its mark, T = %d). "+
									"persist.go: \"A key marked within T of the snapshot's instant is seen until T after its mark, the downtime counted\"",
									d, N, write, off, mk.key, mk.at-a62T0, tau-shift-a62T0, tau-a, T)
								bad = true
								break
							}
						}
					}
				}
			}
		}
	}
}

// TestAudit62RateEncodeClockMovesNeverBelowOracle: the same encodes for
// a Rate (window 100 ms, PeriodWindows 1): 1000 events of k at +40,
// saved at +50, the clock moved by d before write N, 500 events of w
// there. Restored at the same offsets and walked every ms until just
// before the second promotion (where the rotation term begins), it
// never reads below the exact decayed count of the events the snapshot
// holds. rate.go: "The sketch only errs upward"; doc.go: "a restored
// meter reads what the never-stopped one would".
func TestAudit62RateEncodeClockMovesNeverBelowOracle(t *testing.T) {
	testsize.Serial(t)
	const W = 100
	S := a62T0 + 50
	for _, d := range []int64{1, 20, 49, -1, -3_600_000} {
		for N := 2; N <= a62LastHook; N++ {
			c := sketchtest.NewFakeClock()
			c.Set(a62T0)
			rt := a62Rate(t, c, W*time.Millisecond)
			c.Set(a62T0 + 40)
			rt.Observe("k")
			rt.ObserveAt(c.Now(), "k", 999)
			c.Set(S)
			marks := []a62Mark{{key: "k", at: a62T0 + 40, n: 1000}}
			hw := &testhook.Writer{N: N, Hook: func() {
				c.Set(S + d)
				rt.ObserveAt(c.Now(), "w", 500)
				at := max(S+d, S)
				switch {
				case N <= a62InG0:
					marks = append(marks, a62Mark{key: "w", at: at, n: 500})
				case N <= a62InG1:
					marks = append(marks, a62Mark{key: "w", at: at, n: 500, from: a62T0 + W})
				}
			}}
			if _, err := rt.WriteTo(hw); err != nil {
				t.Fatalf("d=%d N=%d: WriteTo: %v", d, N, err)
			}
			snap := hw.Buf.Bytes()
			for _, off := range []int64{-3_600_000, -1, 0, 1, 30, 120} {
				c2 := sketchtest.NewFakeClock()
				r0 := S + off
				c2.Set(r0)
				m := a62Rate(t, c2, W*time.Millisecond)
				if _, err := m.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatalf("ReadFrom: %v", err)
				}
				shift := min(off, 0)
				bad := false
				for tau := r0; tau < a62T0+2*W+shift && !bad; tau++ {
					c2.Set(tau)
					for _, key := range []string{"k", "w"} {
						truth := 0.0
						for _, mk := range marks {
							a := mk.at + shift
							if mk.key != key || tau < a || tau < mk.from+shift {
								continue
							}
							truth += mk.n * math.Exp(-float64(tau-a)/W) / (W / 1000.0)
						}
						if got := m.PerSecond(key); got < truth*(1-1e-6) {
							t.Errorf("d=%d N=%d restore off %d: PerSecond(%s) at +%d on the restore's line = %v, below the exact %v (ratio %.4f). rate.go: \"The sketch only errs upward\"",
								d, N, off, key, tau-shift-a62T0, got, truth, got/truth)
							bad = true
						}
					}
				}
			}
		}
	}
}

// TestAudit62JumpDuringEncodeRefusedExactly: a Novelty and a Rate (T =
// window = 30 days, PeriodWindows 1: no deadline is met) are saved while
// the clock jumps forward by d (1 h, 2^24-1, 2^24, 2^24+1 ms, 5 days)
// before write N (either side of each generation's load), with or
// without a write (Seen, Observe) there. The Novelty's WriteTo fails
// exactly when d > 2^24 and the write reached a generation not yet
// loaded (N <= 6), with an error matching sketch.ErrTakeAgain (its mark
// sits at Hi, which only its stamp states); persist.go: "It fails with
// an error matching sketch.ErrTakeAgain when a Period ended during the
// encode (or the clock jumped over 2^24 ms with a cell written or
// re-stamped after the jump that only its stamp can state)". The Rate's
// never fails here: since stop 47 its written cell is read back to the
// instant by its law. A snapshot taken is
// restored 1 day behind and 1 h ahead of the instant: k (marked 1 s
// before) and w (if in the primary) are seen at their marks, T/2 and T-2 s
// after; Rate reads at least the exact count then.
func TestAudit62JumpDuringEncodeRefusedExactly(t *testing.T) {
	testsize.Serial(t)
	const T = 30 * 86_400_000
	S := a62T0 + 50_000
	for _, d := range []int64{3_600_000, 1<<24 - 1, 1 << 24, 1<<24 + 1, 5 * 86_400_000} {
		for _, N := range []int{3, 4, 6, 7} { // either side of each generation's load
			for _, write := range []bool{false, true} {
				c := sketchtest.NewFakeClock()
				c.Set(a62T0)
				nv := a62Novelty(t, c, T*time.Millisecond)
				rt := a62Rate(t, c, T*time.Millisecond)
				c.Set(S - 1000)
				nv.Seen("k")
				rt.ObserveAt(c.Now(), "k", 1000)
				c.Set(S)
				var nbuf, rbuf bytes.Buffer
				mk := func(dst *bytes.Buffer, f func()) *testhook.Writer {
					return &testhook.Writer{W: dst, N: N, Hook: func() {
						c.Set(S + d)
						if write {
							f()
						}
					}}
				}
				_, nerr := nv.WriteTo(mk(&nbuf, func() { nv.Seen("w") }))
				c.Set(S) // the Timebase holds S+d; rt's Timebase is its own
				_, rerr := rt.WriteTo(mk(&rbuf, func() { rt.ObserveAt(c.Now(), "w", 500) }))
				want := write && N <= a62InG1 && d > 1<<24
				for name, err := range map[string]error{"Novelty": nerr, "Rate": rerr} {
					want := want && name == "Novelty"
					if (err != nil) != want || (err != nil && !errors.Is(err, sketch.ErrTakeAgain)) {
						t.Errorf("%s d=%d N=%d write=%v: WriteTo error %v; want an error matching sketch.ErrTakeAgain: %v", name, d, N, write, err, want)
					}
				}
				if rerr != nil {
					continue
				}
				for _, off := range []int64{-86_400_000, 3_600_000} {
					c2 := sketchtest.NewFakeClock()
					c2.Set(S + off)
					m := a62Novelty(t, c2, T*time.Millisecond)
					mr := a62Rate(t, c2, T*time.Millisecond)
					if nerr == nil {
						if _, err := m.ReadFrom(bytes.NewReader(nbuf.Bytes())); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := mr.ReadFrom(bytes.NewReader(rbuf.Bytes())); err != nil {
						t.Fatal(err)
					}
					shift := min(off, 0)
					type mark struct {
						key string
						at  int64
						n   float64
					}
					marks := []mark{{"k", S - 1000, 1000}}
					if write && N <= a62InG0 {
						marks = append(marks, mark{"w", S + d, 500})
					}
					// every reading at a later time than the one before: the
					// Timebase never runs back
					type probe struct {
						tau int64
						mk  mark
					}
					var probes []probe
					for _, mk := range marks {
						a := mk.at + shift
						for _, tau := range []int64{a, a + T/2, a + T - 2000} {
							if tau >= S+off {
								probes = append(probes, probe{tau, mk})
							}
						}
					}
					sort.Slice(probes, func(i, j int) bool { return probes[i].tau < probes[j].tau })
					for _, p := range probes {
						tau, mk, a := p.tau, p.mk, p.mk.at+shift
						{
							c2.Set(tau)
							if nerr == nil && !m.Contains(mk.key) {
								t.Errorf("d=%d N=%d off %d: Novelty: %s unseen %d ms after its mark (T = %d ms)", d, N, off, mk.key, tau-a, T)
							}
							truth := mk.n * math.Exp(-float64(tau-a)/T) / (T / 1000.0)
							if got := mr.PerSecond(mk.key); got < truth*(1-1e-6) {
								t.Errorf("d=%d N=%d off %d: Rate(%s) %d ms after its mark = %v, below the exact %v", d, N, off, mk.key, tau-a, got, truth)
							}
						}
					}
				}
			}
		}
	}
}

var _ = fmt.Sprint

// TestAudit62FixedReadAfterLongJumpStated: a Novelty (T = 30 days,
// PeriodWindows 1: no deadline is met) marks k and is saved; before the
// primary's cells are read (write 3) the clock jumps 2^30 ms + 1 s (12.4
// days, less than a Period) and the only call during the encode is a
// read, Contains("q"), which writes nothing but runs the horizon sweep,
// which re-stamps every cell (empty ones included) 2^30 ms after the
// instant. Audit 62 found WriteTo refused (sketch.ErrTakeAgain) where
// the meter's doc named writes only; the doc then named the re-stamp.
// Since stop 47 a re-stamped cell is read back to the instant by its
// law (an empty one is 0 at every instant), so the snapshot is taken,
// and restored on clocks 1 h behind and at the instant it sees k (a Rate
// reads at least its exact rate) at its mark and T - 2 s after it. The
// same holds for a Rate read (PerSecond).
func TestAudit62FixedReadAfterLongJumpStated(t *testing.T) {
	const T = 30 * 86_400_000
	S := a62T0 + 50_000
	for _, kind := range []string{"Novelty", "Rate"} {
		c := sketchtest.NewFakeClock()
		c.Set(a62T0)
		nv := a62Novelty(t, c, T*time.Millisecond)
		rt := a62Rate(t, c, T*time.Millisecond)
		c.Set(S - 1000)
		var src interface {
			WriteTo(w io.Writer) (int64, error)
		}
		var read func()
		if kind == "Novelty" {
			nv.Seen("k")
			src, read = nv, func() { nv.Contains("q") }
		} else {
			rt.ObserveAt(c.Now(), "k", 1000)
			src, read = rt, func() { rt.PerSecond("q") }
		}
		c.Set(S)
		hw := &testhook.Writer{N: a62InG0, Hook: func() {
			c.Set(S + 1<<30 + 1000)
			read()
		}}
		if _, err := src.WriteTo(hw); err != nil {
			t.Errorf("%s: a clock jump of 2^30 ms + 1 s with only a read (its sweep re-stamps) during the encode: WriteTo = %v; want the snapshot", kind, err)
			continue
		}
		for _, off := range []int64{-3_600_000, 0} {
			c2 := sketchtest.NewFakeClock()
			c2.Set(S + off)
			m, mr := a62Novelty(t, c2, T*time.Millisecond), a62Rate(t, c2, T*time.Millisecond)
			dst := io.ReaderFrom(m)
			if kind == "Rate" {
				dst = mr
			}
			if _, err := dst.ReadFrom(bytes.NewReader(hw.Buf.Bytes())); err != nil {
				t.Fatal(err)
			}
			a := S - 1000 + off
			for _, tau := range []int64{S + off, a + T - 2000} {
				c2.Set(tau)
				if kind == "Novelty" && !m.Contains("k") {
					t.Errorf("Novelty, restore off %d: k unseen %d ms after its mark", off, tau-a)
				}
				truth := 1000 * math.Exp(-float64(tau-a)/T) / (T / 1000.0)
				if got := mr.PerSecond("k"); kind == "Rate" && got < truth*(1-1e-6) {
					t.Errorf("Rate, restore off %d: PerSecond(k) %d ms after its mark = %v, below the exact %v", off, tau-a, got, truth)
				}
			}
		}
	}
}

// TestAudit62ReadAfterShortJumpTaken: the control of the finding: with a
// jump of 1 day (over 2^24 ms, short of the sweep's 2^30) and only reads
// during the encode, the snapshot is taken, and restored on a clock 1 h
// behind the Novelty sees k.
func TestAudit62ReadAfterShortJumpTaken(t *testing.T) {
	const T = 30 * 86_400_000
	S := a62T0 + 50_000
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	nv := a62Novelty(t, c, T*time.Millisecond)
	c.Set(S - 1000)
	nv.Seen("k")
	c.Set(S)
	hw := &testhook.Writer{N: a62InG0, Hook: func() {
		c.Set(S + 86_400_000)
		nv.Contains("q")
	}}
	if _, err := nv.WriteTo(hw); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	c2 := sketchtest.NewFakeClock()
	c2.Set(S - 3_600_000)
	m := a62Novelty(t, c2, T*time.Millisecond)
	if _, err := m.ReadFrom(&hw.Buf); err != nil {
		t.Fatal(err)
	}
	c2.Set(S - 3_600_000 + T - 2000)
	if !m.Contains("k") {
		t.Error("k unseen T - 2 s after its mark")
	}
}

// TestAudit62PromotionBeforeRotatorHeaderTaken: a promotion made before
// the rotator's part of the encode begins (a hook before write 1, the
// meter's own header: the deadline passes and w is marked) is not one
// "during the encode": WriteTo succeeds, and restored on a clock behind,
// at and ahead of its instant the Novelty sees k and w until T after
// their marks. A write that fails is not reported as ErrTakeAgain.
func TestAudit62PromotionBeforeRotatorHeaderTaken(t *testing.T) {
	const T = 100
	for _, off := range []int64{-3_600_000, 0, 30} {
		c := sketchtest.NewFakeClock()
		c.Set(a62T0)
		nv := a62Novelty(t, c, T*time.Millisecond)
		c.Set(a62T0 + 90)
		nv.Seen("k")
		hw := &testhook.Writer{N: 1, Hook: func() {
			c.Set(a62T0 + 120)
			nv.Seen("w")
		}}
		if _, err := nv.WriteTo(hw); err != nil {
			t.Fatalf("WriteTo: %v", err)
		}
		inst := a62T0 + 120
		c2 := sketchtest.NewFakeClock()
		c2.Set(inst + off)
		m := a62Novelty(t, c2, T*time.Millisecond)
		if _, err := m.ReadFrom(&hw.Buf); err != nil {
			t.Fatal(err)
		}
		shift := min(off, 0)
		for tau := inst + off; tau < inst+T-1+shift; tau++ {
			c2.Set(tau)
			if tau < a62T0+90+T-1+shift && !m.Contains("k") {
				t.Fatalf("off %d: k unseen %d ms after its mark", off, tau-(a62T0+90+shift))
			}
			if !m.Contains("w") {
				t.Fatalf("off %d: w unseen %d ms after its mark", off, tau-(inst+shift))
			}
		}
	}
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	nv := a62Novelty(t, c, T*time.Millisecond)
	if _, err := nv.WriteTo(a62FailWriter{}); err == nil || errors.Is(err, sketch.ErrTakeAgain) {
		t.Errorf("a failing writer: WriteTo = %v; want its error, not one matching sketch.ErrTakeAgain", err)
	}
}

type a62FailWriter struct{}

func (a62FailWriter) Write(p []byte) (int, error) { return 0, io.ErrClosedPipe }

// TestAudit62ChainedRestoresBehindAcrossPromotion: a Novelty (T = 100
// ms, PeriodWindows 1) marks k at +40 and w during a slow encode at +50
// (+20 ms, before the primary's cells), is restored 1 h behind, saved
// again 10 ms later by an encode during which the clock moves 30 ms
// before the second generation (the restored deadline is 40 ms away) and
// restored 1 h behind again:
// through the promotions k and w stay seen until T after their marks on
// the chain's line. The negative ages of the first restore are carried.
func TestAudit62ChainedRestoresBehindAcrossPromotion(t *testing.T) {
	const T = 100
	c := sketchtest.NewFakeClock()
	c.Set(a62T0)
	nv := a62Novelty(t, c, T*time.Millisecond)
	c.Set(a62T0 + 40)
	nv.Seen("k")
	S := a62T0 + 50
	c.Set(S)
	hw := &testhook.Writer{N: 3, Hook: func() { c.Set(S + 20); nv.Seen("w") }}
	if _, err := nv.WriteTo(hw); err != nil {
		t.Fatal(err)
	}
	// the line: restore 1 maps x to x - 1 h
	const back = 3_600_000
	c1 := sketchtest.NewFakeClock()
	c1.Set(S - back)
	m1 := a62Novelty(t, c1, T*time.Millisecond)
	if _, err := m1.ReadFrom(&hw.Buf); err != nil {
		t.Fatal(err)
	}
	S2 := S - back + 10
	c1.Set(S2)
	hw2 := &testhook.Writer{N: 6, Hook: func() { c1.Set(S2 + 30) }}
	if _, err := m1.WriteTo(hw2); err != nil {
		t.Fatal(err)
	}
	c2 := sketchtest.NewFakeClock()
	c2.Set(S2 - back)
	m2 := a62Novelty(t, c2, T*time.Millisecond)
	if _, err := m2.ReadFrom(&hw2.Buf); err != nil {
		t.Fatal(err)
	}
	shift := int64(-2 * back)
	marks := map[string]int64{"k": a62T0 + 40 + shift, "w": S + 20 + shift}
	for tau := S2 - back; tau < a62T0+300+shift; tau++ {
		c2.Set(tau)
		for k, a := range marks {
			if tau >= a && tau < a+T-1 && !m2.Contains(k) {
				t.Fatalf("%s unseen %d ms after its mark on the chain's line (T = %d)", k, tau-a, T)
			}
		}
	}
}
