//go:build !linux

package hw

import "runtime"

// AllowedCPUs returns nil: without sched_getaffinity the allowed set is
// unknown.
func AllowedCPUs() []int { return nil }

// PinThread locks the goroutine to its thread but cannot bind the thread
// to a CPU on this OS: took is false.
func PinThread(cpu int) (undo func(), took bool, why string) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread, false, "thread pinning is implemented for Linux only"
}
