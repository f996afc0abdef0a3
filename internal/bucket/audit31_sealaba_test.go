package bucket

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit31FixedSealVersionABA: the seal's versions repeat every
// 2^16 epochs, so a long move made of two sealing steps whose last one
// lands 2^16 epochs after the line's epoch puts every word that held two
// free slots back to the bits it had before the move, and a CAS
// prepared on such a word before the move succeeds after it.
//
// The promise: advance's doc (op.go) "a step that enters a later epoch
// seals: it clears every entry expired at base and changes the version
// of every empty slot, so that every word holding a free slot changes,
// and any CAS prepared on such a word before the seal fails"; doc.go: "a
// write prepared before the move either fails its CAS or stores a stamp
// that reads correctly in every window to come".
//
// Law Linear(1000, 60): 1,023 ticks a ms, slack 4,155, seal 512 ticks,
// so the versions repeat after 2^16 x 512 = 2^25 ticks (32.8 s). At t0
// key b owes 30 tokens in line L; line L's last word holds two empty
// slots of version uint16(epoch(t0)). W = TryUpdate(k, 20, 30) at t0
// reads line L (lw t0), picks a free slot of that word and passes its
// header check; it is then preempted before its entry CAS (the few
// instructions exec has there: the test takes W's read and CAS from
// exec, since no hook stops exec between the two). Meanwhile an
// UpdateAt(T, m, 1), T = t0 + 32.8 s, moves line L in two steps (the
// first bounded by b's stamp, the second to T), each a seal; the second
// writes version uint16(epoch(T)) = uint16(epoch(t0)). W's CAS then
// succeeds, and k, which asked for 20 tokens 32.8 s ago (drained after
// 20 ms), reads about 20 tokens at T: its stamp, 2^25 ticks below the
// window, reads one 2^25 ahead (a phantom debt, a denial of a key far
// below its limit). The window is narrow in practice (a stall between
// exec's header check and its CAS while another caller completes a
// long move landing in exactly the right epoch, 1 ms in 32.8 s), but
// the guarantee the protocol rests on does not hold.
func TestAudit31FixedSealVersionABA(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	const base = 1_000_000
	clk.Set(base)
	e := newTest(t, 2, Linear(1000, 60), clk)
	q := &e.q
	clk.Advance(2 * time.Hour) // times passed below the clock's reading are not capped
	// Keys: b, k, m with first line L, two fillers with first line 1-L.
	pick := func(prefix string, line uint64, avoid map[uint16]bool) string {
		for i := 0; ; i++ {
			s := fmt.Sprintf("%s%d", prefix, i)
			if i0, _, fp := e.Locate(s); i0 == line && !avoid[fp] {
				avoid[fp] = true
				return s
			}
		}
	}
	used := map[uint16]bool{}
	L := uint64(0)
	b, k, m := pick("b", L, used), pick("k", L, used), pick("m", L, used)
	f1, f2 := pick("f", 1-L, used), pick("g", 1-L, used)
	// t0: a time whose tick is not near its epoch's start.
	t0 := uint64(10_000)
	for q.lo(t0)&(q.seal-1) < q.seal/4 || q.lo(t0)&(q.seal-1) > 3*q.seal/4 {
		t0++
	}
	at := func(ms uint64) time.Time { return time.UnixMilli(base + int64(ms)) }
	// The engine's ms are after its epoch: find the offset.
	// b first (line L), then f1 and f2 (line 1-L: L holds fewer live
	// entries only after b's write)
	e.UpdateAt(at(t0), b, 30)
	off := hdrLW(e.lines[L].w[0].Load()) - t0
	e.UpdateAt(at(t0), f1, 40)
	e.UpdateAt(at(t0), f2, 40)
	for i, want := range []int{1, 2} {
		ln := 1 - L
		if i == 0 {
			ln = L
		}
		var w [wordsPerLine]uint64
		e.loadLine(&e.lines[ln], &w)
		top := q.lo(hdrLW(w[0])) + q.span + 1
		if live, _ := occupancy(&w, top, q.lo(hdrLW(w[0]))); live != want {
			t.Fatalf("line %d: %d live entries, want %d", ln, live, want)
		}
	}
	ln := &e.lines[L]
	h := ln.w[0].Load()
	lw0 := hdrLW(h)
	if lw0 != t0+off || hdrMoving(h) {
		t.Fatalf("line L header lw %d moving %v, want lw %d", lw0, hdrMoving(h), t0+off)
	}
	e0 := q.epoch(q.lo(lw0))
	// W's read and decision, as exec makes them: k has no candidate; line
	// L has 1 live entry, line 1-L 2: a free slot of line L. The test
	// takes the last word (two empty slots), which m's write below does
	// not use (m takes the first free slot).
	j, sh := slotWord(SlotsPerLine - 2)
	ow := ln.w[j].Load()
	if !isEmpty(uint32(ow)) || !isEmpty(uint32(ow>>32)) {
		t.Fatalf("last word %#x: want two empty slots", ow)
	}
	_, _, fpK := e.Locate(k)
	_, thi := q.ticks(lw0)
	ns := thi + q.units(20)
	if !sameTime(ln.w[0].Load(), h) { // W's header check passes
		t.Fatal("header moved")
	}
	// W is preempted here. m moves the line to T, 2^16 epochs later.
	T := lw0 + 32_000
	for q.epoch(q.lo(T)) < e0+1<<16 {
		T++
	}
	if q.epoch(q.lo(T)) != e0+1<<16 {
		t.Fatalf("no ms in epoch %d", e0+1<<16)
	}
	var moves []uint64 // the headers m's header CASes replace
	e.setHooks(&testHooks{beforeMove: func(h uint64) { moves = append(moves, h) }})
	e.UpdateAt(at(T-off), m, 1)
	e.setHooks(nil)
	for i, mh := range moves {
		t.Logf("m's header CAS %d replaces lw %d (epoch %d) moving %v", i+1, hdrLW(mh), q.epoch(q.lo(hdrLW(mh))), hdrMoving(mh))
	}
	h2 := ln.w[0].Load()
	if hdrLW(h2) != T {
		t.Fatalf("line L moved to %d, want %d", hdrLW(h2), T)
	}
	now := ln.w[j].Load()
	t.Logf("epoch at t0 %d, at T %d; word before the move %#x, after %#x", e0, q.epoch(q.lo(T)), ow, now)
	// W's CAS, exactly as exec makes it.
	if !ln.w[j].CompareAndSwap(ow, withEntry(ow, sh, mkEnt(fpK, ns))) {
		t.Logf("W's CAS failed: the seal changed its word (the promised behaviour)")
		return
	}
	got := e.QueryAt(at(T-off), k)
	t.Errorf("a CAS prepared on a word of two free slots at t0 succeeded after a long move of 2^16 epochs (32.8 s) in two seals (word %#x before and after): advance's doc promises \"any CAS prepared on such a word before the seal fails\". k, which asked for 20 tokens at t0, reads %v at T (want 0: a phantom debt of its write, read 2^25 ticks ahead)", ow, got)
}
