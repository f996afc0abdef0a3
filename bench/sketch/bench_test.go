package sketch_test

// Benchmarks of the lock-free sketch against its two baselines, measured in
// the same benchmark function so that ratios come from one run (the
// sync/map_bench_test.go pattern):
//
//   - impl=lockfree: sketch.Sketch, default (monotonic) clock.
//   - impl=reference: sketch/reference, the mutex-per-cell sketch grudge
//     describes, default (wall) clock.
//   - impl=atomicadd: the lower bound, pingora-style: L rows of float64
//     counters updated with a CAS add, the same sketch.Index layout, no
//     decay, no clamp, no clock.
//
// Every implementation comes from the contention matrix's registry
// (bench/matrix.NewTarget), with its parameters: L=4, M=100_000, Hi=1e12
// and (where they decay) decay.Exponential(1). Sub-benchmarks are named
// keys=uniform1M|hot1 / mode=serial|parallel / impl=..., and report
// Mops/s (all goroutines together) besides ns/op and allocs/op.
//
//	go test -run '^$' -bench . -benchtime=200ms ./sketch/
//
// BenchmarkClockShare gives both sketches the same clock, to separate the
// gain that comes from the cheaper default clock from the rest.

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lfgrudge/grudge/bench/matrix"
)

const (
	benchLevels = 4
	benchCells  = 100_000
	numKeys     = 1 << 20 // keys=uniform1M
	keyMask     = numKeys - 1
	keyLen      = 16
	// hugeLimit admits every TryUpdate (it must be finite).
	hugeLimit = matrix.AdmitLimit
	// deniedFill is the score every key gets before BenchmarkTryUpdateDenied:
	// with Exponential(1) it stays above limit=1 for about 20 s.
	deniedFill = matrix.DenyFill
)

// benchScorer is the part of sketch.Scorer the benchmarks call: the
// matrix's Target, whose registry (bench/matrix.NewTarget) builds every
// implementation of these benchmarks too.
type benchScorer = matrix.Target

// benchKeys returns the 1<<20 pre-generated 16-byte keys (built once, from
// a fixed seed) and, as keys=hot1, a one-key slice.
var benchKeys = sync.OnceValue(func() [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, numKeys*keyLen)
	keys := make([][]byte, numKeys)
	for i := range keys {
		k := buf[i*keyLen : (i+1)*keyLen : (i+1)*keyLen]
		binary.LittleEndian.PutUint64(k, r.Uint64())
		binary.LittleEndian.PutUint64(k[8:], r.Uint64())
		keys[i] = k
	}
	return keys
})

var sinkF float64
var sinkB bool

var implNames = []string{"lockfree", "reference", "atomicadd"}

// newImpl builds the named implementation from the matrix's registry
// (default clocks) and, if fill is not 0, adds fill to every uniform key,
// so every cell holds a non-zero score (a zero score would let the
// lock-free sketch skip the decay math) and every page of the cell arrays
// is faulted in before timing.
func newImpl(tb testing.TB, name, clock string, fill float64) benchScorer {
	s, closeFn, err := matrix.NewTarget(name, benchLevels, benchCells, clock)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(closeFn)
	if fill != 0 {
		for _, k := range benchKeys() {
			s.Update(k, fill)
		}
	}
	return s
}

// benchOp is one operation under test on one key.
type benchOp func(s benchScorer, key []byte)

// runMatrix runs op over keys=uniform1M|hot1 x mode=serial|parallel x
// impl=lockfree|reference|atomicadd. Each implementation is built once,
// lazily, and filled with fill (see newImpl); it is shared by the
// sub-benchmarks of its impl.
func runMatrix(b *testing.B, fill float64, op benchOp) {
	impls := map[string]benchScorer{}
	get := func(b *testing.B, name string) benchScorer {
		if s, ok := impls[name]; ok {
			return s
		}
		s := newImpl(b, name, matrix.ClockDefault, fill)
		impls[name] = s
		return s
	}
	for _, kd := range []string{"uniform1M", "hot1"} {
		b.Run("keys="+kd, func(b *testing.B) {
			keys := benchKeys()
			mask := keyMask
			if kd == "hot1" {
				keys, mask = keys[:1], 0
			}
			b.Run("mode=serial", func(b *testing.B) {
				for _, name := range implNames {
					b.Run("impl="+name, func(b *testing.B) {
						s := get(b, name)
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							op(s, keys[i])
							i = (i + 1) & mask
						}
						reportMops(b)
					})
				}
			})
			b.Run("mode=parallel", func(b *testing.B) {
				for _, name := range implNames {
					b.Run("impl="+name, func(b *testing.B) {
						s := get(b, name)
						b.ReportAllocs()
						var seed atomic.Uint64
						b.ResetTimer()
						b.RunParallel(func(pb *testing.PB) {
							// Each goroutine walks the keys from its own
							// spread-out starting point.
							i := int(seed.Add(1)*0x9E3779B97F4A7C15>>44) & mask
							for pb.Next() {
								op(s, keys[i])
								i = (i + 1) & mask
							}
						})
						reportMops(b)
					})
				}
			})
		})
	}
}

func reportMops(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s/1e6, "Mops/s")
	}
}

func BenchmarkUpdate(b *testing.B) {
	runMatrix(b, 1, func(s benchScorer, k []byte) { s.Update(k, 1) })
}

func BenchmarkQuery(b *testing.B) {
	runMatrix(b, 1, func(s benchScorer, k []byte) { sinkF = s.Query(k) })
}

// BenchmarkTryUpdateAdmitted is the admitted path: the limit admits
// every call, so each one writes all L cells.
func BenchmarkTryUpdateAdmitted(b *testing.B) {
	runMatrix(b, 1, func(s benchScorer, k []byte) { sinkB = s.TryUpdate(k, 1, hugeLimit) })
}

// BenchmarkTryUpdateDenied is the abuse path: every key is pre-filled far
// above the limit, so every call is a denial (checked after the run).
func BenchmarkTryUpdateDenied(b *testing.B) {
	var admitted atomic.Int64
	runMatrix(b, deniedFill, func(s benchScorer, k []byte) {
		if s.TryUpdate(k, 1, 1) {
			admitted.Add(1)
		}
	})
	if n := admitted.Load(); n != 0 {
		b.Fatalf("TryUpdateDenied admitted %d calls; the fill decayed below the limit", n)
	}
}

func BenchmarkUpdateAndQuery(b *testing.B) {
	runMatrix(b, 1, func(s benchScorer, k []byte) { sinkF = s.UpdateAndQuery(k, 1) })
}

// BenchmarkClockShare is single-goroutine Update on uniform keys, both
// sketches with their default clocks (clock=default: monotonic for the
// lock-free sketch, wall for the reference) and both on the matrix's
// shared monotonic clock (clock=shared). The lockfree/reference ratio
// under clock=shared is the gain without the cheaper clock; the rest of
// the clock=default ratio is the clock's share.
func BenchmarkClockShare(b *testing.B) {
	keys := benchKeys()
	for _, clock := range []string{matrix.ClockDefault, matrix.ClockShared} {
		b.Run("clock="+clock, func(b *testing.B) {
			for _, name := range implNames[:2] {
				b.Run("impl="+name, func(b *testing.B) {
					s := newImpl(b, name, clock, 1)
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						s.Update(keys[i], 1)
						i = (i + 1) & keyMask
					}
					reportMops(b)
				})
			}
		})
	}
}
