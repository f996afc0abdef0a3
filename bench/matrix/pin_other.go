//go:build !linux

package matrix

import "runtime"

// allowedCPUs returns nil: without sched_getaffinity the allowed set is
// unknown, and Run numbers the CPUs 0..NumCPU-1.
func allowedCPUs() []int { return nil }

// pinThread locks the goroutine to its thread but cannot bind the thread
// to a CPU on this OS: the cell is reported as unpinned.
func pinThread(cpu int) (undo func(), took bool, why string) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread, false, "thread pinning is implemented for Linux only"
}
