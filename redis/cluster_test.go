package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Resharding under load, on the shared 3-master cluster: the sketch's
// slot moves from one master to another while instances keep deciding,
// both by hand (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE key by key,
// SETSLOT NODE) and with redis-cli --cluster reshard. Because every call
// declares every key it touches, the source serves the calls while it
// holds the keys, answers ASK (or TRYAGAIN while a rotating sketch's keys
// are split) once they moved, and the target serves them with ASKING:
// admission stays exact throughout, MIGRATE never meets BUSYKEY, and the
// state arrives whole.

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slotsOf returns the slots node owns, ascending, by CLUSTER SLOTS.
func slotsOf(t testing.TB, c *testCluster, n *testServer) []int {
	t.Helper()
	r, err := rawDo(n.addr(), "CLUSTER", "SLOTS")
	if err != nil {
		t.Fatal(err)
	}
	var slots []int
	for _, row := range r.([]any) {
		f := row.([]any)
		if f[2].([]any)[1].(int64) == int64(n.port) {
			for s := f[0].(int64); s <= f[1].(int64); s++ {
				slots = append(slots, int(s))
			}
		}
	}
	sortInts(slots)
	return slots
}

func sortInts(s []int) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// nameForSlot returns a sketch name, starting with prefix, whose hash tag
// {name} falls in slot.
func nameForSlot(t testing.TB, prefix string, slot int) string {
	t.Helper()
	for i := 0; ; i++ {
		name := prefix + ":" + strconv.Itoa(i)
		if keySlot("{"+name+"}") == slot {
			return name
		}
	}
}

// move describes one way of moving a slot: it moves slot from src to dst
// and calls hook at its steps (0: the slot is open, nothing moved; i: the
// i-th key moved, key; -1: the move is complete), where the test checks
// that decisions go on. redis-cli has no steps: hook(-1, "") only.
type move struct {
	name string
	run  func(t *testing.T, c *testCluster, slot int, src, dst *testServer, hook func(step int, key string))
}

var moves = []move{{"setslot+migrate", moveBySetslot}, {"redis-cli-reshard", moveByRedisCLI}}

// moveBySetslot: CLUSTER SETSLOT slot IMPORTING on dst, MIGRATING on src,
// MIGRATE of each key alone (so a rotating sketch's keys are split for a
// while), then SETSLOT slot NODE dst on every node.
func moveBySetslot(t *testing.T, c *testCluster, slot int, src, dst *testServer, hook func(step int, key string)) {
	srcID, dstID := nodeID(t, src), nodeID(t, dst)
	s := strconv.Itoa(slot)
	for _, cmd := range []struct {
		n    *testServer
		args []string
	}{{dst, []string{"CLUSTER", "SETSLOT", s, "IMPORTING", srcID}}, {src, []string{"CLUSTER", "SETSLOT", s, "MIGRATING", dstID}}} {
		if r, err := rawDo(cmd.n.addr(), cmd.args...); err != nil || r != "OK" {
			t.Fatalf("%v on %s = %v, %v", cmd.args, cmd.n.addr(), r, err)
		}
	}
	hook(0, "")
	moved := 0
	for {
		r, err := rawDo(src.addr(), "CLUSTER", "GETKEYSINSLOT", s, "100")
		if err != nil {
			t.Fatal(err)
		}
		keys := r.([]any)
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			r, err := rawDo(src.addr(), "MIGRATE", "127.0.0.1", strconv.Itoa(dst.port), k.(string), "0", "5000")
			if err != nil || r != "OK" {
				t.Fatalf("MIGRATE %s = %v, %v; want OK (no BUSYKEY)", k, r, err)
			}
			moved++
			hook(moved, k.(string))
		}
	}
	for _, n := range append([]*testServer{dst, src}, c.nodes...) {
		if r, err := rawDo(n.addr(), "CLUSTER", "SETSLOT", s, "NODE", dstID); err != nil || r != "OK" {
			t.Fatalf("SETSLOT %s NODE on %s = %v, %v", s, n.addr(), r, err)
		}
	}
	if err := c.waitConsistent(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	hook(-1, "")
}

// moveByRedisCLI: redis-cli --cluster reshard of one slot from src to
// dst, which moves src's lowest slot (the test chose the sketch's name so
// that it is).
func moveByRedisCLI(t *testing.T, c *testCluster, slot int, src, dst *testServer, hook func(step int, key string)) {
	if got := slotsOf(t, c, src)[0]; got != slot {
		t.Fatalf("redis-cli moves the lowest slot of the source, %d; the sketch is in %d", got, slot)
	}
	out, err := exec.Command(lookTool(t, "redis-cli"), "--cluster", "reshard", src.addr(),
		"--cluster-from", nodeID(t, src), "--cluster-to", nodeID(t, dst), "--cluster-slots", "1",
		"--cluster-yes").CombinedOutput()
	if err != nil || strings.Contains(string(out), "BUSYKEY") || strings.Contains(string(out), "[ERR]") {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	if err := c.waitConsistent(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	hook(-1, "")
}

// pickMove chooses the source (the owner of the most slots) and the
// target, and the slot to move: the source's lowest, which redis-cli
// reshard takes.
func pickMove(t testing.TB, c *testCluster) (slot int, src, dst *testServer) {
	best := -1
	for _, n := range c.nodes {
		if s := slotsOf(t, c, n); len(s) > best {
			best, src = len(s), n
		}
	}
	for _, n := range c.nodes {
		if n != src {
			dst = n
			break
		}
	}
	return slotsOf(t, c, src)[0], src, dst
}

// checkMoved: the sketch's keys are on dst and slot holds no key on src.
func checkMoved(t *testing.T, slot int, keys []string, src, dst *testServer) {
	t.Helper()
	for _, k := range keys {
		if n, err := rawDo(dst.addr(), "EXISTS", k); err != nil || n != int64(1) {
			t.Fatalf("after the move, EXISTS %s on the target = %v, %v; want 1", k, n, err)
		}
	}
	if n, err := rawDo(src.addr(), "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)); err != nil || n != int64(0) {
		t.Fatalf("after the move, the source holds %v keys of slot %d (%v); want 0", n, slot, err)
	}
}

// TestReshardLimiterUnderLoad: 3 instances x 4 goroutines call Allow on
// 256 keys (Burst 20, no refill to speak of) while the limiter's slot
// moves. No key is ever admitted more than Burst times (checked at each
// admission), every key ends at exactly Burst, no call fails, admissions
// happen in every state of the move (source, ASK to the target, after),
// and the debts are on the target, whole.
func TestReshardLimiterUnderLoad(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		for _, mv := range moves {
			t.Run(lib+"/"+mv.name, func(t *testing.T) {
				e := newEnv(t, lib, "cluster")
				c := e.cluster
				slot, src, dst := pickMove(t, c)
				name := nameForSlot(t, e.ns("reshard"), slot)
				const keys, burst, instances, perInstance = 256, 20, 3, 4
				var counts [keys]atomic.Int64
				var total, calls atomic.Int64
				var stop atomic.Bool
				var wg sync.WaitGroup
				defer func() { stop.Store(true); wg.Wait() }()
				var ls []*Limiter
				for range instances {
					ls = append(ls, e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(1e-4, burst), CellsPerLevel: 4096}))
				}
				for i, l := range ls {
					for g := range perInstance {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
							for !stop.Load() {
								k := rng.IntN(keys)
								d, err := l.Allow(context.Background(), strconv.Itoa(k))
								calls.Add(1)
								if err != nil {
									t.Errorf("Allow: %v", err)
									return
								}
								if d.Allowed {
									total.Add(1)
									if n := counts[k].Add(1); n > burst {
										t.Errorf("key %d admitted %d times; Burst is %d", k, n, burst)
									}
								}
								time.Sleep(200 * time.Microsecond)
							}
						}()
					}
				}
				waitFor(t, 20*time.Second, "a third of the capacity used", func() bool { return total.Load() >= keys*burst/3 })
				var during []int64
				mv.run(t, c, slot, src, dst, func(step int, _ string) {
					// Decisions go on at each step of the move: wait for 20
					// more admissions.
					n := total.Load()
					waitFor(t, 20*time.Second, fmt.Sprintf("admissions at step %d of the move", step), func() bool { return total.Load() >= n+20 })
					during = append(during, total.Load()-n)
				})
				if got := c.owner(t, slot); got != dst {
					t.Fatalf("slot %d is on %s after the move; want %s", slot, got.addr(), dst.addr())
				}
				waitFor(t, 30*time.Second, "every key at its Burst", func() bool { return total.Load() >= keys*burst })
				n := calls.Load()
				waitFor(t, 10*time.Second, "more denied calls", func() bool { return calls.Load() >= n+500 })
				stop.Store(true)
				wg.Wait()
				if got := total.Load(); got != keys*burst {
					t.Fatalf("admitted %d in all; want exactly %d", got, keys*burst)
				}
				for k := range counts {
					if got := counts[k].Load(); got != burst {
						t.Fatalf("key %d admitted %d; want exactly %d", k, got, burst)
					}
				}
				for _, l := range ls {
					if st := l.Stats(); st.ServerErrors != 0 {
						t.Fatalf("stats %+v: calls failed", st)
					}
				}
				checkMoved(t, slot, ls[0].Sketch().Keys(), src, dst)
				for k := range keys {
					debt, err := ls[0].debtTokens(context.Background(), strconv.Itoa(k))
					if err != nil || debt < burst-0.1 {
						t.Fatalf("after the move, key %d's debt = %v, %v; want about %d", k, debt, err, burst)
					}
				}
				t.Logf("%d calls; admissions during the move's steps %v", calls.Load(), during)
			})
		}
	}
}

// TestReshardRotationUnderLoad: a rotating sketch (Period 1 s on a fake
// clock, Generations 2: two keys) under TryUpdate(k, 1, 10) from 3
// instances, its slot moved while the clock crosses two period
// boundaries: the first rotation while the keys are split (one moved, one
// not: the calls get TRYAGAIN and wait) or, with redis-cli, whenever it
// falls. Phase by phase: period p admits exactly 10 per key; period p+1
// reads generation p, full, and admits none; period p+2 reads generation
// p+1, empty, and admits exactly 10 more per key; no call fails, no key
// ever exceeds its phase's bound, and both generation keys end on the
// target with the state a query expects.
func TestReshardRotationUnderLoad(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		for _, mv := range moves {
			t.Run(lib+"/"+mv.name, func(t *testing.T) {
				e := newEnv(t, lib, "cluster")
				c := e.cluster
				slot, src, dst := pickMove(t, c)
				name := nameForSlot(t, e.ns("reshard-rot"), slot)
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000_500) // mid-period
				const keys, limit, instances, perInstance = 64, 10, 3, 4
				var counts [keys]atomic.Int64
				var bound atomic.Int64
				bound.Store(limit)
				var total, calls atomic.Int64
				var stop atomic.Bool
				var wg sync.WaitGroup
				defer func() { stop.Store(true); wg.Wait() }()
				var ss []*Sketch
				for range instances {
					ss = append(ss, e.sketch(t, Config{Name: name, Levels: 3, CellsPerLevel: 4096, Hi: 1e6,
						Period: time.Second, Generations: 2, Clock: clk}))
				}
				for i, s := range ss {
					for g := range perInstance {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
							for !stop.Load() {
								k := rng.IntN(keys)
								ok, err := s.TryUpdate(context.Background(), strconv.Itoa(k), 1, limit)
								calls.Add(1)
								if err != nil {
									t.Errorf("TryUpdate: %v", err)
									return
								}
								if ok {
									total.Add(1)
									if n, b := counts[k].Add(1), bound.Load(); n > b {
										t.Errorf("key %d admitted %d times; the bound now is %d", k, n, b)
									}
								}
								time.Sleep(200 * time.Microsecond)
							}
						}()
					}
				}
				waitFor(t, 20*time.Second, "period p full", func() bool { return total.Load() >= keys*limit })
				// Period p+1: generation p is read, full: nothing is admitted.
				rotate := func() {
					clk.Advance(time.Second)
				}
				var atP1 int64
				rotated := false
				mine := ss[0].Keys()
				mv.run(t, c, slot, src, dst, func(step int, key string) {
					n := calls.Load()
					split := !rotated && slices.Contains(mine, key)
					if split || (step == -1 && !rotated) {
						// The first of the sketch's two keys moved (they are
						// split: calls get TRYAGAIN and wait): rotate now.
						// redis-cli has no steps: rotate at its end.
						atP1, rotated = total.Load(), true
						rotate()
					}
					if !split {
						waitFor(t, 20*time.Second, fmt.Sprintf("calls at step %d of the move", step), func() bool { return calls.Load() >= n+50 })
					}
				})
				if got := total.Load(); got != atP1 {
					t.Fatalf("period p+1 admitted %d; want 0 (generation p is full)", got-atP1)
				}
				// Period p+2: generation p+1 is read, empty: 10 more per key.
				bound.Store(2 * limit)
				rotate()
				waitFor(t, 30*time.Second, "period p+2 full", func() bool { return total.Load() >= 2*keys*limit })
				n := calls.Load()
				waitFor(t, 10*time.Second, "more denied calls", func() bool { return calls.Load() >= n+500 })
				stop.Store(true)
				wg.Wait()
				if got := total.Load(); got != 2*keys*limit {
					t.Fatalf("admitted %d in all; want exactly %d", got, 2*keys*limit)
				}
				for k := range counts {
					if got := counts[k].Load(); got != 2*limit {
						t.Fatalf("key %d admitted %d; want exactly %d", k, got, 2*limit)
					}
				}
				if got := c.owner(t, slot); got != dst {
					t.Fatalf("slot %d is on %s after the move; want %s", slot, got.addr(), dst.addr())
				}
				checkMoved(t, slot, ss[0].Keys(), src, dst)
				for k := range keys {
					got, err := ss[0].Query(context.Background(), strconv.Itoa(k))
					if err != nil || got != limit {
						t.Fatalf("after the move, Query(%d) = %v, %v; want %d (generation p+1)", k, got, err, limit)
					}
				}
				t.Logf("%d calls", calls.Load())
			})
		}
	}
}

// TestKeySlot: the test's CRC16 agrees with the server's CLUSTER KEYSLOT.
func TestKeySlot(t *testing.T) {
	c := sharedCluster(t)
	for _, k := range []string{"", "a", "{a}:g", "{rl:3}:g:1", "foo{bar}{zap}", "{}x", "x{}y", "user:1000"} {
		r, err := rawDo(c.nodes[0].addr(), "CLUSTER", "KEYSLOT", k)
		if err != nil || r != int64(keySlot(k)) {
			t.Fatalf("CLUSTER KEYSLOT %q = %v, %v; keySlot says %d", k, r, err, keySlot(k))
		}
	}
}
