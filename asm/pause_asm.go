//go:build (amd64 || arm64) && gc && !purego

package asm

// Pause is a spin-loop hint: PAUSE on amd64, ISB on arm64. It gives the
// sibling hyperthread (or the memory system) a breather in a busy wait.
// It does not allocate.
//
//go:noescape
func Pause()
