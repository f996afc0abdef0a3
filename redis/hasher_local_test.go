package redis

import (
	"strconv"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lfgrudge/grudge/sketch"
)

// LimiterConfig.Hasher's doc: the deny cache and the LocalFallback hash
// with it too, under seeds derived from Seed (audit 60: both hashed with
// XXH3 whatever Hasher was set, so a crafted XXH3 collision could deny
// a victim locally). The factory records the seeds it is built with.
func TestLocalSketchesUseTheLimitersHasher(t *testing.T) {
	var mu sync.Mutex
	seeds := map[uint64]bool{}
	sip := sketch.SipHash()
	factory := func(seed uint64) sketch.Hasher {
		mu.Lock()
		seeds[seed] = true
		mu.Unlock()
		return sip(seed)
	}
	gc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { gc.Close() })
	const seed = 0x5eed
	_, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "hl", Limit: PerSecond(10, 10), Hasher: factory, Seed: seed,
		DenyCacheCells: 64, Policy: LocalFallback, ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		what string
		seed uint64
	}{{"server sketch", seed}, {"deny cache", seed ^ 0xD1E5CAC4E}, {"LocalFallback", seed ^ 0xFA11BAC}} {
		if !seeds[s.seed] {
			t.Errorf("the %s was not built with the configured Hasher (seeds seen %v)", s.what, seeds)
		}
	}
}
