package bucket

import (
	"encoding/binary"
	"fmt"
	"testing"
	"unsafe"
)

// BenchmarkOps measures the engine's operations single-threaded on keys
// out of a set of 1024 (lines in cache: the cost of the code) and of 1M
// (lines in memory), with limit.New(10, 20)'s law on its memory
// (6.14 MiB), admitted and denied. Allow-level comparisons with the
// count-min are in bench/capacity.
func BenchmarkOps(b *testing.B) {
	for _, nkeys := range []uint64{1 << 10, 1 << 20} {
		for _, path := range []string{"query", "admitted", "denied"} {
			b.Run(fmt.Sprintf("keys=%d/path=%s", nkeys, path), func(b *testing.B) {
				rate, burst := 10.0, 20.0
				if path == "admitted" {
					rate, burst = 1e6, 1e4 // refills faster than the loop drains it
				}
				e := MustNew(Config{Lines: 100_600, Law: Linear(rate, 2*burst)})
				var buf [8]byte
				key := func(i uint64) string {
					binary.LittleEndian.PutUint64(buf[:], (i%nkeys+1)*0x9e3779b97f4a7c15)
					return unsafe.String(&buf[0], 8)
				}
				for i := range nkeys {
					e.TryUpdate(key(i), burst, burst)
				}
				x := uint64(88172645463325252)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					switch path {
					case "query":
						e.Query(key(x))
					default:
						e.TryUpdate(key(x), 1, burst)
					}
				}
			})
		}
	}
}

// BenchmarkSaturation measures one reading on limit's default memory
// holding 1M keys at their limit.
func BenchmarkSaturation(b *testing.B) {
	e := MustNew(Config{Lines: 100_600, Law: Linear(10, 40), Clock: frozenClock()})
	fillAtLimit(e, 1_000_000, "sat")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.Saturation(1, 20)
	}
}
