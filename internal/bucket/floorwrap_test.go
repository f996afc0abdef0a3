package bucket

import (
	"sync"
	"testing"
)

// newTestHist is a floor histogram of width w.
func newTestHist(w uint64) *floorHist {
	h := &floorHist{width: w}
	return h
}

// TestFloorHistWrap drives the floor histogram across its 32-bit epoch
// wrap (floors.go: writers compare within 2^31 epochs of the last sweep,
// readers compare full epochs through top): for each start and idle gap,
// a flood of floors is counted, expires, and a later flood at the same
// 32-bit epochs counts only itself; an uncount of an expired floor whose
// epoch aliases a live one leaves the live count.
func TestFloorHistWrap(t *testing.T) {
	const w = 7
	wrap := uint64(1) << 32
	for _, start := range []uint64{1, 1 << 20, 1<<31 - 100, 1 << 31, 1<<32 - 3, 5 << 32, 1 << 50} {
		for _, gap := range []uint64{300, 1 << 28, 1<<31 - 1, 1 << 31, wrap - 1, wrap, wrap + 1, 2 * wrap, 3*wrap + 17, 1 << 45} {
			h := newTestHist(w)
			// 40 floors in 10 epochs from start.
			for j := range uint64(40) {
				h.move(0, (start+j%10)*w+1+j%5)
			}
			if got := h.above(start*w - 1); got != 40 {
				t.Fatalf("start %d: %v floors above the flood's start, want 40", start, got)
			}
			later := start + gap
			theta := later*w - 1
			if got := h.above(theta); got != 0 {
				t.Errorf("start %d, %d epochs later: %v floors read live, want 0", start, gap, got)
			}
			// A second flood of 25 at the later epochs.
			for j := range uint64(25) {
				h.move(0, (later+j%10)*w+1+j%5)
			}
			if got := h.above(theta); got != 25 {
				t.Errorf("start %d, %d epochs later: the second flood reads %v floors, want 25", start, gap, got)
			}
			// The first flood's floors moving on (uncounted at their old
			// epochs, which may alias the second's) change nothing live.
			for j := range uint64(40) {
				h.move((start+j%10)*w+1+j%5, 0)
			}
			if got := h.above(theta); got != 25 {
				t.Errorf("start %d, %d epochs later: after uncounting the first flood, %v floors, want 25", start, gap, got)
			}
			// The second flood's own moves are exact.
			for j := range uint64(10) {
				h.move((later+j%10)*w+1+j%5, 0)
			}
			if got := h.above(theta); got != 15 {
				t.Errorf("start %d, %d epochs later: after uncounting 10 of the second flood, %v floors, want 15", start, gap, got)
			}
		}
	}
}

// TestFloorHistReadNeverWrites: above reads, whatever the gap since the
// last floor (Saturation's doc: it never writes).
func TestFloorHistReadNeverWrites(t *testing.T) {
	h := newTestHist(3)
	for j := range uint64(30) {
		h.move(0, (1000+j)*3+1)
	}
	var b, top [floorBuckets]uint64
	for i := range h.b {
		b[i], top[i] = h.b[i].Load(), h.top[i].Load()
	}
	last := h.last.Load()
	for _, theta := range []uint64{0, 2999, 1 << 33, 1 << 40, 1<<63 + 5} {
		h.above(theta)
	}
	for i := range h.b {
		if h.b[i].Load() != b[i] || h.top[i].Load() != top[i] {
			t.Fatalf("above wrote bucket %d", i)
		}
	}
	if h.last.Load() != last {
		t.Fatal("above wrote last")
	}
}

// TestFloorHistConcurrentSweep: goroutines count floors at epochs that
// each start a sweep (2^28 epochs apart) while others count and uncount
// at the same epochs: every count is kept (run under -race in make
// test).
func TestFloorHistConcurrentSweep(t *testing.T) {
	const w, g, per = 5, 4, 200
	for round := range uint64(6) {
		h := newTestHist(w)
		base := (round + 1) * (sweepAfter + 12345)
		h.move(0, base*w) // a first floor: the ring swept to base
		var wg sync.WaitGroup
		for k := range uint64(g) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range uint64(per) {
					e := base + 3*sweepAfter + (k*per+j)%64
					s := e*w + 1
					h.move(0, s)
					if j%2 == 1 {
						h.move(s, 0)
					}
				}
			}()
		}
		wg.Wait()
		theta := (base+3*sweepAfter)*w - 1
		if got, want := h.above(theta), float64(g*per/2); got != want {
			t.Errorf("round %d: %v floors counted, want %v", round, got, want)
		}
	}
}
