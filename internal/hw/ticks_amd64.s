//go:build gc && !purego

#include "textflag.h"

// func Ticks() uint64
//
// The read must not be sampled before earlier loads complete (see doc.go),
// as in the runtime's cputicks: RDTSCP waits for all earlier instructions
// to execute and earlier loads to be globally visible (Intel SDM vol. 2B,
// AMD APM vol. 3). Without RDTSCP, MFENCE; LFENCE gives the same on both
// vendors (LFENCE alone is not dispatch-serializing on older AMD parts).
// The counter arrives in EDX:EAX; RDTSCP also writes ECX (scratch here).
TEXT ·Ticks(SB), NOSPLIT, $0-8
	CMPB ·useRDTSCP(SB), $1
	JNE  fences
	RDTSCP
	JMP  done

fences:
	MFENCE
	LFENCE
	RDTSC

done:
	SHLQ $32, DX
	ORQ  DX, AX
	MOVQ AX, ret+0(FP)
	RET

// func TicksUnordered() uint64
//
// A bare RDTSC: the CPU may sample it before earlier instructions have
// completed (it is not ordered like Ticks), which is all a gate that only
// asks "has a millisecond passed yet" needs, and it costs about half of
// RDTSCP.
TEXT ·TicksUnordered(SB), NOSPLIT, $0-8
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	MOVQ AX, ret+0(FP)
	RET

// func counterInfo() (flags uint32, hz uint64)
//
// flags |= infoFast   if the TSC is invariant: CPUID.80000007H:EDX[8]
// flags |= infoRDTSCP if RDTSCP exists:        CPUID.80000001H:EDX[27]
// Each leaf is valid only up to the maximum extended leaf,
// CPUID.80000000H:EAX. hz = 0: the TSC rate is not architecturally
// visible, so Clock calibrates.
TEXT ·counterInfo(SB), NOSPLIT, $0-16
	XORL R8, R8
	MOVL $0x80000000, AX
	XORL CX, CX
	CPUID
	MOVL AX, R9
	CMPL R9, $0x80000001
	JB   done
	MOVL $0x80000001, AX
	XORL CX, CX
	CPUID
	SHRL $27, DX
	ANDL $1, DX
	SHLL $1, DX              // infoRDTSCP
	ORL  DX, R8
	CMPL R9, $0x80000007
	JB   done
	MOVL $0x80000007, AX
	XORL CX, CX
	CPUID
	SHRL $8, DX
	ANDL $1, DX              // infoFast
	ORL  DX, R8

done:
	MOVL R8, flags+0(FP)
	MOVQ $0, hz+8(FP)
	RET

// func Prefetch(ps []unsafe.Pointer)
//
// PREFETCHT0 never faults, even on an invalid address (Intel SDM vol. 2B),
// and retires without waiting for the line.
TEXT ·Prefetch(SB), NOSPLIT, $0-24
	MOVQ ps_base+0(FP), SI
	MOVQ ps_len+8(FP), CX
	TESTQ CX, CX
	JZ   done

loop:
	MOVQ       (SI), AX
	PREFETCHT0 (AX)
	ADDQ       $8, SI
	DECQ       CX
	JNZ        loop

done:
	RET
