package hw

import "unsafe" // go:linkname, and Prefetch's pointer

// nanotime is the runtime's monotonic clock (vDSO clock_gettime on Linux).
// runtime.nanotime is one of the symbols the runtime keeps open to being
// linknamed for exactly this use.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Nanotime returns the runtime's monotonic clock in nanoseconds since an
// arbitrary origin. It is the fallback clock when [FastTicks] is false, and
// the reference the amd64 calibration measures against.
func Nanotime() int64 { return nanotime() }

// ticksGeneric is the pure-Go twin of [Ticks]: runtime nanotime, so one
// tick is one nanosecond. It is always compiled, so tests compare the
// assembly against it in one binary.
func ticksGeneric() uint64 { return uint64(nanotime()) }

// prefetchGeneric is the pure-Go twin of [Prefetch]: it does nothing (a
// hint may be ignored; Go has no portable prefetch). It is always compiled.
func prefetchGeneric([]unsafe.Pointer) {}
