package sketch_test

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/asm"
	"github.com/lfgrudge/grudge/bench/matrix"
)

// BenchmarkCombine answers the open question of docs/design.md
// ("Combining, tried and not kept"): does flat combining pay for a hot
// key's writes when many cores wait on its lines? impl=combining is a
// benchmark-only prototype over the lock-free sketch: per key, each
// goroutine publishes its delta in its own padded slot; whoever wins the
// key's combiner flag sums every pending delta, applies the sum with one
// Update and marks those slots done; the others spin (Pause, then
// runtime.Gosched) until their slot is done or the flag is free. Beside
// it, the lock-free sketch's own Update, the reference and the
// atomic-add bound, every one on the default clock, Update of +1 on
// keys=hot1|hot8 from every goroutine.
//
//	go test -run '^$' -bench 'BenchmarkCombine$' -cpu 1,2,4,8,16 ./sketch/
//
// The prototype is not exact the way the sketch is (the sum is rounded
// once, in float64, before the float32 round-up), which is fine for a
// throughput question; it is not a candidate implementation as written.
func BenchmarkCombine(b *testing.B) {
	for _, kd := range []struct {
		name string
		n    int
	}{{"hot1", 1}, {"hot8", 8}} {
		b.Run("keys="+kd.name, func(b *testing.B) {
			keys, mask := benchKeys()[:kd.n], kd.n-1
			for _, name := range []string{"lockfree", "combining", "reference", "atomicadd"} {
				b.Run("impl="+name, func(b *testing.B) {
					base := name
					if name == "combining" {
						base = "lockfree"
					}
					s, closeFn, err := matrix.NewTarget(base, benchLevels, benchCells, matrix.ClockDefault)
					if err != nil {
						b.Fatal(err)
					}
					defer closeFn()
					cs := make([]combiner, kd.n)
					for i := range cs {
						cs[i].s, cs[i].key = s, keys[i]
					}
					b.ReportAllocs()
					var seed atomic.Int32
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						me := int(seed.Add(1) - 1)
						if me >= maxCombineSlots {
							panic("BenchmarkCombine: more goroutines than slots")
						}
						for i := range cs {
							// n = max(n, me+1): a combiner scans slots 0..n-1,
							// this goroutine's own among them.
							for v := cs[i].n.Load(); v <= int32(me) && !cs[i].n.CompareAndSwap(v, int32(me+1)); v = cs[i].n.Load() {
							}
						}
						i := me & mask
						for pb.Next() {
							if name == "combining" {
								cs[i].update(me, 1)
							} else {
								s.Update(keys[i], 1)
							}
							i = (i + 1) & mask
						}
					})
					reportMops(b)
					if name == "combining" {
						var applied, batches uint64
						for i := range cs {
							applied += cs[i].applied.Load()
							batches += cs[i].batches.Load()
						}
						if applied != uint64(b.N) {
							b.Fatalf("combining applied %d deltas for %d operations", applied, b.N)
						}
						if batches > 0 {
							b.ReportMetric(float64(applied)/float64(batches), "deltas/batch")
						}
					}
				})
			}
		})
	}
}

const maxCombineSlots = 64

const (
	slotIdle uint32 = iota
	slotPending
	slotDone
)

type combineSlot struct {
	state atomic.Uint32
	delta float64 // written before state goes pending, read after
	_     [48]byte
}

type combiner struct {
	flag             atomic.Uint32
	_                [60]byte
	n                atomic.Int32 // slots that may be pending: 0..n-1
	applied, batches atomic.Uint64
	_                [44]byte
	slots            [maxCombineSlots]combineSlot
	s                matrix.Target
	key              []byte
}

func (c *combiner) update(me int, delta float64) {
	sl := &c.slots[me]
	sl.delta = delta
	sl.state.Store(slotPending)
	var bo asm.Backoff
	for spins := 0; ; spins++ {
		if sl.state.Load() == slotDone {
			sl.state.Store(slotIdle)
			return
		}
		if c.flag.Load() == 0 && c.flag.CompareAndSwap(0, 1) {
			if sl.state.Load() == slotDone { // applied by the previous combiner
				c.flag.Store(0)
				sl.state.Store(slotIdle)
				return
			}
			var took [maxCombineSlots]bool
			sum, k := 0.0, uint64(0)
			n := int(c.n.Load())
			for j := range n {
				if c.slots[j].state.Load() == slotPending {
					sum += c.slots[j].delta
					took[j] = true
					k++
				}
			}
			c.s.Update(c.key, sum)
			c.applied.Add(k)
			c.batches.Add(1)
			for j := range n {
				if took[j] {
					c.slots[j].state.Store(slotDone)
				}
			}
			c.flag.Store(0)
			sl.state.Store(slotIdle) // own slot was pending, so taken
			return
		}
		if spins < 64 {
			bo.Spin()
		} else {
			runtime.Gosched()
		}
	}
}
