package rotator_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loov/hrtime"

	"github.com/lfgrudge/grudge/bench/matrix"
	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Benchmarks compare the lock-free rotator with ref.Rotator
// (grudge's design: RWMutex on every operation, ticker goroutine) on the
// configuration grudge and toll use: L=4, M=100k, Exponential(1), two
// generations, Period 1s, default clocks, 1M uniform keys.

const numKeys = 1 << 20

// keys holds numKeys distinct 8-byte keys back to back.
var keys = func() []byte {
	b := make([]byte, 8*numKeys)
	for i := range numKeys {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(i)*0x9e3779b97f4a7c15)
	}
	return b
}()

// rng is xorshift64*: a per-goroutine uniform key picker that costs a few
// ns and no allocation.
type rng uint64

func (r *rng) key() []byte {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	i := (x * 0x2545f4914f6cdd1d) >> (64 - 20) // numKeys = 2^20
	return keys[8*i : 8*i+8 : 8*i+8]
}

var seeds atomic.Uint64

func newRng() rng { return rng(seeds.Add(1)*0x9e3779b97f4a7c15 | 1) }

func benchSketch(clk sketch.Clock) sketch.Config {
	return sketch.Config{Levels: 4, CellsPerLevel: 100_000, Decay: decay.Exponential(1), Hi: 1e9, Clock: clk}
}

type rotatorImpl struct {
	name string
	new  func(b *testing.B, clk sketch.Clock) (matrix.Target, func())
}

// impls are the two rotators as the contention matrix registers them
// (bench/matrix: 2 generations, Period 1 s, L=4, M=100k, Exponential(1)).
var impls = []rotatorImpl{
	{"lockfree", newMatrixTarget(matrix.ImplRotator)},
	{"reference", newMatrixTarget(matrix.ImplRefRotator)},
}

func newMatrixTarget(impl string) func(b *testing.B, clk sketch.Clock) (matrix.Target, func()) {
	return func(b *testing.B, clk sketch.Clock) (matrix.Target, func()) {
		t, closeFn, err := matrix.NewTargetOn(impl, 4, 100_000, clk)
		if err != nil {
			b.Fatal(err)
		}
		return t, closeFn
	}
}

// BenchmarkRotator: Update and Query on 1M uniform keys, serial and
// parallel, with real clocks: rotations happen every second as in
// production (the lock-free one on access, the reference on its ticker).
func BenchmarkRotator(b *testing.B) {
	for _, impl := range impls {
		for _, op := range []string{"Update", "Query"} {
			for _, mode := range []string{"serial", "parallel"} {
				b.Run(fmt.Sprintf("impl=%s/op=%s/mode=%s", impl.name, op, mode), func(b *testing.B) {
					s, closeFn := impl.new(b, nil)
					defer closeFn()
					if op == "Query" {
						r := newRng()
						for range numKeys {
							s.Update(r.key(), 1)
						}
					}
					do := func(s matrix.Target, k []byte) { s.Update(k, 1) }
					if op == "Query" {
						do = func(s matrix.Target, k []byte) { s.Query(k) }
					}
					b.ReportAllocs()
					b.ResetTimer()
					if mode == "serial" {
						r := newRng()
						for b.Loop() {
							do(s, r.key())
						}
						return
					}
					b.RunParallel(func(pb *testing.PB) {
						r := newRng()
						for pb.Next() {
							do(s, r.key())
						}
					})
				})
			}
		}
	}
}

// rotateEvery is the number of operations between forced rotations in
// BenchmarkRotationLatency.
const rotateEvery = 10_000

// BenchmarkRotationLatency times every Update with hrtime while rotations
// are forced every rotateEvery operations, and reports the latency
// percentiles and the maximum. The lock-free rotator rotates on access:
// a fake clock is advanced by one Period every rotateEvery operations and
// the next operation performs the promotion (its latency is reported as
// rot-ns). The reference rotates on its own goroutine, as grudge's ticker
// does: a helper goroutine calls Rotate every rotateEvery operations
// while the measured goroutine carries on (the helper's Rotate time is
// reported as rotate-ns). Rotations are far more frequent than in
// production (every few ms instead of every Period), which inflates GC
// work for both.
func BenchmarkRotationLatency(b *testing.B) {
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			clk := sketchtest.NewFakeClock()
			s, closeFn := impl.new(b, clk)
			defer closeFn()
			lat := make([]time.Duration, b.N)
			var rotLat []time.Duration
			overhead := hrtime.Overhead()
			r := newRng()

			var rotate func(i int)
			var refRot *ref.Rotator
			var lf *rotator.Rotator
			var helperDone chan time.Duration
			var kick chan struct{}
			switch x := s.(type) {
			case *rotator.Rotator:
				lf = x
				rotate = func(int) { clk.Advance(time.Second) }
			case *ref.Rotator:
				refRot = x
				kick = make(chan struct{}, 1)
				helperDone = make(chan time.Duration)
				go func() {
					var total time.Duration
					for range kick {
						t0 := hrtime.Now()
						refRot.Rotate()
						total += hrtime.Since(t0)
					}
					helperDone <- total
				}()
				rotate = func(int) {
					select {
					case kick <- struct{}{}:
					default: // the previous rotation is still running
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i%rotateEvery == 0 {
					rotate(i)
				}
				var before uint64
				if lf != nil {
					before = lf.Stats().Promotions
				}
				k := r.key()
				t0 := hrtime.Now()
				s.Update(k, 1)
				d := max(hrtime.Since(t0)-overhead, 0)
				lat[i] = d
				if lf != nil && lf.Stats().Promotions != before {
					rotLat = append(rotLat, d)
				}
			}
			b.StopTimer()
			rotations := b.N / rotateEvery
			if kick != nil {
				close(kick)
				total := <-helperDone
				if rotations > 0 {
					b.ReportMetric(float64(total.Nanoseconds())/float64(rotations), "rotate-ns")
				}
			}
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
			b.ReportMetric(pct(0.50), "p50-ns")
			b.ReportMetric(pct(0.99), "p99-ns")
			b.ReportMetric(pct(0.999), "p99.9-ns")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
			if len(rotLat) > 0 {
				slices.Sort(rotLat)
				b.ReportMetric(float64(rotLat[len(rotLat)/2].Nanoseconds()), "rot-p50-ns")
				b.ReportMetric(float64(rotLat[len(rotLat)-1].Nanoseconds()), "rot-max-ns")
			}
			b.ReportMetric(float64(rotations), "rotations")
		})
	}
}

// BenchmarkGeneration is the cost behind the allocate-versus-reset
// decision, for one L=4, M=100k generation: building a fresh sketch
// (allocation, zeroing by the runtime, decay tables, and the GC work that
// frees the retired one) against Reset of a retired one (one atomic
// store per cell).
func BenchmarkGeneration(b *testing.B) {
	cfg := benchSketch(nil)
	b.Run("op=new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sketch.New(cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=reset", func(b *testing.B) {
		s, err := sketch.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			s.Reset()
		}
	})
}
