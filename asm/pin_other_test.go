//go:build !linux

package asm

import "runtime"

// allowedCPUs is unknown off Linux: the test runs unpinned.
func allowedCPUs() []int { return nil }

// pinThread only locks the goroutine to its thread off Linux.
func pinThread(cpu int) (undo func(), ok bool) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread, false
}
