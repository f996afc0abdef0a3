//go:build !linux

package redis

import "syscall"

// dieWithParent: no parent-death signal outside Linux; the tests' cleanup
// stops the servers.
func dieWithParent() *syscall.SysProcAttr { return nil }
