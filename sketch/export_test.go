package sketch

import "testing"

// SetCommitHook installs f as the commit hook (testHookCommit) until t
// ends. f runs before every level's CAS of every admitted TryUpdate of
// every sketch in the process; it should filter on the sketch. Tests that
// set it must not be parallel.
func SetCommitHook(t testing.TB, f func(s *Sketch, level uint32)) {
	t.Helper()
	testHookCommit = f
	t.Cleanup(func() { testHookCommit = nil })
}
