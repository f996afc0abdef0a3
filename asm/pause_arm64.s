//go:build gc && !purego

#include "textflag.h"

// func Pause()
//
// ISB rather than YIELD: YIELD retires as a NOP on most cores, ISB stalls
// for a few tens of cycles (Go's runtime.procyield, Rust's spin_loop).
TEXT ·Pause(SB), NOSPLIT, $0-0
	ISB $15
	RET
