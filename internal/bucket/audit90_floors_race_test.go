package bucket

import (
	"fmt"
	"sync"
	"testing"
)

// The interleavings below are replayed step by step through the
// histogram's test hook (histHook, nil in production): the hook holds one add at a point
// (histSettled: it has read last and the sweep; histDecided: it has read
// the word and chosen its new value) while another add runs whole.

// onceHook sets histHook to run f the first time an add reaches point
// (clearing it first, so that f's own adds run unhooked), and clears it
// when the test ends.
func onceHook(t *testing.T, point int, f func()) {
	t.Cleanup(func() { histHook = nil })
	histHook = func(p int) {
		if p == point {
			histHook = nil
			f()
		}
	}
}

// TestAudit90FloorsFixedConcurrentSweepErasesLiveFloor (fixed: a sweep is
// published before it runs, a second eviction that finds it begun helps
// or retries instead of sweeping with its own stale base, and a helper
// that finds it finished stops): two evictions at the same clock reading
// both find the ring unswept for 2^31 epochs or more (an engine whose
// first floors in that long come in a burst: the audit-89 case of a
// limiter that first saturates after 9.4 hours at limit.New(1e6, 1000),
// 134 s at New(1e6, 1)) and both would sweep. The faster sweeps, raises
// last to T and counts its floor; the slower, which read last before
// that, used to sweep too with base L and read the faster one's word
// relative to L: more than 2^31 epochs away, below its window, re-stamped
// with a count of 0 (above read 1 for 2 live floors; an engine flooded by
// 4 goroutines under -race read 116 of 231 floored lines). Replayed: the
// slower eviction is held right after it read last; and a late helper of
// the faster one's sweep runs after that sweep finished and a floor was
// counted.
func TestAudit90FloorsFixedConcurrentSweepErasesLiveFloor(t *testing.T) {
	for _, c := range []struct {
		w, last, gap uint64 // gap: epochs from last to the burst
	}{
		{1, 0, 1<<32 + 1<<30},            // a new engine's first floors, after 2^32 + 2^30 epochs
		{1, 1 << 33, 1<<31 + 1<<27},      // 2^31 + 2^27 epochs after the last sweep
		{469, 1 << 29, 1<<32 + 1<<29},    // limit.New(10, 20)'s width
		{251, 3 << 30, 1<<31 + 12345678}, // limit.New(1e6, 1000)'s
	} {
		t.Run(fmt.Sprintf("w%d/last%d/gap%d", c.w, c.last, c.gap), func(t *testing.T) {
			h := &floorHist{width: c.w}
			if c.last != 0 {
				h.move(0, c.last*c.w) // the previous sweep: last = c.last
			}
			if got := h.last.Load(); got != c.last {
				t.Fatalf("last %d, want %d", got, c.last)
			}
			T := c.last + c.gap
			fast, slow := (T+40)*c.w+1, (T+3)*c.w+1 // two floors of the burst, in different buckets
			var fastPlan *sweepPlan
			// The slower eviction reads last (c.last); held there, the
			// faster one runs its whole add: sweep, last = T+40, count.
			onceHook(t, histSettled, func() {
				h.move(0, fast)
				fastPlan = h.sw.Load()
			})
			h.move(0, slow)
			if fastPlan == nil || h.last.Load() != fast/c.w {
				t.Fatalf("the faster eviction's sweep: plan %v, last %d; want a plan to %d", fastPlan, h.last.Load(), fast/c.w)
			}
			// A helper of the faster one's sweep, late: it finds it
			// finished and re-stamps nothing.
			h.sweep(fastPlan)
			theta := T * c.w
			if got := h.above(theta); got != 2 {
				t.Errorf("two live floors (epochs %d and %d, %d past the previous sweep), above(%d) = %v; want 2", T+40, T+3, c.gap, theta, got)
			}
		})
	}
}

// TestAudit90FloorsFixedStaleWriterPoisonsBucket (fixed: a writer re-reads
// the sweep before its CAS and starts over if one began): an eviction
// whose add read last = L, found its floor (near L) within its horizons,
// and chose its word's new value, is held while another eviction sweeps
// to an epoch T 2^31 + 2^28 past L and counts its floor at T. It used to
// write its word anyway: reading T's word as older (an int32 difference
// of 2^31 - 2^28), it replaced it with its own epoch and a count of 1,
// T's live floor was lost, and every floor of the following 2^31 - 2^28
// epochs in that bucket read that word as newer ("the bucket moved on")
// and was dropped. (Reaching it needs the clock to move 2^28 epochs
// while one add runs: 16.8 s at limit.New(1e6, 1); a stalled goroutine,
// a fake clock, or a custom Clock stepping forward.) Now it starts over,
// finds its floor expired against the new last, and writes nothing.
func TestAudit90FloorsFixedStaleWriterPoisonsBucket(t *testing.T) {
	// Held after reading last (it then reads T's word itself) or after
	// its decision (its CAS then fails, or its re-read of the sweep
	// sends it back).
	for _, point := range []int{histSettled, histDecided} {
		t.Run(fmt.Sprint("point", point), func(t *testing.T) {
			const w = 16
			L := uint64(1 << 33)
			h := &floorHist{width: w}
			h.move(0, L*w+1) // last = L
			T := L + 1<<31 + 1<<28
			// The stale writer's floor, at epoch L+256 (bucket 0, as
			// T's), is held while the other eviction sweeps to T and
			// counts its floor.
			onceHook(t, point, func() { h.move(0, T*w+1) })
			h.move(0, (L+256)*w+1)
			// Floors of T's window: 10 more in bucket 0 (epoch T), 10 in bucket 1.
			for k := range uint64(10) {
				h.move(0, T*w+2+k)
				h.move(0, (T+1)*w+1+k)
			}
			theta := T * w
			if got := h.above(theta); got != 21 {
				t.Errorf("21 live floors at epochs %d and %d: above(%d) = %v; want 21", T, T+1, theta, got)
			}
			T2 := T + 1<<29
			for k := range uint64(10) {
				h.move(0, T2*w+1+k)
				h.move(0, (T2+1)*w+1+k)
			}
			if got := h.above(T2 * w); got != 20 {
				t.Errorf("2^29 epochs later (last %d), 20 live floors at epochs %d and %d: above = %v; want 20", h.last.Load(), T2, T2+1, got)
			}
		})
	}
}

// TestAudit90FloorsConcurrentErasWithinHalfWrap: goroutines count,
// uncount and move floors while the clock steps from era to era by 2^28
// to 2^31 - 2^20 epochs (less than 2^31 from the last sweep, so a sweep's
// base reads every word right), each era's first floors sweeping
// concurrently and each goroutine uncounting its lines' floors of the
// era before (a line's old floor uncounted long after a sweep): at the
// end of every era the histogram reads exactly one floor per line.
func TestAudit90FloorsConcurrentErasWithinHalfWrap(t *testing.T) {
	const w, g, lines = 7, 4, 64
	steps := []uint64{1 << 28, 1<<28 + 1, 1<<31 - 1<<20, 1 << 29, 1<<30 + 255, 1<<28 + 128, 1<<31 - 1<<20}
	h := &floorHist{width: w}
	era := uint64(5 << 30)
	h.move(0, era*w)
	var floors [g][lines]uint64
	for _, step := range steps {
		era += step
		var wg sync.WaitGroup
		for k := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for l := range uint64(lines) {
					s := (era+(uint64(k)*lines+l)%200)*w + 1 + l%w
					h.move(floors[k][l], s) // the old floor, from the era before
					floors[k][l] = s
					// A race of a floor raised twice: count, uncount, count.
					h.move(s, s+1)
					h.move(s+1, s)
				}
			}()
		}
		wg.Wait()
		if got := h.above(era * w); got != g*lines {
			t.Errorf("era %d (step %d): above = %v, want %d", era, step, got, g*lines)
		}
	}
}

// TestAudit90FloorsSweepKeepsLiveFloors: floors counted just before the
// 2^28-epoch horizon stay counted when the floor that crosses it sweeps
// the ring (the sweep re-stamps only words a ring older than the floor
// that sweeps; a live floor is at most half a ring below a new one).
func TestAudit90FloorsSweepKeepsLiveFloors(t *testing.T) {
	for _, w := range []uint64{1, 3, 251} {
		for _, L := range []uint64{0, 1 << 28, 3<<31 + 77, 1<<40 + 5} {
			for _, ahead := range []uint64{0, 1, 55, 127} {
				h := &floorHist{width: w}
				if L != 0 {
					h.move(0, L*w)
				}
				edge := L + sweepAfter
				for k := uint64(1); k <= 127; k++ {
					h.move(0, (edge-k)*w+w-1) // no sweep: each within 2^28 of last
				}
				h.move(0, (edge+ahead)*w) // sweeps
				theta := (edge-127)*w - 1 // the window: edge-128 to edge+127
				if got := h.above(theta); got != 128 {
					t.Errorf("w %d, last %d, sweep %d past the horizon: above = %v, want 128 (a floor within the window erased by the sweep)", w, L, ahead, got)
				}
			}
		}
	}
}
