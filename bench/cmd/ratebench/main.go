// Command ratebench compares the global Limiter (github.com/lfgrudge/grudge/redis)
// with go-redis/redis_rate on the same redis-server: decisions per second
// in interleaved rounds, their medians, and per round the ratio of each
// grudge client to redis_rate, whose median (with its spread) is the
// number docs/distributed.md records.
//
//	go run ./cmd/ratebench -rounds 7 -duration 1s
//	go run ./cmd/ratebench -addr 127.0.0.1:6399   # an existing server
//
// Without -addr it starts redis-server on a free loopback port (no
// persistence) and stops it at the end. Each round runs every cell (path x
// callers) and, within a cell, every implementation once, in an order
// that rotates from round to round, so drift and the noise of a shared
// machine fall on all of them alike and cancel in the ratios.
//
// Paths: "admitted", keys drawn uniformly from 1M, each far below its
// limit (Burst 1e9 per hour); "denied", one hot key over its limit (Burst
// 10 per hour), decided by the server each time (no deny cache: that
// would answer locally, see -impls grudge+denycache).
//
// Implementations: "grudge" (the Limiter over a rueidis client),
// "grudge-goredis" (the Limiter over the same go-redis client redis_rate
// uses), "redis_rate", and "grudge+denycache" (rueidis, DenyCacheCells
// 16384); "grudge-goredis-ap" and "redis_rate-ap" run the go-redis ones
// over go-redis's AutoPipeliner. Besides decisions/s it reports per decision the CPU time of this
// process (the client: getrusage) and of the server (INFO cpu), the
// server's time per script call (INFO commandstats usec_per_call of fcall
// or evalsha), and the p50 latency.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	grudgeredis "github.com/lfgrudge/grudge/redis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// knownImpls are the -impls names run measures, and knownPaths the -paths
// names; main rejects any other name before it starts a redis-server.
var (
	knownImpls = []string{"grudge", "grudge-goredis", "redis_rate", "grudge+denycache", "grudge-goredis-ap", "redis_rate-ap"}
	knownPaths = []string{"admitted", "denied"}
)

// atFatal holds what fatalf runs before the process exits: log.Fatal
// calls os.Exit, which skips main's deferred calls, among them the stop
// of the redis-server that main started.
var atFatal struct {
	sync.Mutex
	funcs []func()
}

// onFatal registers f to run, last registered first, when fatalf exits.
func onFatal(f func()) {
	atFatal.Lock()
	defer atFatal.Unlock()
	atFatal.funcs = append(atFatal.funcs, f)
}

// fatalf runs what onFatal registered, then log.Fatalf. Every fatal error
// after main has started something to undo goes through it, whichever
// goroutine it comes from: the lock is never released, so a second
// caller waits for the first one's exit rather than running the stops
// twice.
func fatalf(format string, v ...any) {
	atFatal.Lock()
	for i := len(atFatal.funcs) - 1; i >= 0; i-- {
		atFatal.funcs[i]()
	}
	log.Fatalf(format, v...)
}

// checkNames returns the names of list (comma-separated) and an error
// naming -name when one of them is not in known or comes twice (a
// repeated name would pool two runs a round into one cell).
func checkNames(name, list string, known []string) ([]string, error) {
	names := strings.Split(list, ",")
	for i, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("bad -%s %q: unknown name %q; want some of %s", name, list, n, strings.Join(known, ", "))
		}
		if slices.Contains(names[:i], n) {
			return nil, fmt.Errorf("bad -%s %q: %q given twice", name, list, n)
		}
	}
	return names, nil
}

type result struct {
	rate, p50us, cliCPU, srvCPU, callUs float64
	breakdown                           string
}

func main() {
	addr := flag.String("addr", "", "redis-server address; empty: start one")
	rounds := flag.Int("rounds", 7, "interleaved rounds")
	duration := flag.Duration("duration", time.Second, "time per implementation per cell per round")
	callersFlag := flag.String("callers", "1,64", "concurrent callers")
	pathsFlag := flag.String("paths", "admitted,denied", "admitted, denied")
	implsFlag := flag.String("impls", "grudge,grudge-goredis,redis_rate", "grudge, grudge-goredis, redis_rate, grudge+denycache, grudge-goredis-ap, redis_rate-ap")
	fresh := flag.Bool("fresh", true, "new clients for every run (else one set of clients for the whole benchmark: rueidis then stays in its pipelined mode once a 64-caller run has put it there, and a lone caller pays its goroutine hand-offs)")
	breakdown := flag.Bool("breakdown", false, "print, per run, the server's time per decision by command (INFO commandstats; the script's own time is its total minus the commands it ran)")
	cpuprofile := flag.String("cpuprofile", "", "write this process's CPU profile (the client side) to this file")
	flag.Parse()
	log.SetFlags(0)
	// Check the flags before starting anything: a failure later would
	// have a redis-server to stop, -rounds 0 would measure nothing and
	// summarise empty cells, an unknown -impls name would fail only
	// once the server runs, and an unknown -paths name would measure an
	// undocumented path (one hot key, burst 1e9) under that name.
	if *rounds < 1 {
		log.Fatalf("bad -rounds %d: want >= 1", *rounds)
	}
	if *duration <= 0 {
		log.Fatalf("bad -duration %v: want > 0", *duration)
	}
	paths, err := checkNames("paths", *pathsFlag, knownPaths)
	if err != nil {
		log.Fatal(err)
	}
	impls, err := checkNames("impls", *implsFlag, knownImpls)
	if err != nil {
		log.Fatal(err)
	}
	var callers []int
	for _, s := range strings.Split(*callersFlag, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			log.Fatalf("bad -callers %q", s)
		}
		callers = append(callers, n)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
		onFatal(pprof.StopCPUProfile)
	}

	// From here on a fatal error goes through fatalf, which stops the
	// server (and the profile) first, as the deferred calls would.
	if *addr == "" {
		a, stop := startServer()
		defer stop()
		onFatal(stop)
		*addr = a
	}
	ctx := context.Background()
	type clients struct {
		rc  rueidis.Client
		rdb *goredis.Client
		rr  *redis_rate.Limiter
	}
	open := func() clients {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
		if err != nil {
			fatalf("%v", err)
		}
		rdb := goredis.NewClient(&goredis.Options{Addr: *addr, PoolSize: 128, ContextTimeoutEnabled: true})
		return clients{rc, rdb, redis_rate.NewLimiter(rdb)}
	}
	shared := open()
	defer shared.rc.Close()
	defer shared.rdb.Close()
	rdb := shared.rdb

	info, _ := rdb.Info(ctx, "server").Result()
	ver, _ := field(info, "redis_version")
	up, _ := exec.Command("uptime").Output()
	fmt.Printf("ratebench: %s, GOMAXPROCS %d, %s %s/%s, redis %s, rounds %d x %v per implementation per cell, fresh clients per run: %v\n",
		time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, ver, *rounds, *duration, *fresh)
	fmt.Printf("uptime at start: %s", up)

	type cellKey struct {
		path    string
		callers int
		impl    string
	}
	res := map[cellKey][]result{}
	for r := range *rounds {
		for _, path := range paths {
			for _, c := range callers {
				for i := range impls {
					impl := impls[(i+r)%len(impls)]
					cl := shared
					if *fresh {
						cl = open()
					}
					x := run(ctx, cl.rc, cl.rdb, cl.rr, impl, path, c, r, *duration)
					if *fresh {
						cl.rc.Close()
						cl.rdb.Close()
					}
					k := cellKey{path, c, impl}
					res[k] = append(res[k], x)
					fmt.Fprintf(os.Stderr, "round %d %s callers=%d %s: %.0f decisions/s\n", r, path, c, impl, x.rate)
					if *breakdown {
						fmt.Printf("breakdown round %d %s callers=%d %s: %s\n", r, path, c, impl, x.breakdown)
					}
				}
			}
		}
	}
	up, _ = exec.Command("uptime").Output()
	fmt.Printf("uptime at end: %s\n", up)

	fmt.Println("| path | callers | impl | decisions/s median (min–max) | p50 µs | client CPU µs/op | server CPU µs/op | script µs/call |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, path := range paths {
		for _, c := range callers {
			for _, impl := range impls {
				xs := res[cellKey{path, c, impl}]
				get := func(f func(result) float64) []float64 {
					var v []float64
					for _, x := range xs {
						v = append(v, f(x))
					}
					return v
				}
				rates := get(func(x result) float64 { return x.rate })
				fmt.Printf("| %s | %d | %s | %.0f (%.0f–%.0f) | %.0f | %.1f | %.1f | %.1f |\n", path, c, impl,
					median(rates), slices.Min(rates), slices.Max(rates),
					median(get(func(x result) float64 { return x.p50us })),
					median(get(func(x result) float64 { return x.cliCPU })),
					median(get(func(x result) float64 { return x.srvCPU })),
					median(get(func(x result) float64 { return x.callUs })))
			}
		}
	}
	fmt.Println()
	fmt.Println("Ratio to redis_rate, per round (same round, same server), then the median (min–max):")
	fmt.Println()
	fmt.Println("| path | callers | impl | per round | median (min–max) |")
	fmt.Println("|---|---|---|---|---|")
	for _, path := range paths {
		for _, c := range callers {
			base := res[cellKey{path, c, "redis_rate"}]
			if base == nil {
				continue
			}
			for _, impl := range impls {
				if impl == "redis_rate" {
					continue
				}
				var ratios []float64
				var s []string
				for i, x := range res[cellKey{path, c, impl}] {
					q := x.rate / base[i].rate
					ratios = append(ratios, q)
					s = append(s, fmt.Sprintf("%.2f", q))
				}
				fmt.Printf("| %s | %d | %s | %s | **%.2f** (%.2f–%.2f) |\n", path, c, impl, strings.Join(s, " "),
					median(ratios), slices.Min(ratios), slices.Max(ratios))
			}
		}
	}
}

// run measures one implementation on one cell for d.
func run(ctx context.Context, rc rueidis.Client, rdb *goredis.Client, rr *redis_rate.Limiter,
	impl, path string, callers, round int, d time.Duration) result {
	burst := 1e9
	if path == "denied" {
		burst = 10
	}
	name := fmt.Sprintf("bench:%s:%d:%s:%d", path, callers, impl, round)
	var allow func(key string) bool
	switch impl {
	case "grudge", "grudge-goredis", "grudge-goredis-ap", "grudge+denycache":
		cfg := grudgeredis.LimiterConfig{Name: name, Limit: grudgeredis.PerSecond(burst/3600, burst)}
		if impl == "grudge+denycache" {
			cfg.DenyCacheCells = 1 << 14
		}
		var l *grudgeredis.Limiter
		var err error
		switch impl {
		case "grudge-goredis":
			l, err = grudgeredis.NewLimiterGoRedis(rdb, cfg)
		case "grudge-goredis-ap":
			var ap *goredis.AutoPipeliner
			if ap, err = rdb.AutoPipeline(); err == nil {
				defer ap.Close()
				l, err = grudgeredis.NewLimiterGoRedis(ap, cfg)
			}
		default:
			l, err = grudgeredis.NewLimiter(rc, cfg)
		}
		if err != nil {
			fatalf("%v", err)
		}
		allow = func(key string) bool {
			d, err := l.Allow(ctx, key)
			if err != nil {
				fatalf("%v", err)
			}
			return d.Allowed
		}
	case "redis_rate", "redis_rate-ap":
		lim := redis_rate.PerHour(int(burst))
		if impl == "redis_rate-ap" {
			ap, err := rdb.AutoPipeline()
			if err != nil {
				fatalf("%v", err)
			}
			defer ap.Close()
			rr = redis_rate.NewLimiter(ap)
		}
		lim.Burst = int(burst)
		allow = func(key string) bool {
			r, err := rr.Allow(ctx, name+":"+key, lim)
			if err != nil {
				fatalf("%v", err)
			}
			return r.Allowed > 0
		}
	default:
		fatalf("unknown implementation %q", impl) // main checked -impls against knownImpls
	}
	if path == "denied" {
		for range 20 {
			allow("hot")
		}
	}
	rdb.ConfigResetStat(ctx)
	srv0, cli0 := serverCPU(ctx, rdb), clientCPU()
	var stop atomic.Bool
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(round)))
			ls := make([]time.Duration, 0, 1<<14)
			for !stop.Load() {
				key := "hot"
				if path == "admitted" {
					key = "user:" + strconv.Itoa(rng.IntN(1_000_000))
				}
				t0 := time.Now()
				allow(key)
				ls = append(ls, time.Since(t0))
			}
			lat[g] = ls
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	el := time.Since(start)
	srv1, cli1 := serverCPU(ctx, rdb), clientCPU()
	all := slices.Concat(lat...)
	slices.Sort(all)
	n := float64(len(all))
	us, _ := scriptUsecPerCall(ctx, rdb)
	bd := commandBreakdown(ctx, rdb, n)
	rdb.FlushAll(ctx) // every cell starts from an empty server
	return result{
		rate:      n / el.Seconds(),
		p50us:     float64(all[len(all)/2].Nanoseconds()) / 1e3,
		cliCPU:    (cli1 - cli0).Seconds() * 1e6 / n,
		srvCPU:    (srv1 - srv0).Seconds() * 1e6 / n,
		callUs:    us,
		breakdown: bd,
	}
}

// commandBreakdown is the server's time per decision by command since the
// last CONFIG RESETSTAT (commands a script runs count under their own
// names, and in the script's total too), and the script's own time: its
// total minus theirs.
func commandBreakdown(ctx context.Context, rdb *goredis.Client, decisions float64) string {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return err.Error()
	}
	type stat struct {
		name        string
		calls, usec float64
	}
	var script stat
	var inner []stat
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		st := stat{name: strings.TrimPrefix(name, "cmdstat_")}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				st.calls = f
			case "usec":
				st.usec = f
			}
		}
		switch st.name {
		case "fcall", "evalsha", "eval":
			if st.calls > script.calls {
				script = st
			}
		case "info", "config|resetstat", "flushall":
		default:
			inner = append(inner, st)
		}
	}
	var sum float64
	var parts []string
	for _, st := range inner {
		sum += st.usec
		parts = append(parts, fmt.Sprintf("%s %.2f µs (%.1f calls)", st.name, st.usec/decisions, st.calls/decisions))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%s %.2f µs/decision = own %.2f + %s", script.name, script.usec/decisions, (script.usec-sum)/decisions, strings.Join(parts, ", "))
}

// median returns the median of v (the mean of the middle two when len(v)
// is even), NaN when v is empty, without reordering v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func field(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == name {
			return v, true
		}
	}
	return "", false
}

// serverCPU is the server's CPU time (user + sys), from INFO cpu.
func serverCPU(ctx context.Context, rdb *goredis.Client) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var sum float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, _ := field(info, k)
		f, _ := strconv.ParseFloat(v, 64)
		sum += f
	}
	return time.Duration(sum * float64(time.Second))
}

// clientCPU is this process's CPU time (user + sys).
func clientCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scriptUsecPerCall is usec_per_call of fcall or evalsha (whichever ran
// most) since the last CONFIG RESETSTAT.
func scriptUsecPerCall(ctx context.Context, rdb *goredis.Client) (float64, bool) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, false
	}
	best, us := int64(-1), 0.0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
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

// startServer runs redis-server on a free loopback port.
func startServer() (string, func()) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		log.Fatalf("redis-server not on PATH (apt-get install -y redis-server), or pass -addr: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "ratebench-")
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr, func() { cmd.Process.Kill(); cmd.Wait(); os.RemoveAll(dir) }
}
