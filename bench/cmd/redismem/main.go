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
// request); the sketch's limiter uses the same limit.
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
	var allow func(key string) error
	switch *impl {
	case "grudge":
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
		if err != nil {
			log.Fatalf("redismem: %v", err)
		}
		defer rc.Close()
		l, err := grudgeredis.NewLimiter(rc, grudgeredis.LimiterConfig{Name: "mem", Limit: grudgeredis.PerSecond(10.0/3600, 10)})
		if err != nil {
			log.Fatalf("redismem: %v", err)
		}
		allow = func(key string) error { _, err := l.Allow(ctx, key); return err }
	case "redis_rate":
		rl := redis_rate.NewLimiter(rdb)
		allow = func(key string) error { _, err := rl.Allow(ctx, key, redis_rate.PerHour(10)); return err }
	default:
		log.Fatalf("redismem: -impl must be grudge or redis_rate; got %q", *impl)
	}
	base := usedMemory(ctx, rdb)
	fmt.Printf("impl=%s baseline used_memory=%d\n", *impl, base)
	done := 0
	start := time.Now()
	for _, p := range points {
		var next atomic.Int64
		next.Store(int64(done))
		var wg sync.WaitGroup
		for range *workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(p) {
						return
					}
					if err := allow("user:" + strconv.FormatInt(i, 10)); err != nil {
						log.Fatalf("redismem: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		done = p
		m := usedMemory(ctx, rdb)
		n, _ := rdb.DBSize(ctx).Result()
		fmt.Printf("impl=%s keys=%d used_memory=%d delta=%d server_keys=%d elapsed=%s\n",
			*impl, p, m, m-base, n, time.Since(start).Round(time.Second))
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
