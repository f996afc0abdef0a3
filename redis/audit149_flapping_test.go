package redis

// Audit 149: the LocalFallback policy under faults that come and go.
// docs/distributed.md, Failure policies: "Faults that come and go add up
// the same way: each is a token bucket on its own, the server's at Rate
// and Burst, each fallback at Rate/N and Burst/N (its state kept between
// faults), so over any span T the server admits at most Rate x T + Burst
// and the N fallbacks together at most as much again: at most twice the
// rate, plus two Bursts, however the faults fall (the bound is reached
// only where the fallbacks' share is spent while the server's is, as in
// the instant above)."
//
// The faults are made deterministic by a gate between each Limiter and
// its (real) client: while it is shut every FCALL fails at once, before
// anything is sent (a refused connection), and the server keeps its
// state; one test also cuts a real TCP proxy. Every Limiter of a run
// shares one sketchtest.FakeClock (LimiterConfig.Clock: the server's
// time and the local sketches'), moved 1 ms per step.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// a149Gate is a conn that a test can shut: shut, every FCALL fails at
// once with errA149Cut (a network error, not a server reply) and nothing
// reaches the server; open, it passes every call to the real client.
type a149Gate struct {
	conn
	down atomic.Bool
	sent atomic.Int64 // FCALLs passed to the server
}

var errA149Cut = errors.New("a149: connection refused (gate shut)")

func (g *a149Gate) fcall(ctx context.Context, fn string, keys, args []string) (string, error) {
	if g.down.Load() {
		return "", errA149Cut
	}
	g.sent.Add(1)
	return g.conn.fcall(ctx, fn, keys, args)
}

func (g *a149Gate) fcallStrings(ctx context.Context, fn string, keys, args []string) ([]string, error) {
	if g.down.Load() {
		return nil, errA149Cut
	}
	g.sent.Add(1)
	return g.conn.fcallStrings(ctx, fn, keys, args)
}

// a149Rig is N LocalFallback instances (Instances: N, each its own
// client and gate) of one limit on one server, on one fake clock.
type a149Rig struct {
	srv   *testServer
	lim   Limit
	n     int
	clk   *sketchtest.FakeClock
	ls    []*Limiter
	gates []*a149Gate
	step  int64 // ms the clock moves per step: 1 unless a test says
}

// a149NewRig makes the rig; cells and fbCells are the server's
// CellsPerLevel and the FallbackCells (1 and 1: every key shares every
// cell, on the server and in each fallback).
func a149NewRig(t *testing.T, srv *testServer, lib, name string, lim Limit, n int, cells, fbCells uint32) *a149Rig {
	t.Helper()
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	r := &a149Rig{srv: srv, lim: lim, n: n, clk: clk, step: 1}
	cfg := LimiterConfig{Name: name, Limit: lim, Policy: LocalFallback, Instances: uint32(n),
		CellsPerLevel: cells, FallbackCells: fbCells, Timeout: 10 * time.Second, Clock: clk}
	for range n {
		var c conn
		switch lib {
		case "rueidis":
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true})
			if err != nil {
				t.Fatalf("rueidis.NewClient: %v", err)
			}
			t.Cleanup(rc.Close)
			c = rueidisConn{rc}
		default:
			gc := goredis.NewClient(&goredis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { gc.Close() })
			var err error
			if c, err = newGoredisConn(gc); err != nil {
				t.Fatal(err)
			}
		}
		g := &a149Gate{conn: c}
		l, err := newLimiter(g, cfg)
		if err != nil {
			t.Fatalf("newLimiter: %v", err)
		}
		r.ls = append(r.ls, l)
		r.gates = append(r.gates, g)
	}
	return r
}

// a149Log is what a run admitted, in half tokens per ms step: srv[k][ms]
// by the server, fb[k][i][ms] by instance i's fallback.
type a149Log struct {
	keys []string
	srv  [][]int64
	fb   [][][]int64
}

// a149Sched says whether instance i's gate is shut at step ms, sub-step
// sub.
type a149Sched func(ms, sub, i int) bool

// run makes steps ms steps of subs sub-steps each: at each sub-step every
// instance, with its gate as sched says, asks for n tokens of each key
// until it is denied (so a bucket with room is spent at that instant);
// then the clock moves 1 ms. It checks each decision's source (no error
// with the gate open, ErrDegraded wrapping errA149Cut with it shut) and
// each instance's Degraded() and DegradedPeriod count.
func (r *a149Rig) run(t *testing.T, steps, subs int, keys []string, n float64, sched a149Sched) *a149Log {
	t.Helper()
	ctx := context.Background()
	lg := &a149Log{keys: keys}
	for range keys {
		lg.srv = append(lg.srv, make([]int64, steps))
		fb := make([][]int64, r.n)
		for i := range fb {
			fb[i] = make([]int64, steps)
		}
		lg.fb = append(lg.fb, fb)
	}
	half := int64(2 * n)
	periods := make([]int64, r.n)
	wasDown := make([]bool, r.n)
	for i, l := range r.ls {
		periods[i] = l.Stats().DegradedPeriod
		wasDown[i] = l.Degraded()
	}
	maxTries := int(2*r.lim.Burst/n) + 4
	for ms := range steps {
		for sub := range subs {
			for i, l := range r.ls {
				down := sched(ms, sub, i)
				r.gates[i].down.Store(down)
				if down && !wasDown[i] {
					periods[i]++
				}
				wasDown[i] = down
				for k, key := range keys {
					for try := 0; ; try++ {
						if try > maxTries {
							t.Fatalf("ms %d instance %d key %q: %d requests of %v admitted at one instant (Burst %v)", ms, i, key, try, n, r.lim.Burst)
						}
						d, err := l.AllowN(ctx, key, n)
						if down {
							if !errors.Is(err, ErrDegraded) || !errors.Is(err, errA149Cut) {
								t.Fatalf("ms %d instance %d (gate shut): %+v, %v; want ErrDegraded wrapping the cut", ms, i, d, err)
							}
						} else if err != nil {
							t.Fatalf("ms %d instance %d (gate open): %+v, %v", ms, i, d, err)
						}
						if !d.Allowed {
							break
						}
						if down {
							lg.fb[k][i][ms] += half
						} else {
							lg.srv[k][ms] += half
						}
					}
				}
				if l.Degraded() != down {
					t.Fatalf("ms %d instance %d: Degraded() = %v with the gate shut = %v", ms, i, l.Degraded(), down)
				}
			}
		}
		r.clk.Advance(time.Duration(r.step) * time.Millisecond)
	}
	for i, l := range r.ls {
		if got := l.Stats().DegradedPeriod; got != periods[i] {
			t.Errorf("instance %d: Stats().DegradedPeriod = %d; the schedule shut its gate %d times", i, got, periods[i])
		}
	}
	return lg
}

// a149Worst returns the most that sum(h[a..b])/2 (tokens) exceeds rate x
// (b-a) x step/1000 by, over every window a <= b of the series (steps of
// step ms), exactly, with a window that gives it.
func a149Worst(h []int64, rate *big.Rat, step int64) (worst *big.Rat, wa, wb int) {
	perMs := new(big.Rat).Quo(rate, big.NewRat(1000, step))
	// excess(a, b) = P[b+1]/2 - perMs x b + (perMs x a - P[a]/2).
	var bestA *big.Rat
	bestAIdx := 0
	prefix := int64(0) // P[b] before adding h[b]
	for b := range h {
		va := new(big.Rat).Mul(perMs, big.NewRat(int64(b), 1))
		va.Sub(va, big.NewRat(prefix, 2))
		if bestA == nil || va.Cmp(bestA) > 0 {
			bestA, bestAIdx = va, b
		}
		prefix += h[b]
		e := new(big.Rat).Mul(perMs, big.NewRat(int64(b), 1))
		e.Sub(big.NewRat(prefix, 2), e)
		e.Add(e, bestA)
		if worst == nil || e.Cmp(worst) > 0 {
			worst, wa, wb = e, bestAIdx, b
		}
	}
	return worst, wa, wb
}

// a149Sum adds series.
func a149Sum(ss ...[]int64) []int64 {
	out := make([]int64, len(ss[0]))
	for _, s := range ss {
		for i, v := range s {
			out[i] += v
		}
	}
	return out
}

func a149Rat(f float64) *big.Rat { return new(big.Rat).SetFloat64(f) }

// a149Worsts is the worst excess over every window of one series of
// admissions (a key's, or the union of keys that share all cells).
type a149Worsts struct {
	srv, fbAll, total *big.Rat   // the server's over Rate; the fallbacks' together over Rate; both over 2 x Rate
	fb                []*big.Rat // each fallback's over Rate/N
	adm               int64      // half tokens admitted in all
}

// check checks the docs' bounds on the series srv and fb (per instance)
// and returns the worst excesses.
func (r *a149Rig) check(t *testing.T, what string, srv []int64, fb [][]int64) a149Worsts {
	t.Helper()
	R, B, N := a149Rat(r.lim.Rate), a149Rat(r.lim.Burst), big.NewRat(int64(r.n), 1)
	var w a149Worsts
	var a, b int
	w.srv, a, b = a149Worst(srv, R, r.step)
	if w.srv.Cmp(B) > 0 {
		t.Errorf("%s: the server admitted %s tokens more than Rate x T over steps %d..%d; the docs' bound is Burst %v",
			what, w.srv.FloatString(4), a, b, r.lim.Burst)
	}
	fbB := new(big.Rat).Quo(B, N)
	fbR := new(big.Rat).Quo(R, N)
	for i := range fb {
		e, a, b := a149Worst(fb[i], fbR, r.step)
		w.fb = append(w.fb, e)
		if e.Cmp(fbB) > 0 {
			t.Errorf("%s: fallback %d admitted %s tokens more than Rate/N x T over steps %d..%d; its bound is Burst/N %s",
				what, i, e.FloatString(4), a, b, fbB.FloatString(4))
		}
	}
	all := a149Sum(fb...)
	w.fbAll, a, b = a149Worst(all, R, r.step)
	if w.fbAll.Cmp(B) > 0 {
		t.Errorf("%s: the %d fallbacks together admitted %s tokens more than Rate x T over steps %d..%d; the docs' bound is Burst %v",
			what, r.n, w.fbAll.FloatString(4), a, b, r.lim.Burst)
	}
	tot := a149Sum(srv, all)
	w.total, a, b = a149Worst(tot, new(big.Rat).Mul(R, big.NewRat(2, 1)), r.step)
	if w.total.Cmp(new(big.Rat).Mul(B, big.NewRat(2, 1))) > 0 {
		t.Errorf("%s: server and fallbacks together admitted %s tokens more than 2 x Rate x T over steps %d..%d; the docs' bound is 2 x Burst %v",
			what, w.total.FloatString(4), a, b, 2*r.lim.Burst)
	}
	for _, v := range tot {
		w.adm += v
	}
	return w
}

// a149Schedules are the fault schedules of the bound test, for N
// instances over steps ms of 2 sub-steps.
func a149Schedules(n, steps int, seed uint64) []struct {
	name  string
	sched a149Sched
} {
	rng := rand.New(rand.NewPCG(149, seed))
	// random per-instance faults: each instance's gate flips with
	// probability 1/20 at each sub-step, independently.
	rnd := make([][2]bool, steps*n)
	state := make([]bool, n)
	for ms := range steps {
		for sub := range 2 {
			for i := range n {
				if rng.IntN(20) == 0 {
					state[i] = !state[i]
				}
				rnd[ms*n+i][sub] = state[i]
			}
		}
	}
	// random common faults: runs of 1..300 ms up or down, flips also
	// mid-ms.
	common := make([][2]bool, steps)
	cur, left := false, 0
	for ms := range steps {
		for sub := range 2 {
			if left == 0 {
				cur, left = !cur, 1+rng.IntN(600)
			}
			left--
			common[ms][sub] = cur
		}
	}
	return []struct {
		name  string
		sched a149Sched
	}{
		{"never", func(int, int, int) bool { return false }},
		{"always", func(int, int, int) bool { return true }},
		// The adversary: the server's room is spent, then the gate shuts
		// within the same ms and the fallbacks' is, every ms.
		{"instant", func(_, sub, _ int) bool { return sub == 1 }},
		{"period150", func(ms, _, _ int) bool { return ms/150%2 == 1 }},
		{"randomCommon", func(ms, sub, _ int) bool { return common[ms][sub] }},
		{"randomPerInstance", func(ms, sub, i int) bool { return rnd[ms*n+i][sub] }},
	}
}

// TestAudit149FlappingBound: N = 1, 2, 3 instances (rueidis; go-redis
// for N = 2 under the adversary and random per-instance faults), 20/s x
// 6 (exact units on the server; the fallbacks at 20/N per s x 6/N count
// tokens), a hot key and two more, every key sharing every cell
// (CellsPerLevel 1, FallbackCells 1: they collide on the server and in
// each fallback, so the three are one bucket there), 1200 fake ms (300
// with -short) of 2 sub-steps, each instance asking (1 token at a time,
// until denied) for every key at every sub-step, under six fault
// schedules: never, always, the adversary (gate open in the first
// sub-step of every ms, shut in the second), a 150 ms period, random
// common runs and random per-instance flips. Over every window a..b
// (ms, T = b-a), for each key and for the union of the keys:
//   - the server admits at most Rate x T + Burst,
//   - each fallback at most Rate/N x T + Burst/N,
//   - the fallbacks together at most Rate x T + Burst,
//   - all of them at most 2 x (Rate x T + Burst) (a finding if not);
//
// without faults, or with the server always down, the total stays within
// Rate x T + Burst; the adversary reaches 2 x Burst (the bound) at one
// instant, and over the whole run close to twice the rate (what "at most
// twice the rate" allows, reached).
func TestAudit149FlappingBound(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	lim := PerSecond(20, 6)
	steps := 1200
	if testing.Short() {
		steps = 300
	}
	keys := []string{"hot", "k1", "k2"}
	for _, tc := range []struct {
		n   int
		lib string
	}{{1, "rueidis"}, {2, "rueidis"}, {3, "rueidis"}, {2, "go-redis"}} {
		for si, sc := range a149Schedules(tc.n, steps, uint64(tc.n)) {
			if tc.lib == "go-redis" && sc.name != "instant" && sc.name != "randomPerInstance" {
				continue
			}
			name := fmt.Sprintf("N%d/%s/%s", tc.n, tc.lib, sc.name)
			t.Run(name, func(t *testing.T) {
				r := a149NewRig(t, srv, tc.lib, fmt.Sprintf("a149b:%d:%s:%d", tc.n, tc.lib, si), lim, tc.n, 1, 1)
				lg := r.run(t, steps, 2, keys, 1, sc.sched)
				var union a149Worsts
				var us []int64
				ufb := make([][]int64, tc.n)
				for k, key := range keys {
					r.check(t, key, lg.srv[k], lg.fb[k])
					if k == 0 {
						us = lg.srv[k]
						copy(ufb, lg.fb[k])
					} else {
						us = a149Sum(us, lg.srv[k])
						for i := range ufb {
							ufb[i] = a149Sum(ufb[i], lg.fb[k][i])
						}
					}
				}
				union = r.check(t, "union of the colliding keys", us, ufb)
				B := a149Rat(lim.Burst)
				twoB := new(big.Rat).Mul(B, big.NewRat(2, 1))
				T := float64(steps-1) / 1000
				t.Logf("%s: admitted %.1f tokens over %.3f s (2 x (Rate x T + Burst) = %.2f); worst excess: server %s, fallbacks %s, total %s (over 2 x Rate)",
					name, float64(union.adm)/2, T, 2*(lim.Rate*T+lim.Burst), union.srv.FloatString(3), union.fbAll.FloatString(3), union.total.FloatString(3))
				switch sc.name {
				case "never", "always":
					// One bucket only: the total over Rate x T is the
					// bucket's, within Burst.
					tot, _, _ := a149Worst(a149Sum(us, a149Sum(ufb...)), a149Rat(lim.Rate), 1)
					if tot.Cmp(B) > 0 {
						t.Errorf("%s: total %s over Rate x T; one bucket alone keeps it within Burst", sc.name, tot.FloatString(3))
					}
				case "instant":
					if union.total.Cmp(twoB) != 0 {
						t.Errorf("adversary: worst total excess %s over 2 x Rate x T; want the bound 2 x Burst = %v reached", union.total.FloatString(3), 2*lim.Burst)
					}
					// Over the whole run: more than 1.9 x Rate x T + Burst
					// (both buckets keep refilling and are both spent).
					if float64(union.adm)/2 < 1.9*lim.Rate*T+lim.Burst {
						t.Errorf("adversary: %v tokens over %.3f s; want close to 2 x Rate x T + 2 x Burst = %.1f", float64(union.adm)/2, T, 2*(lim.Rate*T+lim.Burst))
					}
				}
			})
		}
	}
}

// TestAudit149FractionalAndDistinctKeys: the same bound with requests of
// half a token, keys on distinct cells (CellsPerLevel 64, FallbackCells
// 64), N = 3, under the adversary, random common and random
// per-instance faults, at two limits: 7.5/s x 4.5 (exact units on the
// server: 400 per token) and pi/s x 4.5 (no exact unit: the server's
// cells count tokens, float32 rounded up, as the fallbacks' always do).
// Every window's excess stays within each bucket's Burst, exactly.
func TestAudit149FractionalAndDistinctKeys(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	steps := 600
	if testing.Short() {
		steps = 200
	}
	keys := []string{"hot", "other"}
	for li, lim := range []Limit{PerSecond(7.5, 4.5), PerSecond(math.Pi, 4.5)} {
		for si, sc := range a149Schedules(3, steps, 77+uint64(li)) {
			if sc.name != "instant" && sc.name != "randomPerInstance" && sc.name != "randomCommon" {
				continue
			}
			t.Run(fmt.Sprint(lim.Rate, "/", sc.name), func(t *testing.T) {
				r := a149NewRig(t, srv, "rueidis", fmt.Sprintf("a149f:%d:%d", li, si), lim, 3, 64, 64)
				lg := r.run(t, steps, 2, keys, 0.5, sc.sched)
				for k, key := range keys {
					w := r.check(t, key, lg.srv[k], lg.fb[k])
					t.Logf("%s %s: admitted %.1f tokens; worst excess server %s, fallbacks %s, total %s",
						sc.name, key, float64(w.adm)/2, w.srv.FloatString(3), w.fbAll.FloatString(3), w.total.FloatString(3))
				}
			})
		}
	}
}

// TestAudit149FallbackStateKeptBetweenFaults: "each fallback at Rate/N and
// Burst/N (its state kept between faults)". N = 2, 10/s x 10 (fallback
// 5/s x 5), one instance, one fake clock:
//   - fault 1 at t0: the fallback admits 5 (Burst/N) and denies the 6th,
//     RetryAfter 200 ms;
//   - the gate opens at t0: the server admits its own Burst, 10, at t0
//     (it never learned of the fallback's 5);
//   - fault 2 at t0 + 100 ms: the fallback's debt is the one fault 1 left,
//     drained for 100 ms at Rate/N: 4.5, so it admits nothing and says
//     RetryAfter 100 ms; at t0 + 200 ms it admits exactly 1; at t0 +
//     1 s (5 tokens drained in all) exactly 4 more, not a fresh Burst/N.
//   - a key the fallback never saw gets its full Burst/N in fault 2.
func TestAudit149FallbackStateKeptBetweenFaults(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			r := a149NewRig(t, srv, lib, "a149k:"+lib, PerSecond(10, 10), 2, 0, 0)
			l, g, ctx := r.ls[0], r.gates[0], context.Background()
			burst := func(what, key string, wantDown bool) (n int, last Decision) {
				t.Helper()
				for n = 0; n < 30; n++ {
					d, err := l.Allow(ctx, key)
					if wantDown != (err != nil) || (err != nil && !errors.Is(err, ErrDegraded)) {
						t.Fatalf("%s: %+v, %v (gate shut %v)", what, d, err, wantDown)
					}
					if !d.Allowed {
						return n, d
					}
				}
				t.Fatalf("%s: 30 admitted", what)
				return
			}
			g.down.Store(true)
			if n, d := burst("fault 1", "k", true); n != 5 || d.RetryAfter != 200*time.Millisecond {
				t.Fatalf("fault 1: %d admitted, then %+v; want 5, then RetryAfter 200ms", n, d)
			}
			g.down.Store(false)
			if n, _ := burst("recovered", "k", false); n != 10 {
				t.Errorf("after fault 1 the server admitted %d at the same instant; want its Burst 10 (it never learns the fallback's)", n)
			}
			r.clk.Advance(100 * time.Millisecond)
			g.down.Store(true)
			n, d := burst("fault 2 at +100ms", "k", true)
			if n != 0 || d.RetryAfter != 100*time.Millisecond {
				t.Errorf("fault 2 at +100 ms: %d admitted, then %+v; want 0 (the debt of fault 1, 4.5 left), RetryAfter 100ms", n, d)
			}
			r.clk.Advance(100 * time.Millisecond)
			if n, _ := burst("fault 2 at +200ms", "k", true); n != 1 {
				t.Errorf("fault 2 at +200 ms: %d admitted; want 1 (1 token drained since fault 1)", n)
			}
			r.clk.Advance(800 * time.Millisecond)
			if n, _ := burst("fault 2 at +1s", "k", true); n != 4 {
				t.Errorf("fault 2 at +1 s: %d admitted; want 4 (4 more tokens drained)", n)
			}
			if n, _ := burst("fault 2, a fresh key", "fresh", true); n != 5 {
				t.Errorf("fault 2, a key the fallback never saw: %d admitted; want Burst/N 5", n)
			}
			if st := l.Stats(); st.DegradedPeriod != 2 {
				t.Errorf("DegradedPeriod %d; want 2 faults", st.DegradedPeriod)
			}
		})
	}
}

// TestAudit149FallbackAdmissionsNotChargedOnServer: "the server never
// learns what the fallbacks admitted". N = 2, 10/s x 10, frozen clock:
// during a fault both fallbacks spend their Burst/N on key "k" (10 in
// all); the fault ends; the server's peek (AllowN 0) reads Remaining 10,
// the key's cells on the server are untouched (SKETCH query through the
// server sketch: 0), and the server then admits its full Burst, 10, at
// the same instant. Once with the gate (nothing sent), once through a
// TCP proxy that is cut (every connection closed, new ones refused) and
// then healed: the clients reconnect by themselves.
func TestAudit149FallbackAdmissionsNotChargedOnServer(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	lim := PerSecond(10, 10)
	ctx := context.Background()
	spend := func(t *testing.T, ls []*Limiter) {
		t.Helper()
		for i, l := range ls {
			adm := 0
			for range 8 {
				d, err := l.Allow(ctx, "k")
				if !errors.Is(err, ErrDegraded) {
					t.Fatalf("instance %d during the fault: %+v, %v; want ErrDegraded", i, d, err)
				}
				if d.Allowed {
					adm++
				}
			}
			if adm != 5 {
				t.Fatalf("instance %d's fallback admitted %d; want Burst/N 5", i, adm)
			}
		}
	}
	after := func(t *testing.T, ls []*Limiter) {
		t.Helper()
		d, err := ls[1].AllowN(ctx, "k", 0)
		if err != nil || d.Remaining != lim.Burst {
			t.Errorf("server peek after the fault: %+v, %v; want Remaining %v (nothing charged)", d, err, lim.Burst)
		}
		est, err := ls[0].Sketch().Query(ctx, "k")
		if err != nil || est != 0 {
			t.Errorf("server sketch Query(k) after the fault = %v, %v; want 0", est, err)
		}
		adm := 0
		for i := range 12 {
			d, err := ls[i%2].Allow(ctx, "k")
			if err != nil {
				t.Fatalf("server call %d after the fault: %v", i, err)
			}
			if d.Allowed {
				adm++
			}
		}
		if adm != 10 {
			t.Errorf("the server admitted %d right after the fault; want its full Burst 10", adm)
		}
	}
	t.Run("gate", func(t *testing.T) {
		r := a149NewRig(t, srv, "rueidis", "a149c:gate", lim, 2, 0, 0)
		var before []int64
		for _, g := range r.gates {
			before = append(before, g.sent.Load()) // the start-up check's
			g.down.Store(true)
		}
		spend(t, r.ls)
		for i, g := range r.gates {
			if g.down.Store(false); g.sent.Load() != before[i] {
				t.Errorf("the gate passed %d FCALLs during the fault; want none", g.sent.Load()-before[i])
			}
		}
		after(t, r.ls)
	})
	t.Run("proxy", func(t *testing.T) {
		px := a149NewProxy(t, srv.addr())
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		cfg := LimiterConfig{Name: "a149c:proxy", Limit: lim, Policy: LocalFallback, Instances: 2,
			Timeout: 2 * time.Second, Clock: clk}
		var ls []*Limiter
		for _, lib := range []string{"rueidis", "go-redis"} {
			var l *Limiter
			var err error
			if lib == "rueidis" {
				c, cerr := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{px.addr()}, DisableCache: true})
				if cerr != nil {
					t.Fatal(cerr)
				}
				t.Cleanup(c.Close)
				l, err = NewLimiter(c, cfg)
			} else {
				c := goredis.NewClient(&goredis.Options{Addr: px.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
				t.Cleanup(func() { c.Close() })
				l, err = NewLimiterGoRedis(c, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		px.cut()
		spend(t, ls)
		px.heal()
		for i, l := range ls {
			deadline := time.Now().Add(4 * time.Second)
			for {
				_, err := l.AllowN(ctx, "a149-probe", 0)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("instance %d: no recovery within 4 s: %v", i, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if f := px.fcalls.Load(); f == 0 {
			t.Fatal("the proxy forwarded no FCALL")
		}
		after(t, ls)
	})
}

// a149Proxy forwards loopback connections to a server; cut closes every
// connection and refuses new ones until heal.
type a149Proxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	fcalls atomic.Int64 // chunks carrying an FCALL forwarded
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func a149NewProxy(t *testing.T, target string) *a149Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &a149Proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *a149Proxy) addr() string { return p.ln.Addr().String() }

func (p *a149Proxy) closeAll() {
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

func (p *a149Proxy) cut()  { p.down.Store(true); p.closeAll() }
func (p *a149Proxy) heal() { p.down.Store(false) }

func (p *a149Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn, count bool) {
			defer p.wg.Done()
			defer dst.Close()
			defer src.Close()
			buf := make([]byte, 1<<16)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					if p.down.Load() {
						return
					}
					if count && strings.Contains(strings.ToLower(string(buf[:n])), "\r\nfcall\r\n") {
						p.fcalls.Add(1)
					}
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}
		p.wg.Add(2)
		go pipe(s, c, true)
		go pipe(c, s, false)
	}
}

// TestAudit149FlappingAcrossSweeps: the bound where the debts outlive the
// local sketches' horizon sweeps (cells older than 2^29 ms decayed and
// re-stamped, internal/core/horizon.go) and the server's rebases (after
// a generation's first 2^31 ms): 12 tokens per 40 days, Burst 12 (a
// Burst drains in 40 days; 2^31 ms is 24.9 days), N = 3, one hot key,
// steps of 6 h over 160 days (640 steps), under the adversary and random
// per-instance faults. Every window's excess stays within each
// bucket's Burst, and the total's within 2 x Burst.
func TestAudit149FlappingAcrossSweeps(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	lim := PerSecond(12.0/(40*86400), 12)
	steps := 640
	if testing.Short() {
		steps = 320
	}
	for si, sc := range a149Schedules(3, steps, 149) {
		if sc.name != "instant" && sc.name != "randomPerInstance" && sc.name != "period150" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			r := a149NewRig(t, srv, "rueidis", fmt.Sprintf("a149s:%d", si), lim, 3, 64, 64)
			r.step = 6 * 3600 * 1000
			lg := r.run(t, steps, 2, []string{"hot"}, 1, sc.sched)
			w := r.check(t, "hot", lg.srv[0], lg.fb[0])
			t.Logf("%s: admitted %.1f tokens over %d days; worst excess server %s, fallbacks %s, total %s",
				sc.name, float64(w.adm)/2, int64(steps-1)*r.step/86_400_000, w.srv.FloatString(3), w.fbAll.FloatString(3), w.total.FloatString(3))
		})
	}
}

// TestAudit149FlappingConcurrent: the bound with the faults racing the
// calls. N = 2 instances (one with a deny cache and PreCheck, whose local
// denials come with no error), 3 goroutines each, 20/s x 6, one hot key;
// a fake clock frozen within each of 120 rounds and moved 7 ms between
// them; in each round every goroutine makes 5 calls while another
// goroutine flips the instances' gates at random. Each admission is the
// server's (no error) or its instance's fallback's (ErrDegraded); over
// every window of rounds the server's stay within Rate x T + Burst, each
// fallback's within Rate/N x T + Burst/N, the fallbacks' together within
// Rate x T + Burst, the total within 2 x (Rate x T + Burst).
func TestAudit149FlappingConcurrent(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	lim := PerSecond(20, 6)
	rounds := 120
	if testing.Short() {
		rounds = 60
	}
	r := a149NewRig(t, srv, "rueidis", "a149x", lim, 2, 64, 64)
	r.step = 7
	// Instance 1 again, with a deny cache: its gate replaces r.gates[1].
	{
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		g := &a149Gate{conn: rueidisConn{rc}}
		l, err := newLimiter(g, LimiterConfig{Name: "a149x", Limit: lim, Policy: LocalFallback, Instances: 2,
			CellsPerLevel: 64, FallbackCells: 64, DenyCacheCells: 64, PreCheck: true, Timeout: 10 * time.Second, Clock: r.clk})
		if err != nil {
			t.Fatal(err)
		}
		r.ls[1], r.gates[1] = l, g
	}
	ctx := context.Background()
	srvAdm := make([]int64, rounds)
	fbAdm := [][]int64{make([]int64, rounds), make([]int64, rounds)}
	rng := rand.New(rand.NewPCG(149, 7))
	var errs atomic.Int64
	for round := range rounds {
		var sa atomic.Int64
		var fa [2]atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		seed := rng.Uint64()
		var fw sync.WaitGroup
		fw.Add(1)
		go func() { // the faults
			defer fw.Done()
			fr := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.gates[fr.IntN(2)].down.Store(fr.IntN(2) == 0)
				runtime.Gosched()
			}
		}()
		for i, l := range r.ls {
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						d, err := l.Allow(ctx, "hot")
						switch {
						case err == nil:
							if d.Allowed {
								sa.Add(2)
							}
						case errors.Is(err, ErrDegraded) && errors.Is(err, errA149Cut):
							if d.Allowed {
								fa[i].Add(2)
							}
						default:
							errs.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		close(stop)
		fw.Wait()
		srvAdm[round] = sa.Load()
		fbAdm[0][round], fbAdm[1][round] = fa[0].Load(), fa[1].Load()
		r.clk.Advance(time.Duration(r.step) * time.Millisecond)
	}
	if errs.Load() != 0 {
		t.Fatalf("%d calls returned an error other than the gate's", errs.Load())
	}
	w := r.check(t, "hot", srvAdm, fbAdm)
	t.Logf("admitted %.1f tokens over %d ms; worst excess server %s, fallbacks %s (each %s, %s), total %s",
		float64(w.adm)/2, int64(rounds-1)*r.step, w.srv.FloatString(3), w.fbAll.FloatString(3), w.fb[0].FloatString(3), w.fb[1].FloatString(3), w.total.FloatString(3))
}

// TestAudit149FixedFallbacksTogetherAboveBurst (audit 149; fixed at stop
// 65, the text below says what was wrong; the fallback's Rate/N and
// Burst/N are now rounded down, divDown): docs/distributed.md,
// Failure policies: "each fallback at Rate/N and Burst/N ... so over any
// span T the server admits at most Rate x T + Burst and the N fallbacks
// together at most as much again: at most twice the rate, plus two
// Bursts, however the faults fall"; the table: "N instances all falling
// back admit at most the global rate while the fault lasts"; and "never
// an admission that bucket [the exact bucket at Rate/N and Burst/N]
// denies". The fallback's Burst is the float64 quotient Burst/N
// (limiter.go, newLimiter: l.fbLimit = Limit{Rate: lim.Rate /
// float64(n), Burst: lim.Burst / float64(n)}), rounded to nearest: where
// it rounds up, N fallbacks each admit a request of their whole Burst
// (n = Burst/N, the fallback's Limit.Burst) at one instant, N x
// fl(Burst/N) > Burst tokens in all. Gate shut from the start, a frozen
// clock, a fresh key; then (second half) the server's own Burst first,
// at the same instant:
//   - 10/s x 10, N = 3: fl(10/3) = 3.3333333333333335; the 3 fallbacks
//     admit 10 + 2^-51 tokens (4.4e-16 over Burst), and with the
//     server's 10 first, 20 + 2^-51 at T = 0 against 2 x (0 + Burst) = 20;
//   - Burst 2^56 + 32 (7.2e16) at Burst/1000 per s (a Burst drains in
//     1000 s), N = 7: the 7 fallbacks admit Burst + 6 whole tokens, and
//     with the server's Burst first 2 x Burst + 6.
//
// Observed: every one of those requests is admitted (the test fails on
// the excess). Fix (limiter.go:325, newLimiter): round the fallback's
// Burst and Rate down so that N x Burst/N <= Burst exactly, e.g. while
// math.FMA(fb, float64(n), -lim.Burst) > 0 { fb = math.Nextafter(fb, 0) }
// (the same for Rate), or document the excess (at most N/2 ulps of
// Burst/N: about 8e-17 x Burst).
func TestAudit149FixedFallbacksTogetherAboveBurst(t *testing.T) {
	lookTool(t, "redis-server")
	srv := startServer(t)
	ctx := context.Background()
	for ci, tc := range []struct {
		lim Limit
		n   int
	}{{PerSecond(10, 10), 3}, {PerSecond(0x100000000000020/1000.0, 0x100000000000020), 7}} {
		for _, serverFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/%d/serverFirst=%v", tc.lim.Burst, tc.n, serverFirst), func(t *testing.T) {
				r := a149NewRig(t, srv, "rueidis", fmt.Sprintf("a149o:%d:%v", ci, serverFirst), tc.lim, tc.n, 64, 64)
				total := new(big.Rat)
				if serverFirst {
					d, err := r.ls[0].AllowN(ctx, "k", tc.lim.Burst)
					if err != nil || !d.Allowed {
						t.Fatalf("server AllowN(Burst) = %+v, %v; want admitted", d, err)
					}
					total.Add(total, a149Rat(tc.lim.Burst))
				}
				fbTotal := new(big.Rat)
				fb := divDown(tc.lim.Burst, uint32(tc.n)) // the fallback's, rounded down since the fix
				for i, l := range r.ls {
					r.gates[i].down.Store(true)
					d, err := l.AllowN(ctx, "k", fb)
					if !errors.Is(err, ErrDegraded) {
						t.Fatalf("instance %d: %+v, %v; want the fallback's decision", i, d, err)
					}
					if d.Limit.Burst != fb {
						t.Fatalf("instance %d: the fallback's Limit %+v; want Burst %v", i, d.Limit, fb)
					}
					if d.Allowed {
						fbTotal.Add(fbTotal, a149Rat(fb))
					}
				}
				total.Add(total, fbTotal)
				B := a149Rat(tc.lim.Burst)
				bound := new(big.Rat).Set(B)
				if serverFirst {
					bound.Mul(B, big.NewRat(2, 1))
				}
				if total.Cmp(bound) > 0 {
					over := new(big.Rat).Sub(total, bound)
					f, _ := over.Float64()
					t.Errorf("Burst %v, N = %d, frozen clock (T = 0): the %d fallbacks admitted %s tokens (Burst/N = %v each)%s: %s in all, %.3g tokens over the docs' bound %s (\"the N fallbacks together at most as much again: at most twice the rate, plus two Bursts\"; \"N instances all falling back admit at most the global rate\")",
						tc.lim.Burst, tc.n, tc.n, fbTotal.FloatString(20), fb,
						map[bool]string{true: " after the server's Burst", false: ""}[serverFirst],
						total.FloatString(20), f, bound.FloatString(0))
				}
			})
		}
	}
}
