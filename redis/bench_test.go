package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
)

// BenchmarkAllow compares AllowN on the server sketch with
// go-redis/redis_rate (GCRA, one key per bucket) on the same server:
// decisions per second and p50/p99 latency at 1..64 concurrent callers,
// on the admitted path (uniform keys out of 1M, each far below its limit)
// and on the denied path of one hot abusive key, where the deny cache
// answers without a round trip (rtt/op counts the round trips). It also
// reports the server's time per script call (srv-µs/call: INFO
// commandstats usec_per_call of fcall or evalsha, wall time) and the CPU
// per decision of the server (srv-cpu-µs/op: INFO cpu, network included)
// and of this process (cli-cpu-µs/op: getrusage), steadier than the
// rates on shared cores.
//
//	go test -run '^$' -bench BenchmarkAllow -benchtime 20000x ./
//
// It shares one rueidis client across its cells (so a one-caller cell
// that follows a concurrent one runs in rueidis's pipelined mode). The
// ratios docs/distributed.md records come from bench/cmd/ratebench: interleaved
// rounds, new clients per run, both client libraries.
func BenchmarkAllow(b *testing.B) {
	srv := startServer(b)
	rc := srv.client(b)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr(), PoolSize: 128})
	b.Cleanup(func() { rdb.Close() })
	rr := redis_rate.NewLimiter(rdb)
	ctx := context.Background()
	for _, path := range []string{"admitted", "denied-hot"} {
		for _, callers := range []int{1, 4, 16, 64} {
			for _, impl := range []string{"grudge", "grudge+denycache", "redis_rate"} {
				if path == "admitted" && impl == "grudge+denycache" {
					continue
				}
				b.Run(fmt.Sprintf("path=%s/callers=%d/impl=%s", path, callers, impl), func(b *testing.B) {
					var allow func(key string) bool
					var l *Limiter
					burst := 1e9
					if path == "denied-hot" {
						burst = 10
					}
					switch impl {
					case "grudge", "grudge+denycache":
						cells := uint32(0)
						if impl == "grudge+denycache" {
							cells = 1 << 14
						}
						l = mustLimiter(b, rc, LimiterConfig{Name: fmt.Sprint("bench:", path, callers, impl), Limit: PerSecond(burst/3600, burst), DenyCacheCells: cells})
						allow = func(key string) bool {
							d, err := l.Allow(ctx, key)
							if err != nil {
								b.Fatal(err)
							}
							return d.Allowed
						}
					default:
						lim := redis_rate.PerHour(int(burst))
						lim.Burst = int(burst)
						prefix := fmt.Sprint(path, callers, ":")
						allow = func(key string) bool {
							r, err := rr.Allow(ctx, prefix+key, lim)
							if err != nil {
								b.Fatal(err)
							}
							return r.Allowed > 0
						}
					}
					rdb.ConfigResetStat(ctx)
					srv0, cli0 := serverCPU(ctx, rdb), clientCPU()
					per := b.N/callers + 1
					lat := make([][]time.Duration, callers)
					b.ReportAllocs()
					b.ResetTimer()
					start := time.Now()
					var wg sync.WaitGroup
					for g := range callers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(g), 1))
							ls := make([]time.Duration, 0, per)
							for range per {
								key := "hot"
								if path == "admitted" {
									key = fmt.Sprint("user:", rng.IntN(1_000_000))
								}
								t0 := time.Now()
								allow(key)
								ls = append(ls, time.Since(t0))
							}
							lat[g] = ls
						}()
					}
					wg.Wait()
					el := time.Since(start)
					b.StopTimer()
					srv1, cli1 := serverCPU(ctx, rdb), clientCPU()
					all := slices.Concat(lat...)
					slices.Sort(all)
					b.ReportMetric(float64(len(all))/el.Seconds(), "decisions/s")
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
					if l != nil {
						b.ReportMetric(float64(l.Stats().ServerCalls)/float64(len(all)), "rtt/op")
					}
					b.ReportMetric((srv1-srv0).Seconds()*1e6/float64(len(all)), "srv-cpu-µs/op")
					b.ReportMetric((cli1-cli0).Seconds()*1e6/float64(len(all)), "cli-cpu-µs/op")
					if us, ok := scriptUsecPerCall(ctx, rdb); ok {
						b.ReportMetric(us, "srv-µs/call")
					}
				})
			}
		}
	}
}

// serverCPU is the server's CPU time (user + sys), from INFO cpu.
func serverCPU(ctx context.Context, rdb *goredis.Client) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// clientCPU is this process's CPU time (user + sys): the benchmark's
// callers and the client library.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scriptUsecPerCall is the server's usec_per_call for script calls
// (evalsha, eval, fcall: whichever ran most) since the last CONFIG
// RESETSTAT, from INFO commandstats: the server time one decision costs.
func scriptUsecPerCall(ctx context.Context, rdb *goredis.Client) (float64, bool) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, false
	}
	best, us := int64(-1), 0.0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval" && name != "cmdstat_fcall") {
			continue
		}
		var calls int64
		var per float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				per, _ = strconv.ParseFloat(v, 64)
			}
		}
		if calls > best {
			best, us = calls, per
		}
	}
	return us, best > 0
}

// BenchmarkCheck is Check on a sketch of 1, 1024 and 16384 shards against
// a loopback server (the library loaded): one ACL check per shard, the
// first alone and the rest checkParallel at a time, and the per-node
// CONFIG reads.
//
//	go test -run '^$' -bench 'BenchmarkCheck$' -benchtime 5x ./
func BenchmarkCheck(b *testing.B) {
	srv := startServer(b)
	rc := srv.client(b)
	ctx := context.Background()
	for _, shards := range []uint32{1, 1024, 16384} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			l := mustLimiter(b, rc, LimiterConfig{Name: fmt.Sprintf("chk%d", shards), Limit: PerSecond(1, 10), Shards: shards, CellsPerLevel: 16, ServerCheck: CheckSkip})
			if err := l.sk.Check(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := l.sk.Check(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
