package bucket

// Test hooks of the package's own tests (the exported seams are in
// seams.go).

// setHooks installs test hooks (nil removes them). Not safe to call
// while operations run.
func (e *Engine) setHooks(h *testHooks) { e.hooks = h }

// poke writes an entry directly: fingerprint fp with stamp st at slot s
// of line i (fp 0 empties the slot).
func (e *Engine) poke(i, s int, fp uint16, st uint64) {
	j, sh := slotWord(s)
	ln := &e.lines[i]
	w := ln.w[j].Load()
	ent := uint32(0)
	if fp != 0 {
		ent = mkEnt(fp, st)
	}
	ln.w[j].Store(withEntry(w, sh, ent))
}
