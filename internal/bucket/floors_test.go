package bucket

import "testing"

// TestFloorHist: counts above a threshold within the live window (the
// thresholds Saturation asks: at most span ticks below the floors).
func TestFloorHist(t *testing.T) {
	var h floorHist
	h.init(32000)
	if h.width*floorBuckets < 2*32002 {
		t.Fatalf("ring of %d x %d ticks does not span twice the largest load", floorBuckets, h.width)
	}
	base := uint64(1 << 20)
	for i := range 10 {
		h.add(base+uint64(i)*1000, true)
	}
	if got := h.above(base - 1); got != 10 {
		t.Fatalf("above(base-1) = %v, want 10", got)
	}
	if got := h.above(base + 4500); got != 5 {
		t.Fatalf("above(base+4500) = %v, want 5", got)
	}
	// A point mass exactly at the threshold is not above it.
	if got := h.above(base + 9000); got != 0 {
		t.Fatalf("above(the top floor) = %v, want 0", got)
	}
	h.move(base+9000, base+9500)
	if got := h.above(base + 9000); got != 1 {
		t.Fatalf("after a move up: above = %v, want 1", got)
	}
	h.move(base, 0) // a floor cleared by a move records nothing
	if got := h.above(base - 1); got != 9 {
		t.Fatalf("above(base-1) after removing one = %v, want 9", got)
	}
	// A floor a whole ring later reuses the buckets: the old counts are
	// gone, and removing an old floor does nothing.
	later := base + floorBuckets*h.width*3
	h.add(later, true)
	h.add(base+1000, false)
	if got := h.above(later - 1); got != 1 {
		t.Fatalf("after the ring turned over: above = %v, want 1", got)
	}
	// Removing below zero does nothing.
	h.add(later, false)
	h.add(later, false)
	if got := h.above(later - 1); got != 0 {
		t.Fatalf("after removing: above = %v, want 0", got)
	}
}
