package rotator_test

// A/B benchmarks of the public rotator face; see bench/ab/sketch.

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
)

var abKeys = func() [][]byte {
	ks := make([][]byte, 1<<20)
	for i := range ks {
		k := make([]byte, 16)
		binary.LittleEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		ks[i] = k
	}
	return ks
}()

var abSinkF float64
var abSinkB bool

func abNew(b *testing.B) *rotator.Rotator {
	r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Levels: 4, CellsPerLevel: 100_000, Decay: decay.Exponential(1), Hi: 1e12}, Period: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range abKeys {
		r.Update(k, 1)
	}
	return r
}

func abRun(b *testing.B, op func(r *rotator.Rotator, k []byte)) {
	for _, kd := range []string{"uniform1M", "hot1"} {
		b.Run("keys="+kd, func(b *testing.B) {
			r := abNew(b)
			mask := len(abKeys) - 1
			if kd == "hot1" {
				mask = 0
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				op(r, abKeys[i])
				i = (i + 1) & mask
			}
		})
	}
}

func BenchmarkABRotUpdate(b *testing.B) {
	abRun(b, func(r *rotator.Rotator, k []byte) { r.Update(k, 1) })
}
func BenchmarkABRotQuery(b *testing.B) {
	abRun(b, func(r *rotator.Rotator, k []byte) { abSinkF = r.Query(k) })
}
func BenchmarkABRotTryUpdate(b *testing.B) {
	abRun(b, func(r *rotator.Rotator, k []byte) { abSinkB = r.TryUpdate(k, 1, 1e11) })
}
