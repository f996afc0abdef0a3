package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAudit3ReshardTwoSlotsThenAgain probes what TestReshardLimiterUnderLoad
// does not: a Limiter with Shards 3 on the cluster, two of whose shards'
// slots (A and B) are on one master and migrate to a second master at the
// same time (both slots open, their keys moved one after the other, so
// for a while A's key answers ASK while B's is still served by the
// source); then slot A moves again, to the third master, whose Redis
// Functions were flushed just before its key arrives: calls that follow
// the ASK there get "Function not found", which the doc says makes the
// sketch load the library on every node and call once more ("a fresh
// server, one restarted without persistence, or a cluster node the slot
// just moved to"). 4 instances (rueidis and go-redis, one with the deny
// cache) x 3 goroutines call Allow on 128 keys (Burst 20, Rate 1e-6)
// throughout (the test waits at every step of the moves for the server
// to answer more calls on the moving shards, then fills what is left).
// Promised: "Every operation is one function call: atomic
// ... Sketch.TryUpdate racing from N clients admits exactly the limit (no
// decay)", MIGRATE never meets BUSYKEY: no key is ever admitted more
// than Burst times, every key ends at exactly Burst, no call fails, and
// the server answers calls on the moving shards at every step.
func TestAudit3ReshardTwoSlotsThenAgain(t *testing.T) {
	// Registered first, so it runs last, after the clients are closed:
	// rueidis answers MOVED with a topology refresh delayed by up to a
	// second (singleflight DelayDo), a goroutine TestMain's goleak would
	// report; wait for those to finish.
	t.Cleanup(audit3WaitDelayedRefresh)
	e := newEnv(t, "rueidis", "cluster")
	c := e.cluster
	var src, dst, third *testServer
	best := -1
	for _, n := range c.nodes {
		if s := slotsOf(t, c, n); len(s) > best {
			best, src = len(s), n
		}
	}
	for _, n := range c.nodes {
		if n == src {
			continue
		}
		if dst == nil {
			dst = n
		} else {
			third = n
		}
	}
	// A name two of whose shards (sa, sb) are in two slots of src and
	// whose other shard is not on third. (The slots of "{x:0}", "{x:1}",
	// "{x:2}" differ by fixed XORs, CRC16 being linear, so not every pair
	// can share a master's range.)
	shardKey := func(name string, s int) string { return "{" + name + ":" + strconv.Itoa(s) + "}:g" }
	owner := map[int]*testServer{}
	for _, n := range c.nodes {
		for _, s := range slotsOf(t, c, n) {
			owner[s] = n
		}
	}
	var name string
	var sa, sb, slotA, slotB int
search:
	for i := 0; i < 1_000_000; i++ {
		cand := e.ns("audit3:rs:" + strconv.Itoa(i))
		for _, p := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 2, 0}} {
			a, b := keySlot(shardKey(cand, p[0])), keySlot(shardKey(cand, p[1]))
			if a != b && owner[a] == src && owner[b] == src && owner[keySlot(shardKey(cand, p[2]))] != third {
				name, sa, sb, slotA, slotB = cand, p[0], p[1], a, b
				break search
			}
		}
	}
	if name == "" {
		t.Fatal("no sketch name with two shards on one master")
	}
	// On a failure mid-move, leave no slot half-open on the shared cluster.
	t.Cleanup(func() {
		for _, s := range []int{slotA, slotB} {
			for _, n := range c.nodes {
				rawDo(n.addr(), "CLUSTER", "SETSLOT", strconv.Itoa(s), "STABLE")
			}
		}
	})
	const keys, burst = 128, 20
	ls := audit3Instances(t, e, 4, LimiterConfig{Name: name, Limit: PerSecond(1e-6, burst), Shards: 3, CellsPerLevel: 4096})
	sk := ls[0].Sketch()
	// Which shard holds each key (the sketch's own mapping), only to
	// count the calls and admissions per shard.
	shardOf := make([]int, keys)
	for k := range keys {
		shardOf[k] = sk.shard(sk.hasher.Sum64String(strconv.Itoa(k)))
	}
	var counts [keys]atomic.Int64
	var perShard [3]atomic.Int64 // admissions
	var answered [3]atomic.Int64 // server decisions (instances without the deny cache)
	var total, calls atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	ctx := context.Background()
	for i, l := range ls {
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(g)+7))
				for !stop.Load() {
					k := rng.IntN(keys)
					d, err := l.Allow(ctx, strconv.Itoa(k))
					calls.Add(1)
					if err != nil {
						t.Errorf("Allow: %v", err)
						return
					}
					if i < 2 {
						answered[shardOf[k]].Add(1)
					}
					if d.Allowed {
						total.Add(1)
						perShard[shardOf[k]].Add(1)
						if n := counts[k].Add(1); n > burst {
							t.Errorf("key %d admitted %d times; Burst is %d", k, n, burst)
						}
					}
					time.Sleep(200 * time.Microsecond)
				}
			}()
		}
	}
	// hook waits, at a step of a move, for the server to answer more
	// calls on the given shards, and notes the admissions meanwhile.
	var during []int64 // admissions on the shard at each step
	hook := func(what string, shards ...int) {
		t.Helper()
		for _, s := range shards {
			n, a := answered[s].Load(), perShard[s].Load()
			deadline := time.Now().Add(20 * time.Second)
			for answered[s].Load() < n+20 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if answered[s].Load() < n+20 {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				probe := slices.Index(shardOf, s)
				d, err := ls[0].AllowN(cctx, strconv.Itoa(probe), 0)
				cancel()
				t.Fatalf("no calls answered on shard %d at %s; a probe AllowN(0) = %+v, %v", s, what, d, err)
			}
			during = append(during, perShard[s].Load()-a)
		}
	}
	waitFor(t, 20*time.Second, "an eighth of the capacity used", func() bool { return total.Load() >= keys*burst/8 })

	// Move 1: slots A and B together, src -> dst.
	srcID, dstID := nodeID(t, src), nodeID(t, dst)
	for _, s := range []int{slotA, slotB} {
		ss := strconv.Itoa(s)
		if r, err := rawDo(dst.addr(), "CLUSTER", "SETSLOT", ss, "IMPORTING", srcID); err != nil || r != "OK" {
			t.Fatalf("IMPORTING %d: %v %v", s, r, err)
		}
		if r, err := rawDo(src.addr(), "CLUSTER", "SETSLOT", ss, "MIGRATING", dstID); err != nil || r != "OK" {
			t.Fatalf("MIGRATING %d: %v %v", s, r, err)
		}
	}
	hook("both slots open", sa, sb)
	for _, k := range []string{shardKey(name, sa), shardKey(name, sb)} {
		r, err := rawDo(src.addr(), "MIGRATE", "127.0.0.1", strconv.Itoa(dst.port), k, "0", "5000")
		if err != nil || r != "OK" {
			t.Fatalf("MIGRATE %s = %v, %v; want OK (no BUSYKEY)", k, r, err)
		}
		hook(fmt.Sprintf("key %s moved (ASK)", k), sa, sb)
	}
	for _, s := range []int{slotA, slotB} {
		for _, n := range append([]*testServer{dst, src}, c.nodes...) {
			if r, err := rawDo(n.addr(), "CLUSTER", "SETSLOT", strconv.Itoa(s), "NODE", dstID); err != nil || r != "OK" {
				t.Fatalf("SETSLOT %d NODE on %s = %v, %v", s, n.addr(), r, err)
			}
		}
	}
	if err := c.waitConsistent(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	hook("after move 1", sa, sb)
	checkMoved(t, slotA, []string{shardKey(name, sa)}, src, dst)
	checkMoved(t, slotB, []string{shardKey(name, sb)}, src, dst)

	// Move 2: slot A again, dst -> third, whose functions are flushed
	// once the slot is open and before its key arrives.
	var flushed bool
	moveBySetslot(t, c, slotA, dst, third, func(step int, key string) {
		if step == 0 {
			if r, err := rawDo(third.addr(), "FUNCTION", "FLUSH", "SYNC"); err != nil || r != "OK" {
				t.Fatalf("FUNCTION FLUSH on the target: %v %v", r, err)
			}
			flushed = true
		}
		hook(fmt.Sprintf("step %d of move 2", step), sa)
	})
	if !flushed {
		t.Fatal("move 2 never opened the slot")
	}
	if lib, err := rawDo(third.addr(), "FUNCTION", "LIST"); err != nil || len(lib.([]any)) == 0 {
		t.Fatalf("after move 2, FUNCTION LIST on the new owner = %v, %v; want the library loaded again", lib, err)
	}
	checkMoved(t, slotA, []string{shardKey(name, sa)}, dst, third)

	stop.Store(true)
	wg.Wait()
	// Fill what the load left, round-robin over the instances.
	for k := range keys {
		for i := 0; ; i++ {
			d, err := ls[i%len(ls)].Allow(ctx, strconv.Itoa(k))
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
			total.Add(1)
			counts[k].Add(1)
			if i > 2*burst {
				t.Fatalf("key %d: the tail never ends", k)
			}
		}
	}
	if got := total.Load(); got != keys*burst {
		t.Fatalf("admitted %d in all; want exactly %d", got, keys*burst)
	}
	for k := range counts {
		if got := counts[k].Load(); got != burst {
			t.Fatalf("key %d admitted %d; want exactly %d", k, got, burst)
		}
	}
	for i, l := range ls {
		if st := l.Stats(); st.ServerErrors != 0 {
			t.Fatalf("instance %d stats %+v: calls failed", i, st)
		}
	}
	for k := range keys {
		debt, err := sk.Query(ctx, strconv.Itoa(k))
		if err != nil || debt < burst-0.1 {
			t.Fatalf("after the moves, key %d's debt = %v, %v; want about %d", k, debt, err, burst)
		}
	}
	t.Logf("%d calls; slots A %d, B %d; admissions on the moving shards at each step: %v", calls.Load(), slotA, slotB, during)
}

// audit3WaitDelayedRefresh waits (3 s at most) until no rueidis delayed
// cluster refresh goroutine is left.
func audit3WaitDelayedRefresh() {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "rueidis.(*call).DelayDo") {
			return
		}
	}
}
