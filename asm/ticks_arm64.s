//go:build gc && !purego

#include "textflag.h"

// func Ticks() uint64
//
// ISB keeps the counter read from being sampled speculatively ahead of
// earlier instructions (Arm ARM D12.1.2; Linux arch_timer_read_cntvct_el0).
TEXT ·Ticks(SB), NOSPLIT, $0-8
	ISB  $15
	MRS  CNTVCT_EL0, R0
	MOVD R0, ret+0(FP)
	RET

// func Pause()
//
// ISB rather than YIELD: YIELD retires as a NOP on most cores, ISB stalls
// for a few tens of cycles (Go's runtime.procyield, Rust's spin_loop).
TEXT ·Pause(SB), NOSPLIT, $0-0
	ISB $15
	RET

// func counterInfo() (ok bool, hz uint64)
//
// The generic timer is architected on every ARMv8-A core; CNTFRQ_EL0 holds
// its frequency as programmed by firmware (0 if firmware forgot).
TEXT ·counterInfo(SB), NOSPLIT, $0-16
	MOVD $1, R0
	MOVB R0, ok+0(FP)
	MRS  CNTFRQ_EL0, R1
	MOVD R1, hz+8(FP)
	RET
