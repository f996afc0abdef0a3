//go:build (amd64 || arm64) && gc && !purego

package hw

import "unsafe"

// Ticks returns a raw, monotonic hardware tick counter: RDTSCP (or
// MFENCE; LFENCE; RDTSC where RDTSCP is missing) on amd64, ISB; MRS
// CNTVCT_EL0 on arm64. The unit is machine-dependent; use
// a [Clock] to convert. It does not allocate.
//
//go:noescape
func Ticks() uint64

// TicksUnordered reads the same counter as [Ticks] without its ordering:
// a bare RDTSC on amd64, MRS CNTVCT_EL0 without the ISB on arm64. The CPU
// may sample it ahead of earlier instructions, so it suits a cheap test
// of whether some time has passed, not a timestamp ordered with memory
// operations. It does not allocate.
//
//go:noescape
func TicksUnordered() uint64

// counterInfo reports the counter's properties as infoFast|infoRDTSCP
// flags (infoFast: amd64 needs the invariant-TSC bit, CPUID 0x80000007
// EDX[8]; arm64 always has it) and the counter frequency when the hardware
// states it (arm64: CNTFRQ_EL0; amd64: 0, meaning calibrate).
//
//go:noescape
func counterInfo() (flags uint32, hz uint64)

// Prefetch asks the CPU to start loading the cache line of each pointer
// in ps into every cache level (PREFETCHT0 on amd64, PRFM PLDL1KEEP on
// arm64) and returns at once: a hint that never faults, reads or writes
// nothing the program can see, and does not wait for the lines. A caller
// that will soon touch several unrelated lines prefetches them all first,
// so their cache misses overlap instead of queueing. One call for all the
// lines, since the call costs more than the instructions.
//
//go:noescape
func Prefetch(ps []unsafe.Pointer)
