// Package hw holds the hardware primitives the engine uses besides
// package asm's spin hint: a raw tick counter, a cache prefetch hint, the
// runtime's monotonic clock, a calibrated millisecond clock on top of the
// counter, and thread pinning for measurements (the benchmarks and the
// cross-CPU clock test share it).
//
// # Model
//
// [Ticks] reads a free-running hardware counter: the time-stamp counter on
// amd64 (RDTSCP, or MFENCE; LFENCE; RDTSC on CPUs without it, as the
// runtime's cputicks does), the virtual counter CNTVCT_EL0 (ISB; MRS) on
// arm64. The ordering keeps the CPU from sampling the counter before
// earlier loads have completed, so a value read after observing a
// published timestamp is not taken "in the past" of that observation (the
// guarantee Linux's rdtsc_ordered and arch_timer_read_cntvct_el0 give).
// A bare RDTSC is cheaper but gives no such ordering (docs/design.md).
// [Prefetch] starts loading cache lines without waiting for them
// (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64), so that a caller about to
// touch several unrelated lines overlaps their misses; the rotator uses it
// to fetch every generation's cells at once.
//
// Every primitive has a pure-Go twin that is always compiled
// ([ticksGeneric], [prefetchGeneric], which does nothing)
// so tests compare the two in one binary.
// Builds without the assembly (other 64-bit GOARCHes, gccgo, -tags purego)
// use the twins directly, and [FastTicks] reports false there.
//
// # Clock
//
// A [Clock] turns ticks into nanoseconds with a fixed-point multiply chosen
// once per process at the first [NewClock]:
//
//	calibrate (once):
//	    amd64: bracket Nanotime between two Ticks reads, sleep ~10ms, repeat;
//	           nsPerTick = Δnanotime / Δticks
//	    arm64: nsPerTick = 1e9 / CNTFRQ_EL0 (no calibration)
//	    mult   = round(nsPerTick * 2^32)          // 32.32 fixed point
//	NowNanos():
//	    d      = Ticks() - tick0                   // wraps harmlessly
//	    hi, lo = d * mult                          // 128-bit product
//	    return (hi<<32 | lo>>32)                   // no division
//	NowMillis():
//	    return NowNanos() / 1e6                    // constant divisor: a multiply-high
//
// The fast path is used when [FastTicks] reports true (amd64 with an
// invariant TSC, CPUID 0x80000007 EDX bit 8; every arm64 build with the
// assembly) and the calibration gave a counter rate between 1 MHz and
// 100 GHz. Otherwise every Clock read is [Nanotime] minus the origin.
//
// # Guarantees
//
//   - A Clock is immutable after NewClock and safe for concurrent use. All
//     Clocks of one process share the calibration and the origin, so their
//     readings are comparable.
//   - One goroutine never sees NowNanos or NowMillis go backwards, and
//     NowMillis() == NowNanos()/1e6 for readings taken from the same tick.
//     Across CPUs this rests on the hardware keeping the counters in sync:
//     true of invariant TSCs on current single-socket x86 and of the
//     architected arm64 counter, not promised on old multi-socket boards or
//     VMs that migrate between hosts with different TSC offsets. No skew
//     correction is attempted; TestCrossCPUMonotonic checks it on the
//     machine at hand.
//   - The rate error is that of a 10ms calibration against the runtime's
//     monotonic clock (about 1e-5 on amd64), and the tick clock is not slewed
//     by NTP, so over hours it drifts from time.Now by seconds at most. Use
//     it for decay and rate windows, not for wall-clock time.
//   - NowMillis, NowNanos, Ticks and Prefetch do not allocate.
package hw
