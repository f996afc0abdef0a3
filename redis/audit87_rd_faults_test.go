package redis

// Audit 87: faults the earlier audits did not make: a connection dropped
// by the network (before the server read the call, and after it ran it,
// the reply lost), and a server that refuses writes (maxmemory reached
// under noeviction: -OOM).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// a87rdProxy forwards loopback connections to a server and drops a
// connection on demand: before the next FCALL reaches the server, or
// after the server answered it (the reply never reaches the client).
type a87rdProxy struct {
	ln        net.Listener
	target    string
	mode      atomic.Int32 // a87rdPass, a87rdDropBefore or a87rdDropAfter: armed for the next FCALL
	forwarded atomic.Int64 // FCALLs that reached the server
	dropped   atomic.Int64 // connections dropped on demand
	delay     atomic.Int64 // ns each server->client chunk is held (a slow network)
	down      atomic.Bool  // a partition: every connection refused (closed at once)
	mu        sync.Mutex
	conns     []net.Conn
	wg        sync.WaitGroup
}

const (
	a87rdPass int32 = iota
	a87rdDropBefore
	a87rdDropAfter
)

func a87rdNewProxy(t *testing.T, target string) *a87rdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &a87rdProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *a87rdProxy) addr() string { return p.ln.Addr().String() }

// partition closes every connection and refuses new ones until heal.
func (p *a87rdProxy) partition() {
	p.down.Store(true)
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *a87rdProxy) heal() { p.down.Store(false) }

func (p *a87rdProxy) accept() {
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
		var dropReply atomic.Bool
		closeBoth := func() { c.Close(); s.Close() }
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 1<<16)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					calls := bytes.Count(bytes.ToLower(buf[:n]), []byte("\r\nfcall\r\n"))
					if calls > 0 && p.mode.CompareAndSwap(a87rdDropBefore, a87rdPass) {
						p.dropped.Add(1)
						return
					}
					if calls > 0 && p.mode.CompareAndSwap(a87rdDropAfter, a87rdPass) {
						dropReply.Store(true)
					}
					p.forwarded.Add(int64(calls))
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer p.wg.Done()
			defer closeBoth()
			buf := make([]byte, 1<<16)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					if d := p.delay.Load(); d > 0 {
						time.Sleep(time.Duration(d))
					}
					if dropReply.Load() {
						p.dropped.Add(1)
						return
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// a87rdLimiterVia makes a limiter on a new client of lib connected to
// addr (no retries of its own for go-redis beyond its defaults).
func a87rdLimiterVia(t *testing.T, lib, addr string, cfg LimiterConfig) *Limiter {
	t.Helper()
	var l *Limiter
	var err error
	switch lib {
	case "rueidis":
		c, cerr := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if cerr != nil {
			t.Fatalf("rueidis.NewClient(%s): %v", addr, cerr)
		}
		t.Cleanup(c.Close)
		l, err = NewLimiter(c, cfg)
	default:
		c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		l, err = NewLimiterGoRedis(c, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// a87rdCheckPolicy checks a decision the policy made (err matches
// ErrDegraded): policy.go and limiter.go's Decision.
func a87rdCheckPolicy(t *testing.T, what string, pol Policy, lim Limit, d Decision) {
	t.Helper()
	switch pol {
	case FailClosed:
		if d.Allowed || d.RetryAfter != -1 {
			t.Errorf("%s: FailClosed's decision %+v; want denied, RetryAfter -1", what, d)
		}
	case FailOpen:
		if !d.Allowed || d.Remaining != lim.Burst || d.RetryAfter != -1 {
			t.Errorf("%s: FailOpen's decision %+v; want admitted, Remaining %v, RetryAfter -1", what, d, lim.Burst)
		}
	}
}

// TestAudit87RdDroppedConnection: the connection between a limiter and a
// healthy server is dropped (by a proxy) once before the server reads a
// call, and once after the server ran it but before the reply arrives.
// Each policy, both clients; a fake clock that never moves (no drain).
// doc.go: "Calls are never retried by the sketch (a write is never
// applied twice by it) ... go-redis retries after a network error on its
// own unless told not to ...; such a retry can only over-count";
// limiter.go, AllowN: "When the server fails or times out, the Policy
// decides, and AllowN returns that decision with an error matching
// ErrDegraded that also wraps the cause"; policy.go, Stats: Timeouts
// counts failures by deadline only; docs/distributed.md: "Recovery needs
// nothing from the caller: rueidis reconnects". Checked:
//   - a call that failed is the policy's decision with ErrDegraded, not
//     a Timeout, Degraded true, one degraded period;
//   - the next call (nothing dropped) is the server's: no error, Degraded
//     false;
//   - the server's debt is exactly the number of FCALLs that reached it
//     (the one whose reply was lost counted: an over-count, never an
//     under-count), and with rueidis each AllowN sent at most one FCALL.
func TestAudit87RdDroppedConnection(t *testing.T) {
	lim := PerSecond(1, 100)
	for _, lib := range []string{"rueidis", "go-redis"} {
		t.Run(lib, func(t *testing.T) {
			e := newEnv(t, lib, "standalone")
			for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
				t.Run(pol.String(), func(t *testing.T) {
					px := a87rdNewProxy(t, e.srv.addr())
					clk := sketchtest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					name := "a87rddrop:" + pol.String()
					cfg := LimiterConfig{Name: name, Limit: lim, Clock: clk, Policy: pol, Instances: 2, Timeout: 2 * time.Second, CellsPerLevel: 64}
					l := a87rdLimiterVia(t, lib, px.addr(), cfg)
					direct := e.limiter(t, LimiterConfig{Name: name, Limit: lim, Clock: clk, CellsPerLevel: 64, ServerCheck: CheckSkip})
					ctx := context.Background()
					base := px.forwarded.Load() // the start-up check's calls
					calls := 0
					allow := func() (Decision, error) {
						calls++
						return l.AllowN(ctx, "k", 1)
					}
					for range 3 {
						if d, err := allow(); err != nil || !d.Allowed {
							t.Fatalf("warm-up: %+v, %v", d, err)
						}
					}
					for _, mode := range []int32{a87rdDropBefore, a87rdDropAfter} {
						what := map[int32]string{a87rdDropBefore: "dropped before the server read the call", a87rdDropAfter: "dropped after the server ran the call"}[mode]
						before := l.Stats()
						px.mode.Store(mode)
						d, err := allow()
						after := l.Stats()
						if px.mode.Load() != a87rdPass {
							t.Fatalf("%s: the proxy saw no FCALL", what)
						}
						switch {
						case err == nil:
							// go-redis resends after a network error on a fresh
							// connection (doc.go): the server decided.
							if lib == "rueidis" {
								t.Errorf("%s: rueidis answered %+v with no error", what, d)
							}
							if !d.Allowed || l.Degraded() {
								t.Errorf("%s: %+v Degraded %v; want the server's admission", what, d, l.Degraded())
							}
							t.Logf("%s/%s, %s: go-redis resent it, no error: %+v", lib, pol, what, d)
						default:
							if !errors.Is(err, ErrDegraded) || err.Error() == ErrDegraded.Error() {
								t.Errorf("%s: err %v; want ErrDegraded wrapping the cause", what, err)
							}
							if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || after.Timeouts != before.Timeouts {
								t.Errorf("%s: a timeout (%v, Timeouts %d -> %d); the connection was closed at once", what, err, before.Timeouts, after.Timeouts)
							}
							if !l.Degraded() || after.ServerErrors != before.ServerErrors+1 || after.PolicyAdmits+after.PolicyDenials != before.PolicyAdmits+before.PolicyDenials+1 {
								t.Errorf("%s: Degraded %v, Stats %+v -> %+v; want degraded, one server error, one policy decision", what, l.Degraded(), before, after)
							}
							a87rdCheckPolicy(t, what, pol, lim, d)
							if pol == LocalFallback && (!d.Allowed || d.Limit != PerSecond(0.5, 50)) {
								t.Errorf("%s: LocalFallback's decision %+v; want admitted by the 0.5/s x 50 fallback", what, d)
							}
						}
						// The next call, nothing dropped, is the server's.
						d2, err2 := allow()
						if err2 != nil || !d2.Allowed || l.Degraded() {
							t.Errorf("%s: the next call: %+v, %v, Degraded %v; want the server's admission (rueidis reconnects)", what, d2, err2, l.Degraded())
						}
					}
					if s := l.Stats(); s.DegradedPeriod > 2 || s.Timeouts != 0 {
						t.Errorf("Stats %+v; want at most 2 degraded periods, no Timeouts", s)
					}
					fw := px.forwarded.Load() - base
					if lib == "rueidis" && fw != int64(calls-1) {
						t.Errorf("%d FCALLs reached the server for %d AllowN calls, one dropped before it; want %d: the sketch never resends (doc.go)", fw, calls, calls-1)
					}
					pk, err := direct.AllowN(ctx, "k", 0)
					if err != nil {
						t.Fatal(err)
					}
					if debt := lim.Burst - pk.Remaining; debt != float64(fw) {
						t.Errorf("the server's debt %v after %d FCALLs reached it (%d AllowN calls); want exactly %d", debt, fw, calls, fw)
					}
					t.Logf("%s/%s: %d calls, %d FCALLs reached the server, Stats %+v", lib, pol, calls, fw, l.Stats())
				})
			}
		})
	}
}

// TestAudit87RdOOMPolicies: a server that refuses writes (maxmemory
// reached under noeviction, a maxmemory-policy Check calls safe: FCALL of
// the sketch's function, which writes, gets -OOM) is a round trip that
// failed. limiter.go, AllowN: "When the server fails ..., the Policy
// decides, and AllowN returns that decision with an error matching
// ErrDegraded that also wraps the cause"; policy.go: FailClosed denies,
// FailOpen admits, LocalFallback decides at Rate/N, Burst/N; Stats:
// Timeouts are failures by deadline only; doc.go: the deny cache answers
// a key the server denied locally, with no round trip. Checked on both
// clients, on a frozen fake clock: every call made while the server
// refuses is the policy's (LocalFallback over 2 instances: exactly 5 of
// 8 admitted, then RetryAfter 2 s), with ErrDegraded wrapping the -OOM
// reply, no Timeout, Degraded true, one degraded period; a key the deny
// cache holds is denied locally with no error; once maxmemory is lifted
// the next call is the server's (Degraded false) and the key's debt is
// what it was before (nothing written meanwhile).
func TestAudit87RdOOMPolicies(t *testing.T) {
	lim := PerSecond(1, 10)
	forEachClient(t, func(t *testing.T, e *env) {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		ctx := context.Background()
		type rig struct {
			pol   Policy
			cache bool
			l     *Limiter
		}
		var rigs []rig
		for _, pol := range []Policy{FailClosed, FailOpen, LocalFallback} {
			for _, cache := range []bool{false, true} {
				cfg := LimiterConfig{Name: fmt.Sprintf("a87rdoom:%v:%v", pol, cache), Limit: lim, Clock: clk, Policy: pol, Instances: 2, CellsPerLevel: 64, Timeout: 2 * time.Second}
				if cache {
					cfg.DenyCacheCells, cfg.PreCheck = 64, true
				}
				rigs = append(rigs, rig{pol, cache, e.limiter(t, cfg)})
			}
		}
		for _, r := range rigs {
			for i := range 3 {
				if d, err := r.l.Allow(ctx, "k"); err != nil || !d.Allowed {
					t.Fatalf("warm-up %d: %+v, %v", i, d, err)
				}
			}
			for range 10 { // "full": exhausted, the 11th denied (and cached)
				r.l.Allow(ctx, "full")
			}
			if d, err := r.l.Allow(ctx, "full"); err != nil || d.Allowed {
				t.Fatalf("full: %+v, %v", d, err)
			}
		}
		if _, err := rawDo(e.srv.addr(), "CONFIG", "SET", "maxmemory", "1"); err != nil {
			t.Fatal(err)
		}
		oomOff := func() {
			if _, err := rawDo(e.srv.addr(), "CONFIG", "SET", "maxmemory", "0"); err != nil {
				t.Fatal(err)
			}
		}
		defer oomOff()
		for _, r := range rigs {
			what := fmt.Sprintf("%v cache=%v", r.pol, r.cache)
			before := r.l.Stats()
			admitted := 0
			for i := range 8 {
				d, err := r.l.Allow(ctx, "k")
				if !errors.Is(err, ErrDegraded) || !strings.Contains(err.Error(), "OOM") {
					t.Fatalf("%s call %d under OOM: %+v, err %v; want ErrDegraded wrapping the -OOM reply", what, i, d, err)
				}
				a87rdCheckPolicy(t, what, r.pol, lim, d)
				if d.Allowed {
					admitted++
				} else if r.pol == LocalFallback && d.RetryAfter != 2*time.Second {
					t.Errorf("%s: LocalFallback's denial %+v; want RetryAfter 2s (0.5/s, the bucket of 5 full)", what, d)
				}
			}
			if r.pol == LocalFallback && admitted != 5 {
				t.Errorf("%s: LocalFallback admitted %d of 8; want 5 (Burst/N)", what, admitted)
			}
			if r.cache {
				d, err := r.l.Allow(ctx, "full")
				if err != nil || d.Allowed || d.RetryAfter != time.Second {
					t.Errorf("%s: a key the cache holds, under OOM: %+v, %v; want the cache's denial, RetryAfter 1s, no error", what, d, err)
				}
			}
			s := r.l.Stats()
			if !r.l.Degraded() || s.ServerErrors-before.ServerErrors != 8 || s.Timeouts != 0 || s.DegradedPeriod != 1 {
				t.Errorf("%s: Degraded %v, Stats %+v -> %+v; want 8 server errors, no Timeouts, 1 degraded period", what, r.l.Degraded(), before, s)
			}
		}
		oomOff()
		for _, r := range rigs {
			what := fmt.Sprintf("%v cache=%v", r.pol, r.cache)
			d, err := r.l.AllowN(ctx, "k", 0)
			if err != nil || r.l.Degraded() || d.Remaining != 7 {
				t.Errorf("%s after OOM: peek %+v, %v, Degraded %v; want the server's, Remaining 7 (nothing written under OOM)", what, d, err, r.l.Degraded())
			}
		}
	})
}

// TestAudit87RdLateReplyNotMisattributed: docs/distributed.md, "Timed
// out, yet executed": "Both clients close a connection whose read timed
// out; the server still runs what it had read". A network that holds
// the server's replies (a proxy, 400 ms) past the call's deadline
// (Timeout 100 ms): the call is the policy's (ErrDegraded wrapping a
// deadline, one Timeout), the server ran it (the key's debt is there);
// the next call, on another key with another n, made while the late
// reply is still on its way, gets its own answer (Remaining Burst - 5),
// not the late reply of the call before (Remaining Burst - 1), and is the
// server's (no error, Degraded false). Both clients, FailClosed.
func TestAudit87RdLateReplyNotMisattributed(t *testing.T) {
	lim := PerSecond(1, 100)
	forEachClient(t, func(t *testing.T, e *env) {
		px := a87rdNewProxy(t, e.srv.addr())
		clk := sketchtest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		cfg := LimiterConfig{Name: "a87rdlate", Limit: lim, Clock: clk, Timeout: 100 * time.Millisecond, CellsPerLevel: 64}
		l := a87rdLimiterVia(t, e.lib, px.addr(), cfg)
		cfg.Timeout, cfg.ServerCheck = 0, CheckSkip
		direct := e.limiter(t, cfg)
		ctx := context.Background()
		if d, err := l.Allow(ctx, "w"); err != nil || !d.Allowed {
			t.Fatalf("warm-up: %+v, %v", d, err)
		}
		px.delay.Store(int64(400 * time.Millisecond))
		d, err := l.AllowN(ctx, "a", 1)
		px.delay.Store(0)
		if !errors.Is(err, ErrDegraded) || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)) || d.Allowed {
			t.Fatalf("a call whose reply is held past its deadline: %+v, %v; want FailClosed's denial, ErrDegraded wrapping a deadline", d, err)
		}
		if s := l.Stats(); s.Timeouts != 1 || s.ServerErrors != 1 {
			t.Errorf("Stats %+v; want one Timeout, one server error", s)
		}
		ctx2, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		d, err = l.AllowN(ctx2, "b", 5)
		if err != nil || !d.Allowed || d.Remaining != lim.Burst-5 || l.Degraded() {
			t.Errorf("the next call, AllowN(b, 5): %+v, %v, Degraded %v; want the server's admission with Remaining %v (%v would be the late reply of AllowN(a, 1))",
				d, err, l.Degraded(), lim.Burst-5, lim.Burst-1)
		}
		// The server runs what it had read: a loaded machine can close the
		// timed-out call's connection before the proxy has forwarded it
		// (make test once read a's debt 0), so a's debt is 1 or 0, never
		// more; b's is its own 5.
		for _, k := range []struct {
			key   string
			debts []float64
		}{{"a", []float64{1, 0}}, {"b", []float64{5}}} {
			pk, err := direct.AllowN(ctx, k.key, 0)
			if err != nil || !slices.Contains(k.debts, lim.Burst-pk.Remaining) {
				t.Errorf("the server's debt of %q: %+v, %v; want one of %v (the timed-out call ran, if the server had read it)", k.key, pk, err, k.debts)
			}
		}
	})
}

// TestAudit87RdFallbackAcrossPartition: policy.go, LocalFallback: "N
// instances that all fall back admit at most the global rate between
// them"; docs/distributed.md, Failure policies: the fallback is "a local
// lock-free limiter at Rate/N, Burst/N". Two instances (N = 2, rueidis),
// 10/s x 20, a frozen fake clock: the key is exhausted on the server (10
// admitted by each), then a network partition (a proxy refuses every
// connection; the server keeps its state): each instance's fallback
// admits exactly Burst/N = 10 (asserted), 20 in all, and denies the
// rest; after the partition heals the server still holds the debt of
// before (it never learns the fallback's admissions) and denies, with
// Degraded false. What it adds up to is logged for audit 87's report:
// the fallback starts from its own empty state, not from the server's
// debt, so 40 requests are admitted at one instant against a bucket of
// 20, which neither policy.go nor docs/distributed.md says.
func TestAudit87RdFallbackAcrossPartition(t *testing.T) {
	lim := PerSecond(10, 20)
	e := newEnv(t, "rueidis", "standalone")
	px := a87rdNewProxy(t, e.srv.addr())
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	cfg := LimiterConfig{Name: "a87rdpart", Limit: lim, Clock: clk, Policy: LocalFallback, Instances: 2, Timeout: time.Second, CellsPerLevel: 64}
	ls := []*Limiter{a87rdLimiterVia(t, "rueidis", px.addr(), cfg), a87rdLimiterVia(t, "rueidis", px.addr(), cfg)}
	ctx := context.Background()
	admitted := 0
	for i := range 24 {
		d, err := ls[i%2].Allow(ctx, "k")
		if err != nil {
			t.Fatalf("healthy call %d: %v", i, err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("the server admitted %d of 24; want Burst 20", admitted)
	}
	px.partition()
	during := 0
	for i, l := range ls {
		mine := 0
		for j := range 12 {
			d, err := l.Allow(ctx, "k")
			if !errors.Is(err, ErrDegraded) {
				t.Fatalf("instance %d call %d during the partition: %+v, %v; want ErrDegraded", i, j, d, err)
			}
			if d.Allowed {
				mine++
			}
		}
		if mine != 10 {
			t.Errorf("instance %d admitted %d of 12 during the partition; want Burst/N = 10", i, mine)
		}
		during += mine
	}
	px.heal()
	audit86WaitUp(t, ls[0]) // the first calls may still meet a closed connection
	d, err := ls[0].Allow(ctx, "k")
	if err != nil || d.Allowed || ls[0].Degraded() {
		t.Errorf("after the partition: %+v, %v, Degraded %v; want the server's denial (its debt of before)", d, err, ls[0].Degraded())
	}
	t.Logf("admitted at one instant: %d by the server (its Burst), %d by the fallbacks during the partition: %d against a bucket of %v",
		admitted, during, admitted+during, lim.Burst)
}
