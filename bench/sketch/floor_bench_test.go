package sketch_test

import (
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/bench/matrix"
	"github.com/lfgrudge/grudge/internal/atom"
	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/hw"
	"github.com/lfgrudge/grudge/sketch"
)

// BenchmarkFloor measures, on one hot key and one thread, what the two
// cached-line targets of docs/design.md section 5 are graded against,
// beside the floors that no decaying lock-free cell of this design can go
// below (docs/design.md, "The floors"). Every floor does the same hash
// and touches L=4 counters at the same sketch.Index positions, one per
// 64-byte-padded row, as the sketch does:
//
//   - impl=atomicadd: the atomic-add bound (bench/matrix.AtomicAdd):
//     hash, then four fetch-adds. The Update target is lockfree <= 2x this.
//   - impl=loadcas: hash, then per counter a load and a CAS of the loaded
//     value plus one: a CAS cell with no arithmetic and no clock.
//   - impl=ticks+loadcas: loadcas after the default clock's gate (one
//     counter read and a compare, internal/core's tickGate): a decaying
//     cell must know the time.
//   - impl=lockfree, impl=reference: Update on the default clocks.
//
// and op=TryUpdateAdmitted on the matrix's shared clock (both sides read
// the same clock), against the reference's admitted TryUpdate:
//
//   - impl=seqlock: the shared clock, the hash, the stripe's seq load, four
//     loads, the stripe CAS, four CASes and the release: the exactness
//     protocol of section 3 with no arithmetic.
//
//   - impl=lockfree, impl=reference: TryUpdate(k, 1, huge).
//
//     go test -run '^$' -bench 'BenchmarkFloor$' -cpu 1 -count 10 ./sketch/
func BenchmarkFloor(b *testing.B) {
	key := benchKeys()[0]
	b.Run("op=Update", func(b *testing.B) {
		for _, impl := range []string{"atomicadd", "loadcas", "ticks+loadcas", "lockfree", "reference"} {
			b.Run("impl="+impl, func(b *testing.B) {
				var op func()
				switch impl {
				case "atomicadd":
					a := matrix.NewAtomicAdd(benchLevels, benchCells)
					op = func() { a.Update(key, 1) }
				case "loadcas":
					f := newFloorCells()
					op = func() { f.loadCAS(f.hash(key)) }
				case "ticks+loadcas":
					f := newFloorCells()
					op = func() {
						h := f.hash(key)
						if hw.TicksUnordered()-f.gate.Load() > 1<<62 {
							f.gate.Add(1) // never: the gate's deadline is far
						}
						f.loadCAS(h)
					}
				default:
					s, closeFn, err := matrix.NewTarget(impl, benchLevels, benchCells, matrix.ClockDefault)
					if err != nil {
						b.Fatal(err)
					}
					defer closeFn()
					op = func() { s.Update(key, 1) }
				}
				op()
				b.ReportAllocs()
				for b.Loop() {
					op()
				}
			})
		}
	})
	b.Run("op=TryUpdateAdmitted", func(b *testing.B) {
		for _, impl := range []string{"seqlock", "lockfree", "reference"} {
			b.Run("impl="+impl, func(b *testing.B) {
				var op func()
				if impl == "seqlock" {
					f := newFloorCells()
					var clk matrix.SharedClock
					op = func() {
						sinkU += uint64(clk.NowMillis())
						f.seqlock(f.hash(key))
					}
				} else {
					s, closeFn, err := matrix.NewTarget(impl, benchLevels, benchCells, matrix.ClockShared)
					if err != nil {
						b.Fatal(err)
					}
					defer closeFn()
					op = func() { sinkB = s.TryUpdate(key, 1, hugeLimit) }
				}
				op()
				b.ReportAllocs()
				for b.Loop() {
					op()
				}
			})
		}
	})
}

var sinkU uint64

// floorCells are L rows of M padded-apart counters at the sketch's
// positions, a stripe seq on its own line, and a gate word.
type floorCells struct {
	hasher sketch.Hasher
	cells  []atomic.Uint64
	_      [56]byte
	seq    atomic.Uint64
	_      [56]byte
	gate   atomic.Uint64
}

func newFloorCells() *floorCells {
	return &floorCells{hasher: sketch.XXH3()(0), cells: make([]atomic.Uint64, benchLevels*(benchCells+8))}
}

func (f *floorCells) hash(key []byte) uint64 { return f.hasher.Sum64(key) }

func (f *floorCells) cellsOf(h uint64, c *[benchLevels]*atomic.Uint64) {
	for l := range uint32(benchLevels) {
		c[l] = &f.cells[int(l)*(benchCells+8)+int(core.Index(h, l, benchCells))]
	}
}

func (f *floorCells) loadCAS(h uint64) {
	var c [benchLevels]*atomic.Uint64
	var w [benchLevels]uint64
	f.cellsOf(h, &c)
	for l, p := range c {
		w[l] = p.Load()
	}
	for l, p := range c {
		p.CompareAndSwap(w[l], w[l]+1)
	}
}

func (f *floorCells) seqlock(h uint64) {
	var c [benchLevels]*atomic.Uint64
	var w [benchLevels]uint64
	f.cellsOf(h, &c)
	seq := f.seq.Load()
	for l, p := range c {
		w[l] = p.Load()
	}
	if seq&1 == 0 && f.seq.CompareAndSwap(seq, seq+1) {
		for l, p := range c {
			p.CompareAndSwap(w[l], w[l]+1)
		}
		atom.Release(&f.seq)
	}
}
