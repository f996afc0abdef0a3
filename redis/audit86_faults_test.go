package redis

// Audit 86: failure policies mid-sequence against a rational oracle,
// contexts that are already done, and bad input, on real servers.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// audit86WaitUp polls a probe key until the limiter's call is decided by
// the server again (within 4 s: go-redis's pool may refuse for about 1 s
// after a restart, docs/distributed.md).
func audit86WaitUp(t *testing.T, l *Limiter) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Second)
	for {
		_, err := l.AllowN(context.Background(), "a86-probe", 0)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery within 4 s after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAudit86KillMidSequence: an exact limit (10/s, Burst 20) on a fake
// clock; a key is driven into debt by the server, the server is killed
// (SIGKILL) in the middle of the sequence, random requests (n whole and
// fractional, n above Burst/N and above Burst) go on while it is down,
// then it restarts (no persistence) and the sequence goes on.
//   - FailOpen: every call admitted, ErrDegraded, Remaining Burst,
//     RetryAfter -1 (policy.go "FailOpen admits").
//   - FailClosed: every call denied, ErrDegraded wrapping the cause,
//     RetryAfter -1; DecideContext: RetryAfter 0, not Never (decide.go).
//   - LocalFallback over N = 3: its decisions are the rational bucket
//     (Rate/N, Burst/N)'s, never earlier (never more admitted than
//     Burst/N + Rate/N x T over the outage), n in (Burst/N, Burst] gets no
//     decision (RetryAfter -1, Limit the limiter's), n > Burst never; a
//     retry at RetryAfter fits and 1 ms before does not.
//   - After the restart: Degraded false, no error, and the key (forgotten
//     by the restarted server, docs/distributed.md) follows a fresh
//     rational bucket exactly.
//
// Stats count one policy decision per failed call.
func TestAudit86KillMidSequence(t *testing.T) {
	for _, lib := range []string{"rueidis", "go-redis"} {
		for _, pol := range []Policy{FailOpen, FailClosed, LocalFallback} {
			t.Run(lib+"/"+pol.String(), func(t *testing.T) {
				audit86KillMidSequence(t, newEnv(t, lib, "standalone"), pol)
			})
		}
	}
}

func audit86KillMidSequence(t *testing.T, e *env, pol Policy) {
	lim := PerSecond(10, 20)
	const inst = 3
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	// go-redis redials a closed port until the deadline (docs/distributed.md):
	// a short Timeout and fewer calls keep the test short.
	timeout, steps := time.Second, 60
	if e.lib == "go-redis" {
		timeout, steps = 40*time.Millisecond, 20
	}
	l := e.limiter(t, LimiterConfig{Name: "a86kill:" + pol.String(), Limit: lim, Clock: clk, Policy: pol, Instances: inst,
		CellsPerLevel: 256, Timeout: timeout})
	ctx := context.Background()
	key := "k"
	rng := rand.New(rand.NewPCG(86, uint64(pol)))

	// Healthy: 15 tokens taken, checked against the rational bucket.
	b := audit86NewBucket(lim, clk.NowMillis())
	for range 15 {
		w := b.step(clk.NowMillis(), 1)
		d, err := l.Allow(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		audit86CheckDecision(t, "healthy", d, w, lim)
	}

	if e.srv.cmd == nil {
		t.Fatal("setup: no server")
	}
	e.srv.kill()
	before := l.Stats()

	fb := audit86NewBucket(Limit{Rate: divDown(lim.Rate, inst), Burst: divDown(lim.Burst, inst)}, clk.NowMillis()) // rounded down (audit 149)
	fbBurst := divDown(lim.Burst, inst)
	outageStart := clk.NowMillis()
	admittedTokens := 0.0
	calls, admits, denials := 0, 0, 0
	var lastN float64
	var lastRetry time.Duration
	for i := range steps {
		var n float64
		if lastRetry > time.Millisecond && rng.IntN(2) == 0 {
			if rng.IntN(2) == 0 {
				clk.Advance(lastRetry - time.Millisecond)
			} else {
				clk.Advance(lastRetry)
			}
			n = lastN
		} else {
			clk.Advance(time.Duration(rng.IntN(4)*rng.IntN(300)) * time.Millisecond)
			n = []float64{1, 1, 2, 0.5, 0.25, fbBurst, 5, 7, lim.Burst, lim.Burst + 1}[rng.IntN(10)]
		}
		lastRetry = 0
		where := fmt.Sprintf("%v down, step %d t+%dms n=%v", pol, i, clk.NowMillis()-outageStart, n)
		d, err := l.AllowN(ctx, key, n)
		calls++
		if u, ok := err.(interface{ Unwrap() []error }); !errors.Is(err, ErrDegraded) || !ok || len(u.Unwrap()) != 2 || u.Unwrap()[1] == nil {
			t.Fatalf("%s: err %v; want ErrDegraded wrapping the cause", where, err)
		}
		if !l.Degraded() {
			t.Fatalf("%s: Degraded false", where)
		}
		if d.Allowed {
			admits++
		} else {
			denials++
		}
		switch pol {
		case FailOpen:
			if !d.Allowed || d.RetryAfter != -1 || d.Remaining != lim.Burst || d.Limit != lim {
				t.Fatalf("%s: %+v; want FailOpen's admission", where, d)
			}
		case FailClosed:
			if d.Allowed || d.RetryAfter != -1 || d.Remaining != 0 || d.Limit != lim {
				t.Fatalf("%s: %+v; want FailClosed's denial", where, d)
			}
			if n >= 1 && n <= lim.Burst && n == math.Trunc(n) {
				ld, err := l.DecideContext(ctx, key, int(n))
				calls++
				denials++
				if !errors.Is(err, ErrDegraded) || ld.Allowed || ld.Never || ld.RetryAfter != 0 {
					t.Fatalf("%s: DecideContext %+v, %v; want denied, not Never, RetryAfter 0", where, ld, err)
				}
			}
		case LocalFallback:
			if n > fbBurst && n <= lim.Burst {
				if d.Allowed || d.RetryAfter != -1 || d.Limit != lim {
					t.Fatalf("%s: %+v; want no decision (RetryAfter -1, the limiter's Limit)", where, d)
				}
				continue
			}
			w := fb.step(clk.NowMillis(), n)
			if d.Limit != (Limit{Rate: divDown(lim.Rate, inst), Burst: fbBurst}) {
				t.Fatalf("%s: Limit %+v; want the fallback's", where, d.Limit)
			}
			if d.Allowed && !w.allowed {
				t.Fatalf("%s: %+v admitted; the rational bucket (Rate/N, Burst/N) denies (remaining %v)", where, d, w.remaining.FloatString(6))
			}
			if !d.Allowed && w.allowed {
				// Late: the fallback counts tokens in float32 cells
				// rounded up; tolerated within that rounding (a few
				// float32 steps of Burst/N), then the oracle follows it.
				room, _ := w.remaining.Float64()
				if room > fbBurst*1e-6 {
					t.Fatalf("%s: %+v denied; the rational bucket admits with %v tokens to spare", where, d, room)
				}
				fb.debt.Sub(fb.debt, new(big.Rat).SetFloat64(n))
				t.Logf("%s: denied where the rational bucket admits with %v to spare (float32 rounding)", where, room)
				continue
			}
			if d.Allowed {
				admittedTokens += n
			}
			switch {
			case w.never:
				if d.RetryAfter != -1 {
					t.Fatalf("%s: n above Burst/N: RetryAfter %v; want -1", where, d.RetryAfter)
				}
			case !d.Allowed:
				if want := time.Duration(w.retryMs) * time.Millisecond; d.RetryAfter < want {
					t.Fatalf("%s: RetryAfter %v early; rational bucket %v", where, d.RetryAfter, want)
				}
				lastN, lastRetry = n, d.RetryAfter
			}
			if want := time.Duration(w.resetMs) * time.Millisecond; d.ResetAfter < want {
				t.Fatalf("%s: ResetAfter %v early; rational bucket %v", where, d.ResetAfter, want)
			}
			T := float64(clk.NowMillis()-outageStart) / 1000
			if bound := fbBurst + lim.Rate/inst*T; admittedTokens > bound+1e-9 {
				t.Fatalf("%s: %v tokens admitted over %v s of outage; the share is Burst/N + Rate/N x T = %v", where, admittedTokens, T, bound)
			}
		}
	}
	st := l.Stats()
	if got := st.ServerErrors - before.ServerErrors; got != int64(calls) {
		t.Errorf("ServerErrors +%d; want %d (one per call while down)", got, calls)
	}
	if got := st.PolicyAdmits - before.PolicyAdmits; got != int64(admits) {
		t.Errorf("PolicyAdmits +%d; want %d", got, admits)
	}
	if got := st.PolicyDenials - before.PolicyDenials; got != int64(denials) {
		t.Errorf("PolicyDenials +%d; want %d", got, denials)
	}
	if st.DegradedPeriod != 1 {
		t.Errorf("DegradedPeriod %d; want 1", st.DegradedPeriod)
	}

	e.srv.start()
	audit86WaitUp(t, l)
	if l.Degraded() {
		t.Fatal("Degraded after a successful call")
	}
	// The restarted server forgot the debt: a fresh bucket from now.
	b = audit86NewBucket(lim, clk.NowMillis())
	for i := range 40 {
		if rng.IntN(3) == 0 {
			clk.Advance(time.Duration(rng.IntN(250)) * time.Millisecond)
		}
		n := []float64{1, 2, 3, 0.5, lim.Burst, lim.Burst + 1}[rng.IntN(6)]
		w := b.step(clk.NowMillis(), n)
		d, err := l.AllowN(ctx, key, n)
		if err != nil {
			t.Fatalf("after restart, step %d: %v", i, err)
		}
		audit86CheckDecision(t, fmt.Sprintf("after restart, step %d n=%v", i, n), d, w, lim)
	}
	if st := l.Stats(); st.DegradedPeriod != 1 {
		t.Errorf("DegradedPeriod %d after recovery; want 1", st.DegradedPeriod)
	}
}

// TestAudit86DoneContextConsumesNothing: a context already canceled, or
// whose deadline has passed, before AllowN / DecideContext / the Sketch
// calls: the error matches the context's (and ErrDegraded for the
// Limiter: the policy decides), and the server counts nothing: afterwards
// the key still admits exactly its Burst (a frozen clock), on every
// client and topology, with and without the deny cache.
func TestAudit86DoneContextConsumesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, cache := range []bool{false, true} {
			t.Run(fmt.Sprintf("cache=%v", cache), func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				cfg := LimiterConfig{Name: e.ns(fmt.Sprintf("a86ctx:%v", cache)), Limit: PerSecond(3, 5), Clock: clk, CellsPerLevel: 256,
					Policy: FailOpen, Shards: 3}
				if cache {
					cfg.DenyCacheCells, cfg.PreCheck = 256, true
				}
				l := e.limiter(t, cfg)
				bg := context.Background()
				if _, err := l.AllowN(bg, "warm", 1); err != nil {
					t.Fatal(err)
				}
				canceled, cancel := context.WithCancel(bg)
				cancel()
				past, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Second))
				defer cancel2()
				for _, c := range []struct {
					ctx  context.Context
					want error
				}{{canceled, context.Canceled}, {past, context.DeadlineExceeded}} {
					for _, k := range []string{"k", "{k}", ""} {
						for range 3 {
							d, err := l.AllowN(c.ctx, k, 2)
							if !errors.Is(err, c.want) || !errors.Is(err, ErrDegraded) || !d.Allowed {
								t.Fatalf("AllowN(%v ctx, %q): %+v, %v; want FailOpen's admission, ErrDegraded wrapping %v", c.want, k, d, err, c.want)
							}
							ld, err := l.DecideContext(c.ctx, k, 5)
							if !errors.Is(err, c.want) || !ld.Allowed {
								t.Fatalf("DecideContext(%v ctx, %q): %+v, %v", c.want, k, ld, err)
							}
						}
						if _, err := l.Sketch().TryUpdate(c.ctx, "sk:"+k, 1, 1); !errors.Is(err, c.want) {
							t.Fatalf("TryUpdate(%v ctx): %v", c.want, err)
						}
						if err := l.Sketch().Update(c.ctx, "sk:"+k, 1); !errors.Is(err, c.want) {
							t.Fatalf("Update(%v ctx): %v", c.want, err)
						}
					}
				}
				for _, k := range []string{"k", "{k}", "", "sk:k", "sk:{k}", "sk:"} {
					if q, err := l.debtTokens(bg, k); err != nil || q != 0 {
						t.Fatalf("key %q after done contexts: debt %v, %v; want 0 (nothing sent)", k, q, err)
					}
				}
				for _, k := range []string{"k", "{k}", ""} {
					for i := range 6 {
						d, err := l.Allow(bg, k)
						if err != nil || d.Allowed != (i < 5) {
							t.Fatalf("key %q call %d: %+v, %v; want exactly Burst (5) admitted", k, i, d, err)
						}
					}
				}
			})
		}
	})
}

// TestAudit86BraceNamesAndKeys: config.go, Config.Name: "Must be
// non-empty and contain no braces" (refused with ErrInvalidConfig, no
// round trip); keys are hashed whole by the client, so keys sharing a
// hash tag ("{a}x", "{a}y") or made of braces are independent keys,
// each with its own Burst, on the cluster with Shards > 1.
func TestAudit86BraceNamesAndKeys(t *testing.T) {
	for _, name := range []string{"{", "}", "{a}", "a}b", "{}", "x:{0}"} {
		for _, sh := range []uint32{1, 4} {
			l, p, err := a69NewLimiterNoPanic(LimiterConfig{Name: name, Limit: PerSecond(1, 1), Shards: sh})
			if l != nil || p != "" || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Name %q Shards %d: limiter %v, panic %q, %v; want ErrInvalidConfig", name, sh, l != nil, p, err)
			}
		}
	}
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "cluster")
			clk := sketchtest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			l := e.limiter(t, LimiterConfig{Name: e.ns("a86:br:ace"), Limit: PerSecond(2, 3), Clock: clk, Shards: 7, CellsPerLevel: 512,
				DenyCacheCells: 128})
			ctx := context.Background()
			for _, k := range []string{"{a}x", "{a}y", "{a}", "{}", "}{", "{{a}}", "{" + e.ns("a86:br:ace") + "}:g"} {
				for i := range 4 {
					d, err := l.Allow(ctx, k)
					if err != nil || d.Allowed != (i < 3) || (i == 3 && d.RetryAfter != 500*time.Millisecond) {
						t.Fatalf("key %q call %d: %+v, %v; want 3 admitted, then RetryAfter 500ms", k, i, d, err)
					}
				}
			}
		})
	}
}
