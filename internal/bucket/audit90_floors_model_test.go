package bucket

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// a90flModel is the truth a floor histogram is read against: the lines'
// floors as the engine keeps them (each line's current floor, 0: none)
// and the stamps the histogram was told of and not told to forget
// (reg: a floor the engine clears when it expires, in advance, is never
// uncounted).
type a90flModel struct {
	h     *floorHist
	w     uint64
	span  uint64
	now   uint64
	lines []uint64
	reg   map[uint64]int
}

func a90flNew(w uint64, lines int, start uint64) *a90flModel {
	return &a90flModel{
		h:     &floorHist{width: w},
		w:     w,
		span:  max(1, w*floorBuckets/2-2), // the largest span of width w
		now:   start,
		lines: make([]uint64, lines),
		reg:   map[uint64]int{},
	}
}

// move raises line l's floor to fl (> its current one), as op.go does
// after its header CAS: move(old, fl).
func (m *a90flModel) move(l int, fl uint64) {
	old := m.lines[l]
	m.h.move(old, fl)
	if old != 0 {
		if m.reg[old]--; m.reg[old] == 0 {
			delete(m.reg, old)
		}
	}
	m.reg[fl]++
	m.lines[l] = fl
}

// expire clears every expired floor as advance does (no uncount), each
// with probability 1/2.
func (m *a90flModel) expire(r *rand.Rand) {
	for l, f := range m.lines {
		if f != 0 && f <= m.now && r.IntN(2) == 0 {
			m.lines[l] = 0
		}
	}
}

// restore is ReadFrom's rebuild: reset, then every line's floor added
// (in an order given by perm).
func (m *a90flModel) restore(perm []int) {
	m.h.reset()
	m.reg = map[uint64]int{}
	for _, l := range perm {
		if f := m.lines[l]; f != 0 {
			m.h.add(f, true)
			m.reg[f]++
		}
	}
}

// check reads above(theta) and compares it with the registered floors:
// at least those above theta, at most those also in theta's bucket.
func (m *a90flModel) check(t *testing.T, what string, theta uint64) bool {
	t.Helper()
	lo, hi := 0, 0
	for s, c := range m.reg {
		if s > theta {
			lo += c
		}
		if s > theta || s/m.w == theta/m.w {
			hi += c
		}
	}
	got := m.h.above(theta)
	if got < float64(lo) || got > float64(hi) {
		t.Errorf("%s: width %d, now %d (epoch %d), theta %d: above = %v, want in [%d, %d] (last %d)",
			what, m.w, m.now, m.now/m.w, theta, got, lo, hi, m.h.last.Load())
		return false
	}
	return true
}

// TestAudit90FloorsModelJumps drives the histogram as the engine does (a
// monotone clock; a line's new floor above its old one, within a load of
// the clock; expired floors cleared without an uncount; restores that
// rebuild from the lines) through clock jumps of 2^28, 2^29, 2^31, 2^32
// and 2^40 epochs and stamps up to the engine's largest (2^47 ms at
// 2^14 ticks a ms), reading it against the registered floors after every
// step (floors.go: "the count is exact but for floors within one bucket
// ... above theta").
func TestAudit90FloorsModelJumps(t *testing.T) {
	jumps := []uint64{1<<28 - 1, 1 << 28, 1<<28 + 1, 1<<29 + 3, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1, 1 << 32, 1<<32 + 255, 1 << 40}
	const maxTick = uint64(lwMask)*maxTicksPerMs + tickBase
	for _, w := range []uint64{1, 2, 7, 251, 469, 513} {
		r := rand.New(rand.NewPCG(90, w))
		for run := range 6 {
			start := uint64(tickBase)
			if run >= 3 {
				start = maxTick - (1<<41+1<<33)*w // near the engine's end of time
			}
			m := a90flNew(w, 48, start+r.Uint64N(1<<20))
			bad := 0
			for step := range 400 {
				if bad > 3 {
					break
				}
				switch k := r.IntN(20); {
				case k < 2:
					j := jumps[r.IntN(len(jumps))] * w
					if m.now+j+m.span+2 < maxTick {
						m.now += j + r.Uint64N(w)
					}
				case k < 8:
					m.now += r.Uint64N(3 * m.span)
				case k == 8:
					m.expire(r)
					m.restore(r.Perm(len(m.lines)))
					if m.check(t, "after a restore", m.now) {
						continue
					}
					bad++
					continue
				}
				m.expire(r)
				// A burst of evictions at the clock's reading.
				for range 1 + r.IntN(12) {
					l := r.IntN(len(m.lines))
					fl := m.now + 1 + r.Uint64N(m.span+1)
					if old := m.lines[l]; fl <= old {
						fl = old + 1 + r.Uint64N(m.span)
						if fl > m.now+m.span+1 {
							continue
						}
					}
					m.move(l, fl)
				}
				for _, d := range []uint64{0, r.Uint64N(m.span + 1), m.span / 2, m.span} {
					if !m.check(t, "step "+strconv.Itoa(step), m.now+d) {
						bad++
						break
					}
				}
			}
		}
	}
}
