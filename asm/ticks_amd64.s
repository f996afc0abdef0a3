//go:build gc && !purego

#include "textflag.h"

// func Ticks() uint64
//
// LFENCE waits for earlier instructions (in particular earlier loads) to
// complete before RDTSC samples the counter (Intel SDM vol. 2B, RDTSC).
// RDTSC returns the counter in EDX:EAX.
TEXT ·Ticks(SB), NOSPLIT, $0-8
	LFENCE
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	MOVQ AX, ret+0(FP)
	RET

// func Pause()
TEXT ·Pause(SB), NOSPLIT, $0-0
	PAUSE
	RET

// func counterInfo() (ok bool, hz uint64)
//
// ok = invariant TSC: CPUID.80000007H:EDX[8], valid only when the maximum
// extended leaf (CPUID.80000000H:EAX) is at least 0x80000007.
// hz = 0: the TSC frequency is not architecturally visible; calibrate.
TEXT ·counterInfo(SB), NOSPLIT, $0-16
	MOVQ $0, hz+8(FP)
	MOVL $0x80000000, AX
	XORL CX, CX
	CPUID
	CMPL AX, $0x80000007
	JB   none
	MOVL $0x80000007, AX
	XORL CX, CX
	CPUID
	SHRL $8, DX
	ANDL $1, DX
	MOVB DX, ok+0(FP)
	RET

none:
	MOVB $0, ok+0(FP)
	RET
