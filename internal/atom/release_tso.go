//go:build amd64 && gc && !race && !purego

package atom

import (
	"sync/atomic"
	"unsafe"
)

// Release ends a seqlock writer's hold: seq, odd while its caller holds
// it, becomes seq+1, even. Only the holder may call it, and nothing but
// the holder may write seq while it is odd, so the new value is the
// holder's own plus one.
//
// On amd64 it is a plain load and store: x86 keeps stores in program
// order and never lets one pass an earlier locked instruction, so a
// reader that loads the even seq (atomic.Uint64.Load) sees every write
// the holder made before, as an atomic add would show it, without the
// add's locked instruction (docs/design.md, "Cheaper cell", the
// plain-store release). The race detector's and purego builds take
// release.go's atomic add, which the Go memory model covers.
func Release(seq *atomic.Uint64) {
	p := (*uint64)(unsafe.Pointer(seq))
	*p++
}
