package hw

import (
	"testing"
	"time"
	"unsafe"
)

var (
	sinkU64 uint64
	sinkI64 int64
	sinkDur time.Duration
	sinkT   time.Time
)

// BenchmarkClock compares one read of each clock. time.Now and
// time.Since are the baselines NowMillis has to beat.
func BenchmarkClock(b *testing.B) {
	c := NewClock()
	start := time.Now()
	b.Run("clock=time.Now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkT = time.Now()
		}
	})
	b.Run("clock=time.Since", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkDur = time.Since(start)
		}
	})
	b.Run("clock=nanotime", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkI64 = Nanotime()
		}
	})
	b.Run("clock=Ticks", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkU64 = Ticks()
		}
	})
	b.Run("clock=TicksUnordered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkU64 = TicksUnordered()
		}
	})
	b.Run("clock=NowMillis", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkI64 = c.NowMillis()
		}
	})
}

// BenchmarkPrefetch: the cost of one call prefetching 4 cached lines (the
// sketch's L=4 cells), the overhead a Prefetch adds when it was not needed.
func BenchmarkPrefetch(b *testing.B) {
	var lines [4][8]uint64
	ps := []unsafe.Pointer{unsafe.Pointer(&lines[0]), unsafe.Pointer(&lines[1]), unsafe.Pointer(&lines[2]), unsafe.Pointer(&lines[3])}
	b.Run("impl=asm", func(b *testing.B) {
		for b.Loop() {
			Prefetch(ps)
		}
	})
	b.Run("impl=generic", func(b *testing.B) {
		for b.Loop() {
			prefetchGeneric(ps)
		}
	})
}
