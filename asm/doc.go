// Package asm holds the spin-wait primitives of the lock-free sketch: a
// spin-loop hint and a bounded exponential backoff for CAS loops.
//
// [Pause] is the spin-wait hint: PAUSE on amd64, ISB on arm64 (a real delay
// of tens of cycles on Neoverse cores, where YIELD is a no-op; Go's
// runtime.procyield and Rust's core::hint::spin_loop made the same choice).
// It has a pure-Go twin, always compiled, which does nothing, so tests
// compare the two in one binary; builds without the assembly (other
// 64-bit GOARCHes, gccgo, -tags purego) use the twin.
//
// [Backoff] is a value type for CAS retry loops: round k spins
// min(first<<k, limit) Pause calls, and from round 10 on each round
// yields the processor instead, so a waiter whose peer was descheduled
// lets it run. Pause and Backoff do not allocate.
package asm
