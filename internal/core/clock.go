package core

import (
	"math"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
	"golang.org/x/sys/cpu"
)

// systemMillis is the default clock: the runtime's monotonic clock
// (runtime nanotime, the clock behind time.Since) in milliseconds. It
// never steps with wall-clock adjustments. hw.NewClock() may be passed
// as Config.Clock instead (docs/design.md, "Clock").
func systemMillis() int64 { return hw.Nanotime() / 1e6 }

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) NowMillis() int64 { return systemMillis() }

// timeClock is implemented by clocks that can also tell the time.Time of
// their current reading (sketchtest.FakeClock, hw.Clock does not). A
// Timebase anchors such a clock's scale to its own Now, so that a
// time.Time from that clock converts exactly.
type timeClock interface {
	Clock
	Now() time.Time
}

// Timebase is a sketch's time scale: a Clock, the time.Time that its
// reading at creation stands for, and a high-water mark of every time the
// sketch has used. It is the one time type of the module: a sketch owns
// one, a rotator shares one among its generations (pass it as
// Config.Clock), and the mutex reference uses the same type.
//
// Conversions. NowMillis reads the clock. Millis converts a time.Time to
// the clock's scale: through the monotonic reading when both t and the
// anchor have one (time.Now()), through the wall clock otherwise (a fake
// clock's Now(), a stored time). Either way t means what it says.
//
// Ordering. Every time passes through the high-water mark, so time never
// runs backwards: a reading or a t earlier than one already used counts
// as that later time (zero elapsed, never growth). A t later than the
// clock's current reading counts as the current reading: a time in the
// future cannot move the sketch ahead of its clock, so one bad argument
// never stops decay for other keys.
//
// A Timebase is safe for concurrent use. The zero value is not usable:
// use NewTimebase.
type Timebase struct {
	clock    Clock     // never nil
	anchor   time.Time // the time.Time of clock reading anchorMs
	anchorMs int64
	gated    bool // the default clock behind a tick gate (see tickGate)
	steady   bool // the default clock: its reading never steps back
	_        cpu.CacheLinePad
	// hw and the gate share a line: both are written by the same read of
	// the clock, at most about once per millisecond, and read by every
	// operation.
	hw   atomic.Int64 // the largest time used; math.MinInt64 before the first
	gate tickGate
	_    cpu.CacheLinePad
}

// NewTimebase returns a Timebase over c (nil means the default monotonic
// system clock). A *Timebase passed as c is returned as is.
func NewTimebase(c Clock) *Timebase {
	if tb, ok := c.(*Timebase); ok {
		return tb
	}
	gated, steady := false, c == nil
	if c == nil {
		c, gated = systemClock{}, hw.FastTicks()
	}
	tb := &Timebase{clock: c, gated: gated, steady: steady}
	tb.hw.Store(math.MinInt64)
	tb.anchor, tb.anchorMs = anchorOf(c)
	return tb
}

// anchorOf returns the time.Time at which c's millisecond ms began and
// ms, c's reading now, so that convert maps a time.Time to the
// millisecond it falls in. An anchor inside its millisecond (a reading
// with a fraction) would map every later t whose fraction is below the
// anchor's one millisecond early: an At form given the clock's own Now
// would act before the short form at the same instant (audit 50).
//
//   - A clock with Now (the fake clocks, the root package's adapter) tells
//     the time of its reading, NowMillis being Now().UnixMilli(): the
//     anchor is the start of that Unix millisecond, exact. A clock whose
//     two readings straddle a tick or a concurrent move is read again (4
//     tries, then its Now alone, at its Unix millisecond); one whose
//     scales differ (NowMillis more than 2 ms from Now().UnixMilli())
//     keeps its Now as read, as it did before.
//   - The default clock is the runtime's monotonic clock, which also
//     carries time.Now()'s monotonic reading: the anchor is time.Now() less
//     the fraction of a nanotime read just after it. The few ns between the
//     two reads make a t within them before a millisecond's end convert
//     one millisecond late, never early; a late t in the future is capped
//     at the clock's reading (Millis).
//   - Any other clock has no time.Time: the anchor is time.Now(), at an
//     unknown fraction of the clock's millisecond.
func anchorOf(c Clock) (time.Time, int64) {
	switch c := c.(type) {
	case timeClock:
		var t time.Time
		var ms int64
		for range 4 {
			t, ms = c.Now(), c.NowMillis()
			if t.UnixMilli() == ms {
				return msStart(t), ms
			}
		}
		if d := ms - t.UnixMilli(); d >= -2 && d <= 2 {
			// One scale whose every pair of reads straddled a tick (a
			// clock that moves on every read): t alone, at its own
			// millisecond (audit 55: the raw pair converted early).
			return msStart(t), t.UnixMilli()
		}
		return t, ms
	case systemClock:
		// The pair is bracketed by two runtime readings and taken again
		// while the bracket is wide (the goroutine was preempted between
		// the reads: milliseconds under load or emulation, which would
		// make every conversion of this Timebase that much late); the
		// narrowest of a few is kept.
		var bt time.Time
		var bns int64
		gap := int64(math.MaxInt64)
		for range 8 {
			ns1 := hw.Nanotime()
			t := time.Now()
			ns2 := hw.Nanotime()
			if ns2-ns1 < gap {
				gap, bt, bns = ns2-ns1, t, ns2
			}
			if gap <= 20_000 {
				break
			}
		}
		return bt.Add(-time.Duration(bns % 1e6)), bns / 1e6
	}
	return time.Now(), c.NowMillis()
}

// msStart returns the start of t's Unix millisecond (its monotonic
// reading, if any, kept).
func msStart(t time.Time) time.Time { return t.Add(-time.Duration(t.Nanosecond() % 1e6)) }

// NowMillis returns the clock's reading through the high-water mark. It
// implements Clock, so a Timebase can be shared as Config.Clock. On the
// default clock with a tick counter it reads the runtime's clock only when
// the counter says the millisecond of its last reading may be over (about
// once per millisecond per Timebase) and returns the high-water mark
// otherwise (see tickGate).
func (tb *Timebase) NowMillis() int64 {
	if tb.gated {
		if t := hw.TicksUnordered(); tb.gate.within(t) {
			return tb.hw.Load()
		}
		return tb.refresh()
	}
	return tb.observe(tb.clock.NowMillis())
}

// refresh is the gated NowMillis's read of the runtime's clock: the
// reading through the high-water mark, then the gate moved to the end of
// its millisecond.
//
//go:noinline
func (tb *Timebase) refresh() int64 {
	t := hw.TicksUnordered()
	ns := hw.Nanotime()
	t2 := hw.TicksUnordered()
	ms := tb.observe(ns / 1e6) // systemMillis's reading
	tb.gate.refreshed(t, t2, ns)
	return ms
}

// tickGate lets the default clock skip the runtime's clock (vDSO
// clock_gettime through a stack switch: ~24 ns on the development VM, a
// third of a hot-key Update) while the millisecond of its last reading
// lasts: a bare counter read (hw.TicksUnordered, ~10 ns, and it overlaps
// the hashing) and a compare. The time itself always comes from the
// runtime's clock; the counter only decides when to ask it again, so a
// wrong counter rate or skew can delay a millisecond tick, never invent
// one, and the delay is bounded:
//
//   - deadline is the tick at which the millisecond of the last reading
//     ends, estimated early: from a tick read before that reading, with
//     the rate biased 1% low. A reading at a tick before the deadline is
//     in that millisecond (or, by the bias, in its last 1%), so the
//     high-water mark, which that reading already raised, is the time.
//   - A tick more than one millisecond's worth before the deadline (a
//     counter that jumped back, another CPU's skewed counter, a deadline
//     from before a long stall) does not pass: the runtime's clock is
//     read. So no reading is more than one millisecond of ticks late,
//     however the counters disagree.
//   - The rate is learned once per Timebase from two readings of the
//     runtime's clock at least 10 ms apart, each bracketed by counter
//     reads no further apart than maxBracket ticks (a preempted pair is
//     not used); until then nothing passes the gate.
//
// deadline is written at most about once per millisecond (by whichever
// operation first finds it passed) and read by every operation, on the
// line of the high-water mark that the same reading writes.
type tickGate struct {
	deadline atomic.Uint64 // tick at which the last reading's millisecond ends (early)
	perMs    atomic.Uint64 // ticks per millisecond, biased low; 0 until learned
	mu       sync.Mutex    // held (TryLock) by the one operation learning the rate
	t0       uint64        // the first learning sample: tick and runtime clock
	ns0      int64
}

// maxBracket bounds the ticks between the two counter reads around a
// learning sample's clock read: 2^16, 20 µs at 3 GHz; a wider bracket was
// preempted or trapped and is not used.
const maxBracket = 1 << 16

// within reports whether a reading at tick t is still inside the
// millisecond of the last reading.
func (g *tickGate) within(t uint64) bool {
	d := g.deadline.Load()
	return t < d && d-t <= g.perMs.Load()
}

// refreshed records a reading ns of the runtime's clock taken between the
// ticks t and t2: it learns the rate if it is not known yet, then moves
// the deadline to the end of ns's millisecond, estimated from t (before
// ns, so early).
func (g *tickGate) refreshed(t, t2 uint64, ns int64) {
	per := g.perMs.Load()
	if per == 0 {
		if per = g.learn(t, t2, ns); per == 0 {
			return
		}
	}
	d := t + uint64(1e6-ns%1e6)*per/1e6
	for {
		old := g.deadline.Load()
		// Keep a later deadline only while it is plausible for t.
		if (d <= old && old-t <= per) || g.deadline.CompareAndSwap(old, d) {
			return
		}
	}
}

// learn takes a rate sample (ticks t, t2 around the clock reading ns) and
// returns the rate once two usable samples 10 ms or more apart give one
// in [10^3, 10^8] ticks per ms (1 MHz to 100 GHz), biased 1% low; else 0.
func (g *tickGate) learn(t, t2 uint64, ns int64) uint64 {
	if t2 < t || t2-t > maxBracket || !g.mu.TryLock() {
		return 0
	}
	defer g.mu.Unlock()
	if per := g.perMs.Load(); per != 0 {
		return per
	}
	mid := t + (t2-t)/2
	switch {
	case g.ns0 == 0 || mid <= g.t0 || ns <= g.ns0:
		g.t0, g.ns0 = mid, ns // the first sample, or the counter went back: start over
		return 0
	case ns-g.ns0 < 10e6:
		return 0
	}
	per := float64(mid-g.t0) / float64(ns-g.ns0) * 1e6 * 0.99
	if per < 1e3 || per > 1e8 {
		g.t0, g.ns0 = mid, ns
		return 0
	}
	g.perMs.Store(uint64(per))
	return uint64(per)
}

// Millis returns t on the clock's scale, through the high-water mark and
// capped at the clock's current reading (see Timebase).
func (tb *Timebase) Millis(t time.Time) int64 {
	ms := tb.convert(t)
	h := tb.hw.Load()
	if ms <= h {
		return h // the common case for a composite: no clock read
	}
	if c := tb.clock.NowMillis(); ms > c {
		ms = c
	}
	return tb.observe(ms)
}

// convert maps t to the clock's scale without filtering.
func (tb *Timebase) convert(t time.Time) int64 {
	d := t.Sub(tb.anchor)
	if d == math.MaxInt64 || d == math.MinInt64 {
		// Sub saturates past 292 years: count in ms on the wall clock,
		// exactly, and saturate the reading, not the difference: a clock
		// anchored near one end of int64 ms reads the other end's times
		// (audit 146: a difference capped at MaxInt64, added to an
		// anchor at MinInt64, read the clock's own Now 2^63 ms early).
		return farMillis(tb.anchorMs, t, tb.anchor)
	}
	ms := d.Milliseconds()
	if d < 0 && d%time.Millisecond != 0 {
		ms-- // floor: a t before the anchor is in the millisecond it falls in
	}
	return addSat(tb.anchorMs, ms) // an anchor near an end of the scale (audit 150)
}

// farMillis returns anchorMs + floor((t - a) / 1 ms), exactly (as the
// near path of convert counts: whole milliseconds from the anchor, whose
// own fraction of a millisecond counts too, audit 152), saturated at the
// int64 range. Only for times more than 292 years from the anchor (it
// allocates).
func farMillis(anchorMs int64, t, a time.Time) int64 {
	unixNs := func(x time.Time) *big.Int {
		v := big.NewInt(x.Unix())
		v.Mul(v, big.NewInt(int64(time.Second)))
		return v.Add(v, big.NewInt(int64(x.Nanosecond())))
	}
	v := unixNs(t)
	v.Sub(v, unixNs(a))
	v.Div(v, big.NewInt(int64(time.Millisecond))) // Euclidean: the floor, the divisor being > 0
	v.Add(v, big.NewInt(anchorMs))
	switch {
	case v.IsInt64():
		return v.Int64()
	case v.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

// addSat returns a+b saturated at the int64 range.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// subSat returns a-b saturated at the int64 range (addSat's twin: b may
// be MinInt64, which addSat(a, -b) cannot take).
func subSat(a, b int64) int64 {
	d := a - b
	if (a >= b) != (d >= 0) {
		if a >= b {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return d
}

// farTime returns anchor + (ms - anchorMs) milliseconds on the wall
// clock, exactly (no monotonic reading), for spans a Duration does not
// hold; a time beyond time.Time's seconds saturates there. It allocates.
func farTime(anchor time.Time, anchorMs, ms int64) time.Time {
	ns := new(big.Int).Sub(big.NewInt(ms), big.NewInt(anchorMs))
	ns.Mul(ns, big.NewInt(int64(time.Millisecond)))
	ns.Add(ns, big.NewInt(int64(anchor.Nanosecond())))
	sec, nsec := new(big.Int).DivMod(ns, big.NewInt(int64(time.Second)), new(big.Int)) // nsec in [0, 1e9)
	sec.Add(sec, big.NewInt(anchor.Unix()))
	// time.Unix holds seconds up to MaxInt64 less those from year 1 to
	// 1970 (unreachable from an int64 ms span; kept in range anyway).
	const maxSec = math.MaxInt64 - 62135596800
	switch {
	case sec.Cmp(big.NewInt(maxSec)) > 0:
		return time.Unix(maxSec, 999_999_999)
	case !sec.IsInt64():
		return time.Unix(math.MinInt64, 0)
	}
	return time.Unix(sec.Int64(), nsec.Int64())
}

// AddSat and SubSat are addSat and subSat for the engines built beside
// the core (internal/bucket).
func AddSat(a, b int64) int64 { return addSat(a, b) }

// SubSat is subSat; see AddSat.
func SubSat(a, b int64) int64 { return subSat(a, b) }

// Time returns the time.Time of reading ms (the inverse of Millis for
// times that were not capped). Within 292 years of the anchor its
// monotonic reading is present when the anchor has one; farther (farTime)
// it is a wall time only.
func (tb *Timebase) Time(ms int64) time.Time {
	d := ms - tb.anchorMs
	if wrapped := (ms >= tb.anchorMs) != (d >= 0); wrapped ||
		d > math.MaxInt64/int64(time.Millisecond) || d < math.MinInt64/int64(time.Millisecond) {
		// Past 292 years a Duration would wrap: the wall clock only,
		// exactly (a span over int64 too: audits 145 and 150).
		return farTime(tb.anchor, tb.anchorMs, ms)
	}
	return tb.anchor.Add(time.Duration(d) * time.Millisecond)
}

// Now returns the time.Time of the current reading.
func (tb *Timebase) Now() time.Time { return tb.Time(tb.NowMillis()) }

// Reading returns the clock's own current reading, observed (the
// high-water mark rises to it): unlike NowMillis it lies before the mark
// when the clock stepped back, so a wait counted from the mark can be
// made a wait from the clock's reading (longer by the lag). The default
// system clock never steps back; there it is NowMillis.
func (tb *Timebase) Reading() int64 {
	if tb.gated {
		return tb.NowMillis()
	}
	ms := tb.clock.NowMillis()
	tb.observe(ms)
	return ms
}

// Peek returns the clock's own current reading without observing it:
// the high-water mark does not move (a read that only measures a wait).
// The gated default clock reads through its mark, as NowMillis does: its
// reading never steps back, so that mark is never after it.
func (tb *Timebase) Peek() int64 {
	if tb.gated {
		return tb.NowMillis()
	}
	return tb.clock.NowMillis()
}

// Steady reports whether the clock is the default monotonic system
// clock, whose reading never steps back: the high-water mark is never
// after it.
func (tb *Timebase) Steady() bool { return tb.steady }

// HighWater returns the largest time used so far, or math.MinInt64.
func (tb *Timebase) HighWater() int64 { return tb.hw.Load() }

// observe records ms and returns max(ms, every earlier ms observed). The
// mark sits on its own cache line and is written only when time advances
// (at most once per distinct millisecond), so a busy sketch pays one load
// of a line every core keeps shared.
func (tb *Timebase) observe(ms int64) int64 {
	h := tb.hw.Load()
	for ms > h {
		if tb.hw.CompareAndSwap(h, ms) {
			return ms
		}
		h = tb.hw.Load()
	}
	return h
}
