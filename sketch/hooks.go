package sketch

// testHooks are the points where deterministic tests hold an admitted
// TryUpdate (set per sketch from export_test.go; nil in production, so
// the hot path pays one nil check on a read-only line). Each hook gets
// the level about to be touched.
type testHooks struct {
	beforeCAS func(level uint32) // commit, before each level's CAS
	conflict  func(level uint32) // commit, after the CAS of level failed
	reread    func(level uint32) // commit, after the undo, before the fresh snapshot
	rollback  func(level uint32) // undo, before each level's undo
	held      func(level uint32) // commit, denied after a conflict: a level that keeps the call's increment
	load      func(level uint32) // Query, Update, UpdateAndQuery: after reading the time, before loading (level 0)
}

func (h *testHooks) call(f func(uint32), level uint32) {
	if f != nil {
		f(level)
	}
}
