package capacity_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/limit"
)

// BenchmarkAllow measures one Allow on uniform keys out of 1M for
// limit.New's default, the Buckets engine (impl=limit), the count-min
// that was the default before it (impl=countmin: WithEngine(CountMin),
// prefetch on) and the bare engine on the same memory (impl=bucket:
// TryUpdate(key, 1, burst), what limit's strict Allow calls, without
// limit's own code), admitted (1000/s, burst 10: every call admits) and
// denied (0.05/s, burst 1: every key exhausted, no refill within 20 s),
// at the GOMAXPROCS of -cpu. Both rates are exact in the Buckets engine,
// so limit.New picks it. It is limit's BenchmarkAllow (same keys, same
// loop), so bench/cmd/allowratio summarizes interleaved rounds, as
// ratios to impl=limit:
//
//	for i in 1 2 3 4 5 6 7 8; do go test -run '^$' -bench Allow -benchtime 1000000x -cpu 1,2 ./capacity/; done > allow.txt
//	go run ./cmd/allowratio < allow.txt
func BenchmarkAllow(b *testing.B) {
	const keys = 1 << 20
	key := func(buf *[8]byte, i uint64) string {
		binary.LittleEndian.PutUint64(buf[:], (i&(keys-1)+1)*0x9e3779b97f4a7c15)
		return unsafe.String(&buf[0], len(buf))
	}
	impls := []struct {
		name string
		new  func(r float64, burst int) func(string) bool
	}{
		{"limit", func(r float64, burst int) func(string) bool {
			l := limit.MustNew(limit.Limit(r), burst)
			if l.Engine() != limit.Buckets {
				b.Fatalf("limit.New(%v, %d) runs on %v", r, burst, l.Engine())
			}
			return l.Allow
		}},
		{"countmin", func(r float64, burst int) func(string) bool {
			return limit.MustNew(limit.Limit(r), burst, limit.WithEngine(limit.CountMin)).Allow
		}},
		{"bucket", func(r float64, burst int) func(string) bool {
			bytes := limit.MustNew(limit.Limit(r), burst).Sizes().Total
			e := bucket.MustNew(bucket.Config{Lines: bucket.LinesFor(bytes), Law: bucket.Linear(r, 2*float64(burst))})
			bf := float64(burst)
			return func(k string) bool { return e.TryUpdate(k, 1, bf) }
		}},
	}
	for _, path := range []string{"admitted", "denied"} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("path=%s/impl=%s/keys=1M", path, impl.name), func(b *testing.B) {
				r, burst := 1000.0, 10
				if path == "denied" {
					r, burst = 0.05, 1
				}
				allow := impl.new(r, burst)
				var warm [8]byte
				for i := range uint64(keys) {
					allow(key(&warm, i))
				}
				runtime.GC()
				var seed atomic.Uint64
				var wrong atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					x := seed.Add(1)*0x9e3779b97f4a7c15 | 1
					want := path == "admitted"
					bad := int64(0)
					var buf [8]byte
					for pb.Next() {
						x ^= x >> 12
						x ^= x << 25
						x ^= x >> 27
						if allow(key(&buf, (x*0x2545f4914f6cdd1d)>>44)) != want {
							bad++
						}
					}
					wrong.Add(bad)
				})
				b.StopTimer()
				b.ReportMetric(float64(wrong.Load())/float64(b.N), "wrong/op")
			})
		}
	}
}
