//go:build !((amd64 || arm64) && gc && !purego)

package hw

import "unsafe"

// Ticks returns a monotonic tick counter. Without the assembly it is
// [ticksGeneric]: runtime nanotime, one tick per nanosecond.
func Ticks() uint64 { return ticksGeneric() }

// TicksUnordered is Ticks without the assembly: runtime nanotime.
func TicksUnordered() uint64 { return ticksGeneric() }

// counterInfo reports no usable hardware counter: Clock falls back to
// Nanotime and FastTicks reports false.
func counterInfo() (flags uint32, hz uint64) { return 0, 0 }

// Prefetch is a cache hint. Without the assembly it does nothing.
func Prefetch(ps []unsafe.Pointer) { prefetchGeneric(ps) }
