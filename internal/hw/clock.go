package hw

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// Flags returned by counterInfo.
const (
	infoFast   = 1 << 0 // Ticks is a usable fast clock
	infoRDTSCP = 1 << 1 // amd64: RDTSCP exists
)

// counterFlags and counterHz are read once from the hardware: see
// counterInfo.
var counterFlags, counterHz = counterInfo()

var (
	// fastTicks is what FastTicks reports.
	fastTicks = counterFlags&infoFast != 0
	// useRDTSCP selects RDTSCP over MFENCE; LFENCE; RDTSC in the amd64
	// Ticks, which reads it directly from assembly. False (the fenced
	// path) is correct on every CPU, so the flag only ever buys speed.
	useRDTSCP = counterFlags&infoRDTSCP != 0
)

// FastTicks reports whether [Ticks] is a usable fast clock on this machine:
// on amd64 the TSC must be invariant (CPUID 0x80000007 EDX bit 8); on arm64
// it is always true; builds without the assembly report false.
func FastTicks() bool { return fastTicks }

const (
	// multShift is the binary point of Clock.mult: mult is ns/tick * 2^32.
	multShift = 32
	// minHz and maxHz bound the counter rates the fast path accepts. Below
	// 1 MHz a tick is coarser than a microsecond; above 100 GHz the rate is
	// not a clock. Outside the bounds Clock reads Nanotime instead.
	minHz = 1e6
	maxHz = 1e11
	// calibrationSleep is how long the amd64 calibration measures for.
	calibrationSleep = 10 * time.Millisecond
)

// Clock is a calibrated monotonic clock built on [Ticks]. Use it where a
// timestamp is read on every operation (decay, rate windows) and
// time.Now's 15-40ns matter; use time.Now for anything shown to people.
//
// Obtain one with [NewClock]. A Clock is immutable after NewClock and safe
// for concurrent use; copying it is fine. All Clocks from NewClock in one
// process share calibration and origin, so their readings are comparable.
// The zero Clock reads Nanotime with the runtime's origin.
type Clock struct {
	// fast selects the tick path. Invariant: fast implies mult > 0.
	fast bool
	// tick0 is the Ticks value at the origin; used only when fast.
	tick0 uint64
	// mult is nanoseconds per tick in 32.32 fixed point:
	// ns = (d*mult) >> 32 over the full 128-bit product. Used only when fast.
	mult uint64
	// nano0 is the Nanotime value at the origin; used only when !fast.
	nano0 int64
}

// calibrated is the process-wide Clock that NewClock copies, built once.
var calibrated = sync.OnceValue(calibrate)

// NewClock returns a Clock whose origin is the first NewClock call of the
// process. The first call calibrates: on amd64 it sleeps about 10ms to
// measure the TSC rate against Nanotime; on arm64 it reads CNTFRQ_EL0.
// Later calls are cheap.
func NewClock() *Clock {
	c := calibrated()
	return &c
}

// calibrate measures the tick rate and fixes the origin.
func calibrate() Clock {
	slow := Clock{nano0: nanotime()}
	if !fastTicks {
		return slow
	}
	var nsPerTick float64
	if counterHz != 0 {
		if counterHz < minHz || counterHz > maxHz {
			return slow
		}
		nsPerTick = 1e9 / float64(counterHz)
	} else {
		k0, n0 := bracket()
		time.Sleep(calibrationSleep)
		k1, n1 := bracket()
		if k1 <= k0 || n1 <= n0 {
			return slow
		}
		nsPerTick = float64(n1-n0) / float64(k1-k0)
		if hz := 1e9 / nsPerTick; hz < minHz || hz > maxHz {
			return slow
		}
	}
	mult := math.Round(nsPerTick * (1 << multShift))
	if mult < 1 || mult >= 1<<63 {
		return slow
	}
	return Clock{fast: true, mult: uint64(mult), tick0: Ticks()}
}

// bracket returns a (ticks, nanotime) pair taken as close together as it
// can: it reads Nanotime between two Ticks reads a few times and keeps the
// narrowest bracket, reporting its midpoint.
func bracket() (ticks uint64, nanos int64) {
	best := uint64(math.MaxUint64)
	for range 8 {
		a := Ticks()
		n := nanotime()
		b := Ticks()
		if b >= a && b-a < best {
			best = b - a
			ticks, nanos = a+(b-a)/2, n
		}
	}
	return ticks, nanos
}

// NowNanos returns monotonic nanoseconds since the Clock's origin. On the
// fast path it costs a Ticks read and a 64x64->128 multiply; it never
// divides and never allocates.
func (c *Clock) NowNanos() int64 {
	if !c.fast {
		return nanotime() - c.nano0
	}
	return c.ticksToNanos(Ticks())
}

// ticksToNanos converts a Ticks reading to nanoseconds since the origin.
// Precondition: c.fast. The tick difference wraps modulo 2^64, so a counter
// that rolls over past the origin still converts correctly.
func (c *Clock) ticksToNanos(t uint64) int64 {
	hi, lo := bits.Mul64(t-c.tick0, c.mult)
	return int64(hi<<(64-multShift) | lo>>multShift)
}

// NowMillis returns monotonic milliseconds since the Clock's origin:
// exactly NowNanos()/1e6 (a constant divisor, which compiles to a
// multiply-high and shift). It never goes backwards as seen by one
// goroutine, and never allocates.
func (c *Clock) NowMillis() int64 {
	return int64(uint64(c.NowNanos()) / 1e6)
}
