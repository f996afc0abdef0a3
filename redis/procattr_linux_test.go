package redis

import "syscall"

// dieWithParent makes a test's redis-server get SIGKILL when the test
// binary dies (a panic, a -timeout, a kill -9), so no server outlives a
// failed run; the normal stop is the test's cleanup.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
