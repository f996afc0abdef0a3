//go:build amd64 && gc && !purego

#include "textflag.h"

// The batch cell arithmetic of NextN in SSE2 (baseline amd64),
// two words per block. batch_generic.go has the pure-Go twin, and
// TestBatchAsm in package atom compares them word for word.
//
// Per word (lanes 0 and 1 of each block):
//   aged  = int32(now - stamp) > 0
//   stamp = aged ? now : stamp                 (Newer)
//   v     = score + delta; e = 0 when the add is exact in both lanes
//           (ADD), else e = TwoSum's error      (v + e exactly the sum)
//   e     = (v < hi && lo <= v) ? e : 0           (roundSumIn's bounds)
//   v     = v < lo ? lo : v; v = v > hi ? hi : v   (MAXPD/MINPD with v as
//           the source operand: on a tie or a NaN the source comes back,
//           exactly roundSumIn's branches)
//   f     = float32(v); bits += (float64(f) - v < e) ? (f < 0 ? -1 : +1) : 0
//           (stepUpErr: b - (m ^ sign) + sign, m the 0/-1 mask)
//   word  = bits<<32 | stamp
// ROUNDB computes f's bits for a block whose adds were exact straight from
// v's float64 bits (rebias the exponent, add 2^29-1 to a positive one,
// shift), which is float32(v) stepped up where it rounded down, without
// the float32 round trip and the compare on the word's path; a live lane
// below 2^-126 in magnitude (zero, a float32 subnormal) takes ROUNDC.
// When the block count is odd, the last block's second lane reads and
// writes the word past n, inside the caller's [MaxCells] arrays, and its
// result is masked out of the check for aged words.

// SETUP loads the constants: X8 delta,delta; X9 lo,lo; X10 hi,hi; X11 now
// in every dword; X12 zero; X13 0x7fffffff in every dword.
#define SETUP(nowoff, deltaoff, looff, hioff) \
	MOVL	nowoff(FP), AX \
	MOVQ	AX, X11 \
	PSHUFD	$0, X11, X11 \
	MOVSD	deltaoff(FP), X8 \
	PUNPCKLQDQ	X8, X8 \
	MOVSD	looff(FP), X9 \
	PUNPCKLQDQ	X9, X9 \
	MOVSD	hioff(FP), X10 \
	PUNPCKLQDQ	X10, X10 \
	PXOR	X12, X12 \
	MOVL	$0x7fffffff, AX \
	MOVQ	AX, X13 \
	PSHUFD	$0, X13, X13

// STAMPS: X0 the two words; sets X1 = scores (dwords 0,1), X3 = aged
// mask (dwords 0,1), X5 = new stamps (dwords 0,1).
#define STAMPS \
	PSHUFD	$0xDD, X0, X1 \
	PSHUFD	$0x88, X0, X2 \
	MOVO	X11, X3 \
	PSUBL	X2, X3 \
	PCMPGTL	X12, X3 \
	MOVO	X3, X4 \
	PAND	X11, X4 \
	MOVO	X3, X5 \
	PANDN	X2, X5 \
	POR	X4, X5

// LOAD: X0 the two words at (SI), each loaded 8 bytes at a time (the
// caller stored them so, and a 16-byte load of two 8-byte stores cannot
// be forwarded from the store buffer).
#define LOAD \
	MOVQ	(SI), X0 \
	MOVQ	8(SI), X2 \
	PUNPCKLQDQ	X2, X0

// AGED: after STAMPS, AX's bits 0 and 1 (masked by DX: the block's live
// lanes) set for each aged word with a non-zero score, which needs the
// decay law.
#define AGED \
	MOVO	X1, X6 \
	PAND	X13, X6 \
	PCMPEQL	X12, X6 \
	PANDN	X3, X6 \
	MOVMSKPS	X6, AX \
	ANDL	DX, AX

// ADD: X6 the two float64 values; adds delta (X6 = s, X2 = the values)
// and jumps to inexact when either live lane's add rounded: the add is
// exact iff s - a == d and s - d == a (at least one of the two
// subtractions is exact, Fast2Sum's lemma, and an exact one equals its
// operand only when the add was exact). Integer adds below 2^53 never
// jump; the jump target is ROUNDERR.
#define ADD(inexact) \
	MOVO	X6, X2 \
	ADDPD	X8, X6 \
	MOVO	X6, X3 \
	SUBPD	X2, X3 \
	CMPPD	X8, X3, $4 \
	MOVO	X6, X4 \
	SUBPD	X8, X4 \
	CMPPD	X2, X4, $4 \
	POR	X4, X3 \
	MOVMSKPD	X3, AX \
	ANDL	DX, AX \
	JNZ	inexact

// BOUND: X6 = the sums clamped to [lo, hi] (X7 clobbered).
#define BOUND \
	MOVO	X9, X7 \
	MAXPD	X6, X7 \
	MOVO	X10, X6 \
	MINPD	X7, X6

// NARROW: X7 = X6 rounded to nearest float32 (dwords 0 and 1), X4 =
// those back in float64.
#define NARROW \
	CVTPD2PS	X6, X7 \
	CVTPS2PD	X7, X4

// CLAMP: BOUND, then NARROW.
#define CLAMP \
	BOUND \
	NARROW

// ROUNDC: for exact sums already clamped in X6 (ROUNDB's slow path):
// narrows upward and leaves the two new words in X5 (stamps from STAMPS).
#define ROUNDC \
	NARROW \
	CMPPD	X6, X4, $1 \
	STEP

// ROUNDB(slow): the round-up by the bits, for sums the add left exact
// (after ADD, X6 the sums): BOUND, then the least float32 at or above each
// value straight from its float64 bits: rebias the exponent (minus
// 896<<52), add 2^29-1 to a positive one (none to a negative one, which
// rounds toward zero), shift the 23-bit mantissa down and put the sign
// back. A carry out of the mantissa steps the exponent, as the round-up
// does. Valid for magnitudes in [2^-126, MaxFloat32] (the clamp keeps
// them at most MaxFloat32: the bounds are float32s); a live lane below
// 2^-126 (zero, or a float32 subnormal) jumps to slow with X6 the
// clamped sums, for ROUNDC.
// Leaves the new words in X5. No float32 round trip and no compare on
// the word's path: its latency is the add, the clamp and four integer
// operations.
#define ROUNDB(slow) \
	BOUND \
	MOVO	X6, X4 \
	PAND	·absMask64(SB), X4 \
	MOVO	X4, X1 \
	CMPPD	·minNormal32(SB), X1, $1 \
	MOVMSKPD	X1, AX \
	ANDL	DX, AX \
	JNZ	slow \
	PSHUFD	$0xF5, X6, X3 \
	PSRAL	$31, X3 \
	PSUBQ	·rebias32(SB), X4 \
	MOVO	X3, X1 \
	PANDN	·roundUp29(SB), X1 \
	PADDQ	X1, X4 \
	PSRLQ	$29, X4 \
	PAND	·sign32(SB), X3 \
	POR	X3, X4 \
	PSHUFD	$0x08, X4, X7 \
	PUNPCKLLQ	X7, X5

// ROUNDERR: the round-up for sums the add rounded: after ADD (X2 the
// values, X6 the rounded sums), the exact errors by TwoSum (zeroed where
// the sum is clamped), then the clamp, and the step up wherever
// float64(f) - v is below the error, so the word holds the least float32
// at or above the exact sum.
#define ROUNDERR \
	MOVO	X6, X3 \
	SUBPD	X2, X3 \
	MOVO	X6, X4 \
	SUBPD	X3, X4 \
	SUBPD	X4, X2 \
	MOVO	X8, X4 \
	SUBPD	X3, X4 \
	ADDPD	X4, X2 \
	MOVO	X6, X3 \
	CMPPD	X10, X3, $1 \
	PAND	X3, X2 \
	MOVO	X9, X3 \
	CMPPD	X6, X3, $2 \
	PAND	X3, X2 \
	CLAMP \
	SUBPD	X6, X4 \
	CMPPD	X2, X4, $1 \
	STEP

// STEP: X4 the step mask (lanes 0 and 1, 64 bits each), X7 the rounded
// float32 values (dwords 0 and 1): steps each masked one toward +Inf and
// packs the new words into X5.
#define STEP \
	PSHUFD	$0x08, X4, X4 \
	MOVO	X7, X1 \
	PSRAL	$31, X1 \
	PXOR	X1, X4 \
	PSUBL	X4, X7 \
	PADDL	X1, X7 \
	PUNPCKLLQ	X7, X5

// func nextNAsm(w *[MaxCells]Word, n uint32, now uint32, delta, lo, hi float64, nw *[MaxCells]Word) bool
TEXT ·nextNAsm(SB), NOSPLIT, $0-49
	MOVQ	w+0(FP), SI
	MOVL	n+8(FP), CX
	MOVQ	nw+40(FP), DI
	SETUP(now+12, delta+16, lo+24, hi+32)
	MOVL	$3, DX            // lanes 0,1 of a block
nloop:
	CMPL	CX, $1
	JNE	nfull
	MOVL	$1, DX            // the last block has one word
nfull:
	LOAD
	STAMPS
	AGED
	JNZ	nslow
	CVTPS2PD	X1, X6
	ADD(ninexact)
	ROUNDB(nnarrow)
nstore:
	MOVQ	X5, (DI)
	PSHUFD	$0xEE, X5, X6
	MOVQ	X6, 8(DI)
	ADDQ	$16, SI
	ADDQ	$16, DI
	SUBL	$2, CX
	JG	nloop
	MOVB	$1, ret+48(FP)
	RET
nslow:
	MOVB	$0, ret+48(FP)
	RET
nnarrow:
	ROUNDC
	JMP	nstore
ninexact:
	ROUNDERR
	JMP	nstore

// func decideNAsm(w *[MaxCells]Word, n uint32, now uint32, delta, limit, lo, hi float64, v *[MaxCells]float64, nw *[MaxCells]Word) uint8
//
// decideNGeneric in assembly, in one pass over the blocks: STAMPS, the
// aged check (any aged non-zero word: return decideSlow), the values (the
// scores in float64) stored to v, both lanes, and their Min in X14; then
// nextNAsm's ROUNDB (or ROUNDC) into nw, and the XOR of each new word with
// its old one ORed into X15. A last block of one word takes +Inf as its
// second value and leaves its second XOR out. The new words are computed
// before the decision, so a denial has written nw too (callers ignore
// it). Then Min + delta against limit: decideDeny unless <=, else
// decideSame when X15 is zero, decideAdmit otherwise.
TEXT ·decideNAsm(SB), NOSPLIT, $0-65
	MOVQ	w+0(FP), SI
	MOVL	n+8(FP), CX
	MOVQ	v+48(FP), DI
	MOVQ	nw+56(FP), BX
	SETUP(now+12, delta+16, lo+32, hi+40)
	MOVQ	$0x7ff0000000000000, R8  // +Inf
	MOVQ	R8, X14
	PUNPCKLQDQ	X14, X14
	PXOR	X15, X15
	MOVL	$3, DX
dloop:
	CMPL	CX, $1
	JNE	dfull
	MOVL	$1, DX
dfull:
	LOAD
	STAMPS
	AGED
	JNZ	dslow
	CVTPS2PD	X1, X6
	MOVUPD	X6, (DI)
	CMPL	DX, $1
	JEQ	dminone
	MINPD	X6, X14
dround:
	ADD(dinexact)
	ROUNDB(dnarrow)
dstore:
	MOVQ	X5, (BX)
	PSHUFD	$0xEE, X5, X6
	MOVQ	X6, 8(BX)
	PXOR	X0, X5
	CMPL	DX, $1
	JNE	dor
	MOVQ	X5, X5            // a one-word block: clear the second lane
dor:
	POR	X5, X15
	ADDQ	$16, SI
	ADDQ	$16, DI
	ADDQ	$16, BX
	SUBL	$2, CX
	JG	dloop
	// The Min of both lanes, plus delta, against limit.
	PSHUFD	$0xEE, X14, X7
	MINSD	X7, X14
	ADDSD	X8, X14
	MOVSD	limit+24(FP), X7
	UCOMISD	X14, X7           // limit >= Min+delta: admitted (no NaN here)
	JCS	ddeny
	PCMPEQL	X12, X15          // all dwords zero: the same words
	MOVMSKPS	X15, AX
	CMPL	AX, $15
	JEQ	dsame
	MOVB	$2, ret+64(FP)    // Admit
	RET
dminone:
	MOVQ	R8, X7            // lane 0 the value, lane 1 +Inf
	PSHUFD	$0x44, X7, X7
	MOVSD	X6, X7
	MINPD	X7, X14
	JMP	dround
dsame:
	MOVB	$3, ret+64(FP)    // AdmitSame
	RET
ddeny:
	MOVB	$1, ret+64(FP)    // Deny
	RET
dslow:
	MOVB	$0, ret+64(FP)    // Slow
	RET
dnarrow:
	ROUNDC
	JMP	dstore
dinexact:
	ROUNDERR
	JMP	dstore

// ROUNDB's constants, one per 64-bit lane.
DATA	·absMask64+0(SB)/8, $0x7fffffffffffffff
DATA	·absMask64+8(SB)/8, $0x7fffffffffffffff
GLOBL	·absMask64(SB), RODATA|NOPTR, $16
DATA	·minNormal32+0(SB)/8, $0x3810000000000000 // 2^-126
DATA	·minNormal32+8(SB)/8, $0x3810000000000000
GLOBL	·minNormal32(SB), RODATA|NOPTR, $16
DATA	·rebias32+0(SB)/8, $0x3800000000000000 // (1023-127)<<52
DATA	·rebias32+8(SB)/8, $0x3800000000000000
GLOBL	·rebias32(SB), RODATA|NOPTR, $16
DATA	·roundUp29+0(SB)/8, $0x1fffffff
DATA	·roundUp29+8(SB)/8, $0x1fffffff
GLOBL	·roundUp29(SB), RODATA|NOPTR, $16
DATA	·sign32+0(SB)/8, $0x80000000
DATA	·sign32+8(SB)/8, $0x80000000
GLOBL	·sign32(SB), RODATA|NOPTR, $16
