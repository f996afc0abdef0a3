package testsize

import (
	"os"
	"testing"
)

// Small reports whether a sweep should run its reduced sample: under
// -short or under the race detector.
func Small() bool { return Race || testing.Short() }

// Stride returns 1 at full size and k under Small: a sweep that steps by
// Stride(k) visits every k-th point of its grid in the reduced runs.
func Stride(k int) int {
	if Small() {
		return k
	}
	return 1
}

// Pick returns n at full size and small under Small.
func Pick(n, small int) int {
	if Small() {
		return small
	}
	return n
}

// Emulated reports whether the test binary runs under an emulator (QEMU
// user emulation: make test's arm64 step, and its amd64 v3 step on a CPU
// without the v3 features), where every instruction costs about ten
// times as much: .ci/cross-tests sets GRUDGE_TEST_EMULATOR (the variable
// internal/testchild reads) for those binaries.
func Emulated() bool { return os.Getenv("GRUDGE_TEST_EMULATOR") != "" }

// Sample returns n at full size, small under Small, and emulated under
// an emulator (which runs with -short): for the sweeps whose Small
// sample still takes seconds natively, so tens under emulation, and
// whose points are not specific to the architecture (capacity
// statistics over seeds, long oracle walks), the emulated runs take a
// smaller sample of the same grid; the native steps run Small's.
func Sample(n, small, emulated int) int {
	switch {
	case !Small():
		return n
	case Emulated():
		return emulated
	}
	return small
}

// Keep reports whether point i of a sweep runs: every point at full size,
// every k-th (i%k == 0) under Small.
func Keep(i, k int) bool { return !Small() || i%k == 0 }

// Serial marks a test that runs in one goroutine from start to end: it
// starts none (no go statement, no t.Parallel, no library call that
// starts one: the ticker Rotator of the root package, snapshot.Saver,
// net/http, os/exec do) and its subtests run one after another. Under the
// race detector it skips: the detector finds races between goroutines,
// and one goroutine's arithmetic gives it nothing to find. The test still
// runs in make test's other steps: at full size in the purego step, and
// sampled under arm64 and amd64 v3 (whose build turns on -d=checkptr, the
// unsafe.Pointer checks -race would have made).
//
// Call it first. .ci/serial-tests lists, from an execution trace, the
// goroutines each named test starts: run it on a test before marking it.
// TestSerialMarksStartNothing fails for a marked test whose own body
// starts one.
func Serial(t testing.TB) {
	t.Helper()
	if Race {
		t.Skip("testsize.Serial: one goroutine, nothing for the race detector; runs in make test's other steps")
	}
}
