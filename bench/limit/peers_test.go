package limit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/maypok86/otter/v2"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"
)

// The bounded peers: what a Go server uses when a sync.Map of limiters
// grows too large. Two bounded caches of *rate.Limiter, and
// sethvargo/go-limiter's in-memory store.

// peerBound is the entry bound of the two caches, chosen so that their
// live heap when full (BenchmarkHeap: 7.2 MiB for lru, 5.8 MiB for otter,
// 230 and 187 bytes per entry) is about limit's at its default size
// (6.16 MiB): the caches and limit are compared at equal memory.
const peerBound = 32 << 10

// lruLimiter is a hashicorp/golang-lru/v2 LRU (one mutex) of
// *rate.Limiter, at most peerBound keys: the least recently used key is
// forgotten when a new one arrives.
type lruLimiter struct {
	c *lru.Cache[string, *rate.Limiter]
	r rate.Limit
	b int
}

func newLRULimiter(r rate.Limit, b int) *lruLimiter {
	c, err := lru.New[string, *rate.Limiter](peerBound)
	if err != nil {
		panic(err)
	}
	return &lruLimiter{c: c, r: r, b: b}
}

func (s *lruLimiter) Allow(key string) bool {
	l, ok := s.c.Get(key)
	if !ok {
		nl := rate.NewLimiter(s.r, s.b)
		if prev, found, _ := s.c.PeekOrAdd(strings.Clone(key), nl); found {
			l = prev
		} else {
			l = nl
		}
	}
	return l.Allow()
}

// otterLimiter is a maypok86/otter/v2 cache (W-TinyLFU eviction,
// lock-free reads) of *rate.Limiter, MaximumSize peerBound.
type otterLimiter struct {
	c *otter.Cache[string, *rate.Limiter]
	r rate.Limit
	b int
}

func newOtterLimiter(r rate.Limit, b int) *otterLimiter {
	return &otterLimiter{c: otter.Must(&otter.Options[string, *rate.Limiter]{MaximumSize: peerBound}), r: r, b: b}
}

func (s *otterLimiter) Allow(key string) bool {
	l, ok := s.c.GetIfPresent(key)
	if !ok {
		l, _ = s.c.SetIfAbsent(strings.Clone(key), rate.NewLimiter(s.r, s.b))
	}
	return l.Allow()
}

// memstoreLimiter is sethvargo/go-limiter's memorystore: a map (one
// RWMutex) of buckets that refill to Tokens every Interval, swept of
// keys idle for SweepMinTTL (default 12 h) every SweepInterval (6 h).
// Tokens = burst and Interval = burst/rate give the same long-run rate
// and burst as the token bucket of the others (a fixed window of the
// burst, not a continuous refill). The store keeps the key string it is
// given on a key's first call: callers that reuse a key's bytes must
// pass a copy then (BenchmarkAllow warms every key with a copy first,
// so its timed loop never inserts).
type memstoreLimiter struct{ s golimiter.Store }

func newMemstoreLimiter(r float64, b int) *memstoreLimiter {
	s, err := memorystore.New(&memorystore.Config{
		Tokens:   uint64(b),
		Interval: time.Duration(float64(b) / r * float64(time.Second)),
	})
	if err != nil {
		panic(err)
	}
	return &memstoreLimiter{s}
}

func (m *memstoreLimiter) Allow(key string) bool {
	_, _, _, ok, _ := m.s.Take(context.Background(), key)
	return ok
}

func (m *memstoreLimiter) close() { _ = m.s.Close(context.Background()) }

var peerImpls = []benchImpl{
	{"lru", func(b testing.TB, r float64, burst int) (allower, func()) {
		return newLRULimiter(rate.Limit(r), burst), func() {}
	}},
	{"otter", func(b testing.TB, r float64, burst int) (allower, func()) {
		return newOtterLimiter(rate.Limit(r), burst), func() {}
	}},
	{"memorystore", func(b testing.TB, r float64, burst int) (allower, func()) {
		m := newMemstoreLimiter(r, burst)
		return m, m.close
	}},
}

// BenchmarkForget measures what each implementation remembers of an
// abuser while other clients arrive: policy 1e-6/s, burst 1 (nothing
// refills during the run). The abuser's first request is admitted; then
// `rounds` times, `gap` fresh clients (never seen before) make one
// request each, and the abuser asks again. It reports abuser-admits,
// how many of those `rounds` requests were admitted (0 is right: an
// implementation that forgets it admits it again), and fresh-denied,
// the fraction of the fresh clients' first requests that were denied (0
// is right: an implementation that remembers too little exactly denies
// innocents instead). gap=16k is within every bound; gap=1M is 32x the
// caches' bound and 2.5x limit's cells per generation (4 x 100k). Run
// with -benchtime 1x.
func BenchmarkForget(b *testing.B) {
	const rounds = 3
	impls := append([]benchImpl{benchImpls[0], benchImpls[1]}, peerImpls...)
	for _, gap := range []int{16 << 10, 1 << 20} {
		for _, impl := range impls {
			name := strconv.Itoa(gap>>10) + "k"
			if gap >= 1<<20 {
				name = strconv.Itoa(gap>>20) + "M"
			}
			b.Run(fmt.Sprintf("gap=%s/impl=%s", name, impl.name), func(b *testing.B) {
				for range b.N {
					a, stop := impl.new(b, 1e-6, 1)
					if !a.Allow("abuser") {
						b.Fatal("the abuser's first request was denied")
					}
					admits, denied := 0, 0
					buf := make([]byte, 0, 32)
					for r := range rounds {
						for i := range gap {
							buf = strconv.AppendUint(append(strconv.AppendUint(append(buf[:0], "fresh-"...), uint64(r), 10), '-'), uint64(i), 10)
							if !a.Allow(string(buf)) {
								denied++
							}
						}
						if a.Allow("abuser") {
							admits++
						}
					}
					stop()
					b.ReportMetric(float64(admits), "abuser-admits")
					b.ReportMetric(float64(denied)/float64(rounds*gap), "fresh-denied")
				}
			})
		}
	}
}

// TestPeers: each peer is a per-key token bucket of the policy: a key's
// burst is admitted, the next request denied, another key admitted; and
// the caches are bounded (a key evicted by peerBound others is admitted
// again), the unbounded ones are not.
func TestPeers(t *testing.T) {
	for _, impl := range append(benchImpls[:2:2], peerImpls...) {
		t.Run(impl.name, func(t *testing.T) {
			a, stop := impl.new(t, 1e-6, 3)
			defer stop()
			for i := range 3 {
				if !a.Allow("k") {
					t.Fatalf("request %d of the burst denied", i)
				}
			}
			if a.Allow("k") || !a.Allow("other") {
				t.Fatal("not a per-key bucket")
			}
			for i := range 2 * peerBound {
				a.Allow("fill-" + strconv.Itoa(i))
			}
			bounded := impl.name == "lru" || impl.name == "otter"
			if got := a.Allow("k"); got != bounded {
				t.Fatalf("after 2 x peerBound other keys, k admitted = %v; want %v", got, bounded)
			}
		})
	}
}
