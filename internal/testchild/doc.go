// Package testchild runs a test binary again as a child process, for tests
// that must watch a process die (a SIGKILL mid-save) or run a test suite
// on a mutant and read which of its checks failed.
//
// Under user-mode emulation (make test-arm64 sets GRUDGE_TEST_EMULATOR to
// qemu-aarch64-static) a foreign binary cannot be exec'd directly, so the
// emulator runs the child; a signal to the emulator reaches the emulated
// child. It is used only by tests.
package testchild
