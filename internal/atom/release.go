//go:build !amd64 || !gc || race || purego

package atom

import "sync/atomic"

// Release ends a seqlock writer's hold: seq, odd while its caller holds
// it, becomes seq+1, even. Only the holder may call it. This build adds
// atomically; release_tso.go has amd64's plain store.
func Release(seq *atomic.Uint64) {
	seq.Add(1)
}
