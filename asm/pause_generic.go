//go:build !((amd64 || arm64) && gc && !purego)

package asm

// Pause is a spin-loop hint. Without the assembly it does nothing.
func Pause() { pauseGeneric() }
