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

// func TicksUnordered() uint64
//
// The counter without the ISB: it may be sampled ahead of earlier
// instructions (see Ticks), as the amd64 bare RDTSC may.
TEXT ·TicksUnordered(SB), NOSPLIT, $0-8
	MRS  CNTVCT_EL0, R0
	MOVD R0, ret+0(FP)
	RET

// func counterInfo() (flags uint32, hz uint64)
//
// flags = infoFast: the generic timer is architected on every ARMv8-A core.
// hz = CNTFRQ_EL0, its frequency as programmed by firmware (0 if firmware
// forgot, in which case Clock calibrates).
TEXT ·counterInfo(SB), NOSPLIT, $0-16
	MOVW $1, R0
	MOVW R0, flags+0(FP)
	MRS  CNTFRQ_EL0, R1
	MOVD R1, hz+8(FP)
	RET

// func Prefetch(ps []unsafe.Pointer)
//
// PRFM is a hint: it never faults and does not wait (Arm ARM C6.2.248).
TEXT ·Prefetch(SB), NOSPLIT, $0-24
	MOVD ps_base+0(FP), R1
	MOVD ps_len+8(FP), R2
	CBZ  R2, done

loop:
	MOVD.P 8(R1), R0
	PRFM   (R0), PLDL1KEEP
	SUB    $1, R2
	CBNZ   R2, loop

done:
	RET
