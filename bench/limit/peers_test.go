package limit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/maypok86/otter/v2"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
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
	impls := append([]benchImpl{benchImpls[0], benchImpls[2]}, peerImpls...)
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
	for _, impl := range append(benchImpls[:3:3], peerImpls...) {
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

// timedImpl is an implementation that decides at a given time, so that a
// simulated second of traffic takes less than a real one. (memorystore
// reads its own clock and cannot take part.)
type timedImpl struct {
	name string
	new  func(r float64, burst int) func(t time.Time, key string) bool
}

var timedImpls = []timedImpl{
	{"limit", func(r float64, b int) func(time.Time, string) bool {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(limit.Limit(r), b, limit.WithClock(clk))
		return func(t time.Time, key string) bool { clk.SetTime(t); return l.AllowN(t, key, 1) }
	}},
	{"limit-countmin", func(r float64, b int) func(time.Time, string) bool {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(limit.Limit(r), b, limit.WithClock(clk), limit.WithEngine(limit.CountMin))
		return func(t time.Time, key string) bool { clk.SetTime(t); return l.AllowN(t, key, 1) }
	}},
	{"syncmap", func(r float64, b int) func(time.Time, string) bool {
		s := &syncMapLimiter{r: rate.Limit(r), b: b}
		return func(t time.Time, key string) bool {
			v, ok := s.m.Load(key)
			if !ok {
				v, _ = s.m.LoadOrStore(strings.Clone(key), rate.NewLimiter(s.r, s.b))
			}
			return v.(*rate.Limiter).AllowN(t, 1)
		}
	}},
	{"lru", func(r float64, b int) func(time.Time, string) bool {
		s := newLRULimiter(rate.Limit(r), b)
		return func(t time.Time, key string) bool {
			l, ok := s.c.Get(key)
			if !ok {
				nl := rate.NewLimiter(s.r, s.b)
				if prev, found, _ := s.c.PeekOrAdd(strings.Clone(key), nl); found {
					l = prev
				} else {
					l = nl
				}
			}
			return l.AllowN(t, 1)
		}
	}},
	{"otter", func(r float64, b int) func(time.Time, string) bool {
		s := newOtterLimiter(rate.Limit(r), b)
		return func(t time.Time, key string) bool {
			l, ok := s.c.GetIfPresent(key)
			if !ok {
				l, _ = s.c.SetIfAbsent(strings.Clone(key), rate.NewLimiter(s.r, s.b))
			}
			return l.AllowN(t, 1)
		}
	}},
}

// BenchmarkAbuser is BenchmarkForget with live traffic on a simulated
// clock: policy 10/s, burst 20; 1M clients each make one request every
// `period` (spread evenly: never above their limit), and an abuser makes
// `abuser` requests per second, for 10 seconds. It reports abuser-admits,
// the abuser's admitted requests, and ideal, what its own token bucket
// alone admits (rate.Limiter on the same times); and clients-denied, the
// fraction of the clients' requests denied (right: 0). The caches forget
// the abuser when more than their 32k keys arrive between two of its
// requests: 50k at period 1s and 20/s, 35k at period 2s and 15/s, 5k at
// period 1s and 200/s. limit's cells drain 10 tokens/s each: 100k cells
// a level drain 1M requests/s, which period 1s fills and period 2s half
// fills. limit's seed is random (crypto/rand), so which keys share the
// abuser's cells, and its count, vary from run to run: run with
// -benchtime 1x -count 5.
func BenchmarkAbuser(b *testing.B) {
	const clients, seconds, r, burst = 1 << 20, 10, 10, 20
	for _, sc := range []struct {
		period time.Duration
		abuser int
	}{{time.Second, 20}, {2 * time.Second, 15}, {time.Second, 200}} {
		for _, impl := range timedImpls {
			b.Run(fmt.Sprintf("period=%v/abuser=%d/impl=%s", sc.period, sc.abuser, impl.name), func(b *testing.B) {
				for range b.N {
					allow := impl.new(r, burst)
					ideal := rate.NewLimiter(r, burst)
					base := time.Unix(1e9, 0)
					step := sc.period / clients // between two client requests
					var next time.Duration      // the abuser's next request
					admits, wantAdmits, denied, requests := 0, 0, 0, 0
					buf := make([]byte, 0, 32)
					for s := uint64(0); time.Duration(s)*step < seconds*time.Second; s++ {
						at := time.Duration(s) * step
						t := base.Add(at)
						buf = strconv.AppendUint(append(buf[:0], "client-"...), s%clients, 10)
						requests++
						if !allow(t, unsafe.String(unsafe.SliceData(buf), len(buf))) { // each implementation clones a key it keeps
							denied++
						}
						if at >= next {
							next += time.Second / time.Duration(sc.abuser)
							if allow(t, "abuser") {
								admits++
							}
							if ideal.AllowN(t, 1) {
								wantAdmits++
							}
						}
					}
					b.ReportMetric(float64(admits), "abuser-admits")
					b.ReportMetric(float64(wantAdmits), "ideal")
					b.ReportMetric(float64(denied)/float64(requests), "clients-denied")
				}
			})
		}
	}
}
