// Command redismem measures Redis server memory (INFO memory used_memory)
// after N distinct keys have each made one admitted request, for the
// server sketch (github.com/lfgrudge/grudge/redis) and for
// go-redis/redis_rate on the same server, at the checkpoints given.
//
//	redis-server --port 6399 --bind 127.0.0.1 --save "" --appendonly no &
//	go run ./cmd/redismem -addr 127.0.0.1:6399 -impl grudge -keys 1000000,10000000
//	go run ./cmd/redismem -addr 127.0.0.1:6399 -impl redis_rate -keys 1000000,10000000
//
// It FLUSHALLs the server first. redis_rate's limit is 10 per hour, so no
// bucket key expires during the run (each lives 6 minutes after its
// request); the sketch's limiter uses the same limit. At each checkpoint
// it also prints the decisions the memory bought: the share of that
// segment's requests that were denied, and, after the memory reading, the
// share of -probe fresh keys (never seen) denied one request. redis_rate
// admits every first request of a key; the sketch denies a key whose
// cells all hold the debts of 9 or more others (burst 10), which a
// sketch of 4 x 100,000 cells reaches between 1M and 10M keys.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	grudgeredis "github.com/lfgrudge/grudge/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6399", "redis-server address")
	impl := flag.String("impl", "grudge", "grudge or redis_rate")
	keys := flag.String("keys", "1000000,10000000", "comma-separated checkpoints (distinct keys)")
	workers := flag.Int("workers", 64, "concurrent callers")
	probe := flag.Int("probe", 10_000, "fresh keys asking once after each checkpoint")
	levels := flag.Uint("levels", 0, "grudge: L of the server sketch (0: the default, 4)")
	cells := flag.Uint("cells", 0, "grudge: M of the server sketch (0: the default, 100,000)")
	flag.Parse()
	var points []int
	for _, s := range strings.Split(*keys, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			log.Fatalf("redismem: bad -keys %q: %v", *keys, err)
		}
		points = append(points, n)
	}
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: *addr, PoolSize: *workers + 8})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		log.Fatalf("redismem: FLUSHALL: %v", err)
	}
	var allow func(key string) (bool, error)
	switch *impl {
	case "grudge":
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
		if err != nil {
			log.Fatalf("redismem: %v", err)
		}
		defer rc.Close()
		l, err := grudgeredis.NewLimiter(rc, grudgeredis.LimiterConfig{Name: "mem", Limit: grudgeredis.PerSecond(10.0/3600, 10),
			Levels: uint32(*levels), CellsPerLevel: uint32(*cells)})
		if err != nil {
			log.Fatalf("redismem: %v", err)
		}
		allow = func(key string) (bool, error) { d, err := l.Allow(ctx, key); return d.Allowed, err }
	case "redis_rate":
		rl := redis_rate.NewLimiter(rdb)
		allow = func(key string) (bool, error) {
			r, err := rl.Allow(ctx, key, redis_rate.PerHour(10))
			if err != nil {
				return false, err
			}
			return r.Allowed > 0, nil
		}
	default:
		log.Fatalf("redismem: -impl must be grudge or redis_rate; got %q", *impl)
	}
	base := usedMemory(ctx, rdb)
	fmt.Printf("impl=%s baseline used_memory=%d\n", *impl, base)
	done := 0
	start := time.Now()
	// run asks once for each key of prefix from..to-1 and returns how
	// many were denied.
	run := func(prefix string, from, to int) int64 {
		var next, denied atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range *workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(to) {
						return
					}
					ok, err := allow(prefix + strconv.FormatInt(i, 10))
					if err != nil {
						log.Fatalf("redismem: %v", err)
					}
					if !ok {
						denied.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return denied.Load()
	}
	for _, p := range points {
		segDenied := run("user:", done, p)
		seg := p - done
		done = p
		m := usedMemory(ctx, rdb)
		n, _ := rdb.DBSize(ctx).Result()
		fresh := run(fmt.Sprintf("fresh%d:", p), 0, *probe)
		fmt.Printf("impl=%s keys=%d used_memory=%d delta=%d server_keys=%d denied=%.3f%% fresh_denied=%.3f%% elapsed=%s\n",
			*impl, p, m, m-base, n, 100*float64(segDenied)/float64(seg), 100*float64(fresh)/float64(*probe), time.Since(start).Round(time.Second))
	}
}

func usedMemory(ctx context.Context, rdb *goredis.Client) int64 {
	s, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		log.Fatalf("redismem: INFO memory: %v", err)
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				log.Fatalf("redismem: used_memory %q: %v", v, err)
			}
			return n
		}
	}
	fmt.Fprintln(os.Stderr, "redismem: no used_memory in INFO memory")
	os.Exit(1)
	return 0
}
