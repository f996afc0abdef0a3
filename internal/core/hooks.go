package core

import "unsafe"

// testHooks are the points where deterministic tests hold an admitted
// TryUpdate (set per sketch by SetHooks; nil in production, so the hot
// path pays one nil check on a read-only line). Each hook gets the level
// about to be touched.
type testHooks struct {
	beforeCAS func(level uint32) // commit, before each level's CAS
	conflict  func(level uint32) // commit, after the CAS of level failed
	reread    func(level uint32) // commit, after the undo, before the fresh snapshot
	rollback  func(level uint32) // undo, before each level's undo
	held      func(level uint32) // commit, denied after a conflict: a level that keeps the call's increment
	load      func(level uint32) // Query, Update, UpdateAndQuery, TryUpdate: after reading the time (TryUpdate: and the stripe), before loading (level 0)
	skip      func(level uint32) // Update's first pass, UpdateAndQuery, AddAt, TryUpdate's commit and read-only admission: a level whose new word equals its loaded word, not written
}

func (h *testHooks) call(f func(uint32), level uint32) {
	if f != nil {
		f(level)
	}
}

// Hooks are the test seams of one sketch (see testHooks): each gets the
// level about to be touched. A nil field is not called.
type Hooks struct {
	BeforeCAS func(level uint32) // commit, before each level's CAS
	Conflict  func(level uint32) // commit, after the CAS of level failed
	Reread    func(level uint32) // commit, after the undo, before the fresh snapshot
	Rollback  func(level uint32) // undo, before each level's undo
	Held      func(level uint32) // commit, denied after a conflict: a level that keeps the call's increment
	Load      func(level uint32) // Query, Update, UpdateAndQuery, TryUpdate: before loading the cells (TryUpdate: after reading the stripe's seq)
	Skip      func(level uint32) // Update's first pass, UpdateAndQuery, AddAt, TryUpdate's commit and read-only admission: a level whose new word equals its loaded word, not written (TryUpdate: before the load that checks it)
}

// SetHooks installs h on s, for deterministic tests. It must not run
// concurrently with s's operations.
func SetHooks(s *Sketch, h Hooks) {
	s.hooks = &testHooks{beforeCAS: h.BeforeCAS, conflict: h.Conflict, reread: h.Reread, rollback: h.Rollback, held: h.Held, load: h.Load, skip: h.Skip}
}

// StripeSeq returns the sequence of key's TryUpdate stripe in s: even
// when no commit of the stripe is in flight, and 2 more after each.
func StripeSeq(s *Sketch, key []byte) uint64 {
	return s.stripes[stripeOf(s.hasher.Sum64(key))].seq.Load()
}

// StripeOf returns the TryUpdate stripe of key in s.
func StripeOf(s *Sketch, key []byte) uint64 { return stripeOf(s.hasher.Sum64(key)) }

// CheckLines reports whether the addresses Prefetch computes for k are
// those of the key's cells, &cells[offset] level by level.
func CheckLines(s *Sketch, k Hashed) bool {
	var ps [MaxLevels]unsafe.Pointer
	var off [MaxLevels]int
	n := s.lines(k.h, &ps)
	s.offsets(k.h, &off)
	if n != int(s.levels) {
		return false
	}
	for l := range n {
		if ps[l] != unsafe.Pointer(&s.cells[off[l]]) {
			return false
		}
	}
	return true
}
