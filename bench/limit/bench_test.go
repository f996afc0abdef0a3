package limit_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/time/rate"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch"
)

// The benchmarks compare limit (its default engine, and the count-min
// engine: limit-countmin) with the per-key alternatives a Go server
// uses: a sync.Map of *rate.Limiter (golang.org/x/time/rate), the same
// with a TTL purge sweep, a limiter on sketch/reference's rotator (the
// mutex-per-cell design of grudge, as toll builds on it), and the bounded
// peers of peers_test.go (LRU caches of *rate.Limiter at limit's memory,
// go-limiter's memorystore). Every limiter allows rate r per key with
// burst b; the sketches have the same size (L=4, M=100k, two
// generations). docs/readings.md has the commands and the numbers:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench 'Allow$' -benchtime 1000000x -cpu 1,2 ./limit/; done > allow.txt
//	go run ./cmd/allowratio < allow.txt
//	go test -run '^$' -bench 'Heap|Forget' -benchtime 1x ./limit/
//	go test -run '^$' -bench Abuser -benchtime 1x -count 5 ./limit/

const benchKeys = 1 << 20

// benchKey writes key i (8 bytes, distinct for i < benchKeys) into buf
// and returns it as a string sharing buf's bytes: no allocation, and the
// key is in the L1 cache, as a server's key is when it asks (the client
// address or token it has just parsed). Reading keys from an 8 MB table
// instead charged every implementation a cache miss on the key itself
// (about 100 ns here) that no server pays. The string is only valid
// until buf is reused: an implementation that keeps a key (the sync.Map
// limiters) clones it.
func benchKey(buf *[8]byte, i uint64) string {
	i &= benchKeys - 1
	binary.LittleEndian.PutUint64(buf[:], (i+1)*0x9e3779b97f4a7c15)
	return unsafe.String(&buf[0], len(buf))
}

// allower is what each implementation offers the benchmark.
type allower interface{ Allow(key string) bool }

type limitImpl struct{ l *limit.Limiter }

func (a limitImpl) Allow(key string) bool { return a.l.Allow(key) }

// syncMapLimiter is the common per-key limiter: a sync.Map of
// *rate.Limiter, created on first sight, never removed.
type syncMapLimiter struct {
	m sync.Map
	r rate.Limit
	b int
}

func (s *syncMapLimiter) Allow(key string) bool {
	v, ok := s.m.Load(key)
	if !ok {
		v, _ = s.m.LoadOrStore(strings.Clone(key), rate.NewLimiter(s.r, s.b))
	}
	return v.(*rate.Limiter).Allow()
}

// ttlLimiter is syncMapLimiter with a last-seen stamp per entry and a
// sweep that deletes entries idle for ttl (the usual fix for its memory).
type ttlLimiter struct {
	m   sync.Map
	r   rate.Limit
	b   int
	ttl int64 // ns
}

type ttlEntry struct {
	lim  *rate.Limiter
	last atomic.Int64 // UnixNano of the last Allow
}

func (s *ttlLimiter) allowAt(now time.Time, key string) bool {
	v, ok := s.m.Load(key)
	if !ok {
		v, _ = s.m.LoadOrStore(strings.Clone(key), &ttlEntry{lim: rate.NewLimiter(s.r, s.b)})
	}
	e := v.(*ttlEntry)
	e.last.Store(now.UnixNano())
	return e.lim.AllowN(now, 1)
}

func (s *ttlLimiter) Allow(key string) bool { return s.allowAt(time.Now(), key) }

// sweep deletes the entries idle since before now - ttl.
func (s *ttlLimiter) sweep(now int64) {
	s.m.Range(func(k, v any) bool {
		if v.(*ttlEntry).last.Load() < now-s.ttl {
			s.m.Delete(k)
		}
		return true
	})
}

// refLimiter is limit's strict Allow on the mutex reference rotator.
type refLimiter struct {
	r     *ref.Rotator
	burst float64
}

func (a refLimiter) Allow(key string) bool { return a.r.TryUpdateString(key, 1, a.burst) }

type benchImpl struct {
	name string
	new  func(b testing.TB, r float64, burst int) (allower, func())
}

var benchImpls = []benchImpl{
	{"limit", func(b testing.TB, r float64, burst int) (allower, func()) {
		return limitImpl{limit.MustNew(limit.Limit(r), burst)}, func() {}
	}},
	{"limit-countmin", func(b testing.TB, r float64, burst int) (allower, func()) {
		return limitImpl{limit.MustNew(limit.Limit(r), burst, limit.WithEngine(limit.CountMin))}, func() {}
	}},
	{"syncmap", func(b testing.TB, r float64, burst int) (allower, func()) {
		return &syncMapLimiter{r: rate.Limit(r), b: burst}, func() {}
	}},
	{"syncmap-ttl", func(b testing.TB, r float64, burst int) (allower, func()) {
		t := &ttlLimiter{r: rate.Limit(r), b: burst, ttl: int64(time.Minute)}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // the sweep, every second
			defer close(done)
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case now := <-tk.C:
					t.sweep(now.UnixNano())
				}
			}
		}()
		return t, func() { close(stop); <-done }
	}},
	{"reference", func(b testing.TB, r float64, burst int) (allower, func()) {
		// The count-min limiter's derived Hi and Period (on Buckets, the
		// default where exact, Period is 0: it does not rotate).
		l := limit.MustNew(limit.Limit(r), burst, limit.WithEngine(limit.CountMin))
		rr, err := ref.NewRotator(ref.RotatorConfig{
			Sketch: sketch.Config{
				Levels: 4, CellsPerLevel: 100_000, Decay: decay.Linear(r),
				Lo: 0, Hi: l.MaxDebt(), Hasher: sketch.SipHash(), Seed: 1,
			},
			Generations: 2,
			Period:      l.Period(),
		})
		if err != nil {
			b.Fatal(err)
		}
		return refLimiter{rr, float64(burst)}, rr.Close
	}},
}

// allImpls are the implementations BenchmarkAllow compares: limit, the
// sync.Map ones, the reference, and the bounded peers (peers_test.go).
var allImpls = append(benchImpls[:len(benchImpls):len(benchImpls)], peerImpls...)

// BenchmarkAllow measures one Allow on uniform keys out of 1M (and out of
// 16k, within the bounded peers' bound), admitted (a generous limit:
// every call admits) and denied (every key exhausted beforehand, a limit
// that does not refill within the run), at the GOMAXPROCS given by -cpu.
// Every implementation is warmed with one call per key first (a copy of
// the key), so the sync.Map ones hold 1M limiters and the bounded ones
// their bound. wrong/op is the fraction of calls that did not answer as
// the path expects: on the denied path at 1M keys, the keys a bounded
// cache forgot and admitted again.
func BenchmarkAllow(b *testing.B) {
	for _, keys := range []uint64{benchKeys, 16 << 10} {
		for _, path := range []string{"admitted", "denied"} {
			for _, impl := range allImpls {
				benchAllow(b, impl, path, keys)
			}
		}
	}
}

func benchAllow(b *testing.B, impl benchImpl, path string, keys uint64) {
	name := fmt.Sprintf("%dk", keys>>10)
	if keys >= 1<<20 {
		name = fmt.Sprintf("%dM", keys>>20)
	}
	b.Run(fmt.Sprintf("path=%s/impl=%s/keys=%s", path, impl.name, name), func(b *testing.B) {
		r, burst := 1000.0, 10
		if path == "denied" {
			r, burst = 1e-6, 1
		}
		a, stop := impl.new(b, r, burst)
		defer stop()
		var warm [8]byte
		for i := range keys {
			a.Allow(strings.Clone(benchKey(&warm, i)))
		}
		// Collect the garbage of earlier sub-benchmarks (1M-entry
		// maps) now, so that no background GC of theirs runs in
		// this one's timed loop.
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
				if a.Allow(benchKey(&buf, ((x*0x2545f4914f6cdd1d)>>44)&(keys-1))) != want {
					bad++
				}
			}
			wrong.Add(bad)
		})
		b.StopTimer()
		// The admitted path may deny a few (a collision's debt);
		// report it rather than flatter the path.
		b.ReportMetric(float64(wrong.Load())/float64(b.N), "wrong/op")
	})
}

// heapCounts returns BenchmarkHeap's key counts, 1M and 10M, each capped
// at max (LIMIT_HEAP_MAX: a key count >= 1; empty: no cap), once each.
func heapCounts(tb testing.TB, max string) []int {
	counts := []int{1_000_000, 10_000_000}
	if max == "" {
		return counts
	}
	m, err := strconv.Atoi(max)
	if err != nil || m < 1 {
		tb.Fatalf("LIMIT_HEAP_MAX=%q: want a key count >= 1", max)
	}
	var out []int
	for _, n := range counts {
		if n = min(n, m); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// BenchmarkHeap reports the live heap (after GC) an implementation holds
// after seeing 1M and 10M distinct keys, one Allow each. Keys arrive at
// a simulated 100k new keys per second; the TTL variant sweeps every
// simulated second with a 60 s TTL, so it keeps at most the last 6M keys.
// Run with -benchtime 1x. Set LIMIT_HEAP_MAX to cap the key counts
// (e.g. 3000000) on a machine short of memory.
func BenchmarkHeap(b *testing.B) {
	counts := heapCounts(b, os.Getenv("LIMIT_HEAP_MAX"))
	for _, impl := range append(benchImpls[:4:4], peerImpls...) {
		for _, n := range counts {
			b.Run(fmt.Sprintf("impl=%s/keys=%gM", impl.name, float64(n)/1e6), func(b *testing.B) {
				for range b.N {
					b.ReportMetric(heapAfter(b, impl, n)/(1<<20), "heap-MB")
				}
			})
		}
	}
}

func heapAfter(b *testing.B, impl benchImpl, n int) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var a allower
	stop := func() {}
	if impl.name == "syncmap-ttl" {
		// Swept on the simulated clock below, not by the real-time sweeper.
		a = &ttlLimiter{r: 1000, b: 10, ttl: int64(time.Minute)}
	} else {
		a, stop = impl.new(b, 1000, 10)
	}
	ttl, _ := a.(*ttlLimiter)
	base := time.Unix(1e9, 0)
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendUint(append(buf[:0], "client-"...), uint64(i), 10)
		switch a := a.(type) {
		case limitImpl:
			a.l.Allow(unsafe.String(unsafe.SliceData(buf), len(buf))) // the sketch does not keep the key
		case *ttlLimiter:
			// 100k keys/s; allowAt clones a key it stores.
			now := base.Add(time.Duration(i) * 10 * time.Microsecond)
			a.allowAt(now, string(buf))
			if (i+1)%100_000 == 0 {
				ttl.sweep(now.UnixNano())
			}
		default:
			a.Allow(string(buf))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(a)
	stop()
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

// BenchmarkAllowHot measures limit's Allow on 16 keys whose cells stay in
// the cache, one goroutine: the code path without the cache misses that
// dominate BenchmarkAllow, for A/B runs of a change to the path itself
// (docs/readings.md). Admitted: 1e6/s, burst 2^20 (every call admits,
// and the rotation Period, 32 s, is longer than the run);
// denied: every key exhausted at 1e-6/s.
func BenchmarkAllowHot(b *testing.B) {
	for _, path := range []string{"admitted", "denied"} {
		b.Run("path="+path, func(b *testing.B) {
			l := limit.MustNew(1e6, 1<<20)
			if path == "denied" {
				l = limit.MustNew(1e-6, 1)
			}
			var keys [16]string
			for i := range keys {
				keys[i] = fmt.Sprintf("client-%d", i)
				l.Allow(keys[i])
			}
			want := path == "admitted"
			wrong := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if l.Allow(keys[i&15]) != want {
					wrong++
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(wrong)/float64(b.N), "wrong/op")
		})
	}
}

func TestHeapCounts(t *testing.T) {
	for _, c := range []struct {
		max  string
		want []int
	}{
		{"", []int{1_000_000, 10_000_000}},
		{"3000000", []int{1_000_000, 3_000_000}},
		{"500000", []int{500_000}},
		{"20000000", []int{1_000_000, 10_000_000}},
	} {
		if got := heapCounts(t, c.max); !slices.Equal(got, c.want) {
			t.Errorf("LIMIT_HEAP_MAX=%q: %v, want %v", c.max, got, c.want)
		}
	}
}
