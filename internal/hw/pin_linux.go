//go:build linux

package hw

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// AllowedCPUs lists the CPUs the calling thread may run on. Called from
// an unpinned thread, that is the process's allowed set (taskset, cgroup
// cpusets). It returns nil if the set cannot be read.
func AllowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// PinThread locks the calling goroutine to its OS thread, binds the
// thread to cpu with sched_setaffinity and reads the mask back: took is
// true only if the mask read back is exactly {cpu}. It returns a function
// that restores the thread's previous mask and unlocks the goroutine; if
// the restore fails, that function leaves the goroutine locked, so the
// thread exits with it instead of returning to the pool pinned. why
// explains a failure.
func PinThread(cpu int) (undo func(), took bool, why string) {
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return runtime.UnlockOSThread, false, fmt.Sprintf("sched_getaffinity: %v", err)
	}
	var set, back unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return runtime.UnlockOSThread, false, fmt.Sprintf("sched_setaffinity(cpu %d): %v", cpu, err)
	}
	undo = func() {
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		}
	}
	if err := unix.SchedGetaffinity(0, &back); err != nil {
		return undo, false, fmt.Sprintf("sched_getaffinity after set: %v", err)
	}
	if back.Count() != 1 || !back.IsSet(cpu) {
		return undo, false, fmt.Sprintf("mask read back has %d CPUs, cpu %d set: %v", back.Count(), cpu, back.IsSet(cpu))
	}
	return undo, true, ""
}
