package redis

// Tests added by the audit16 mutation pass over the Redis module: each one
// kills a mutant the rest of the suite let through (see the comments).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	goredis "github.com/redis/go-redis/v9"
)

// TestAudit16BackwardsStepKeepsStamp: a backwards step of the server clock
// is no elapsed time per cell, and a write keeps the newer stamp
// (docs/distributed.md, "The server's clock": "a cell stamped after tm is
// not decayed and keeps its stamp"; docs/design.md: "an update keeps the
// newer of the two stamps, so stamps never move back"). One key, no
// collisions, so the server agrees with the in-process sketch on the same
// clock (whose Timebase stands still after the step). Kills the mutant
// that stamps a written cell with the (earlier) call time: it decays the
// cell from the step-back time, before the clock has caught up.
func TestAudit16BackwardsStepKeepsStamp(t *testing.T) {
	forEachClient(t, func(t *testing.T, e *env) {
		for _, law := range []struct {
			name string
			d    decay.Decay
		}{{"linear", decay.Linear(3)}, {"exp", decay.Exponential(0.7)}} {
			t.Run(law.name, func(t *testing.T) {
				clk := sketchtest.NewFakeClock()
				clk.Set(1_000_000)
				cfg := Config{Name: "a16back:" + law.name, Levels: 3, CellsPerLevel: 64, Decay: law.d, Lo: 0, Hi: 1000,
					Aggregator: sketch.Min, Seed: 3, Clock: clk}
				rs := e.sketch(t, cfg)
				ls, err := sketch.New(sketch.Config{Levels: 3, CellsPerLevel: 64, Decay: law.d, Lo: 0, Hi: 1000,
					Aggregator: sketch.Min, Seed: 3, Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				const key = "k"
				step := 0
				check := func(what string, got float64, err error, want float64) {
					t.Helper()
					step++
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					checkClose(t, step, what, got, want)
				}
				// Creates the string (epoch 1_000_000), then a write 1 s later.
				got, err := rs.UpdateAndQuery(ctx, key, 5)
				check("UpdateAndQuery at 1_000_000", got, err, ls.UpdateAndQuery([]byte(key), 5))
				clk.Set(1_001_000)
				got, err = rs.UpdateAndQuery(ctx, key, 10)
				check("UpdateAndQuery at 1_001_000", got, err, ls.UpdateAndQuery([]byte(key), 10))
				// The clock steps back 500 ms (still after the epoch): a
				// write then keeps the cells' newer stamps.
				clk.Set(1_000_500)
				got, err = rs.UpdateAndQuery(ctx, key, 1)
				check("UpdateAndQuery after the step back", got, err, ls.UpdateAndQuery([]byte(key), 1))
				for _, at := range []int64{1_000_700, 1_000_999, 1_001_000, 1_001_300, 1_002_000} {
					clk.Set(at)
					got, err = rs.Query(ctx, key)
					check("Query at "+strconv.FormatInt(at, 10), got, err, ls.Query([]byte(key)))
				}
			})
		}
	})
}

// TestAudit16FallbackOverBurst: under LocalFallback with the server down,
// a request above the limiter's Burst is the fallback's decision (it can
// never fit: RetryAfter -1, Never), with the fallback's Limit; only an n
// above Burst/N but within Burst gets no decision, with the limiter's
// Limit (Decision.RetryAfter's and LocalFallback's docs). Kills the mutant
// that sends every n above Burst/N to the no-decision branch.
func TestAudit16FallbackOverBurst(t *testing.T) {
	// Nothing listens on a free port: every round trip fails at once.
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	gc := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { gc.Close() })
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "a16fb", Limit: PerSecond(4, 10), Policy: LocalFallback,
		Instances: 4, ServerCheck: CheckSkip, Timeout: 2 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fb := Limit{Rate: 1, Burst: 2.5}

	// n above Burst: the fallback denies, never.
	d, err := l.AllowN(ctx, "k", 11)
	if !errors.Is(err, ErrDegraded) {
		t.Fatalf("AllowN(11): err = %v; want ErrDegraded", err)
	}
	if d.Allowed || d.RetryAfter != -1 || d.Limit != fb || d.Remaining != fb.Burst || d.ResetAfter != 0 {
		t.Fatalf("AllowN(11) over Burst 10, server down = %+v; want denied by the fallback: RetryAfter -1, Limit %+v, Remaining %v, ResetAfter 0", d, fb, fb.Burst)
	}
	ld, err := l.DecideContext(ctx, "k", 11)
	if !errors.Is(err, ErrDegraded) || ld.Allowed || !ld.Never || ld.Burst != 2 || ld.Remaining != 2 {
		t.Fatalf("DecideContext(11) = %+v, %v; want Never with the fallback's Burst 2, Remaining 2", ld, err)
	}

	// n within Burst, above Burst/N: no decision, the limiter's Limit.
	d, err = l.AllowN(ctx, "k", 3)
	if !errors.Is(err, ErrDegraded) || d.Allowed || d.RetryAfter != -1 || d.Limit != l.Limit() {
		t.Fatalf("AllowN(3) = %+v, %v; want no decision (RetryAfter -1) with the limiter's Limit", d, err)
	}
	// n within Burst/N: the fallback admits Burst/N's worth.
	for i := range 2 {
		if d, err := l.AllowN(ctx, "k", 1); !errors.Is(err, ErrDegraded) || !d.Allowed || d.Limit != fb {
			t.Fatalf("AllowN(1) #%d = %+v, %v; want admitted by the fallback", i, d, err)
		}
	}
	d, _ = l.AllowN(ctx, "k", 1)
	if d.Allowed || d.Limit != fb || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third AllowN(1) = %+v; want denied by the fallback (debt 2 of 2.5 at 1/s: room for 1 in 500ms)", d)
	}
	if st := l.Stats(); st.PolicyAdmits != 2 || st.PolicyDenials != 4 {
		t.Fatalf("Stats %+v; want 2 policy admits, 4 policy denials", st)
	}
}

// TestAudit16DecodeReplyChecks: the decoder refuses every malformed reply
// its doc lists, each with every other field well formed (the fuzz seeds
// pair each defect with another, so the seed run alone let a decoder
// through that took allowed = 2 or retry = -2). Kills the mutants that
// loosen "allowed 0 or 1" and "whole numbers >= -1".
func TestAudit16DecodeReplyChecks(t *testing.T) {
	rep := func(ok byte, e, retry, reset float64) string {
		b := []byte{ok}
		for _, v := range []float64{e, retry, reset} {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return string(b)
	}
	good := []struct {
		b    string
		want reply
	}{
		{rep(1, 3.5, -1, -1), reply{ok: true, estimate: 3.5, retryMs: -1, resetMs: -1}},
		{rep(0, 10, 0, 0), reply{estimate: 10}},
		{rep(0, -2.25, 1<<53-1, 1234), reply{estimate: -2.25, retryMs: 1<<53 - 1, resetMs: 1234}},
	}
	for _, g := range good {
		if r, err := decodeReply("T", g.b); err != nil || r != g.want {
			t.Errorf("decodeReply(%x) = %+v, %v; want %+v", g.b, r, err, g.want)
		}
	}
	for name, b := range map[string]string{
		"allowed 2":     rep(2, 1, -1, -1),
		"allowed 255":   rep(255, 1, 0, 0),
		"estimate NaN":  rep(1, math.NaN(), -1, -1),
		"estimate +Inf": rep(0, math.Inf(1), 5, 5),
		"estimate -Inf": rep(0, math.Inf(-1), 5, 5),
		"retry -2":      rep(0, 1, -2, 5),
		"reset -2":      rep(0, 1, 5, -2),
		"retry -1.5":    rep(0, 1, -1.5, 5),
		"retry 0.5":     rep(0, 1, 0.5, 5),
		"reset 2^53":    rep(0, 1, 5, 1<<53),
		"retry NaN":     rep(0, 1, math.NaN(), 5),
		"reset +Inf":    rep(0, 1, 5, math.Inf(1)),
		"24 bytes":      rep(1, 1, -1, -1)[:24],
		"26 bytes":      rep(1, 1, -1, -1) + "\x00",
		"empty":         "",
	} {
		if r, err := decodeReply("T", b); err == nil {
			t.Errorf("%s: decodeReply(%x) = %+v, nil; want an error", name, b, r)
		}
	}
}

// TestAudit16IODeadlineCountsAsTimeout: a round trip that fails on the
// connection's own i/o deadline (go-redis's ReadTimeout, no context
// deadline) is a timeout in Stats (Stats.Timeouts: "context.DeadlineExceeded,
// or a connection's i/o deadline: os.ErrDeadlineExceeded"). The server is a
// listener that accepts and never answers. Kills the mutant that counts
// only context.DeadlineExceeded.
func TestAudit16IODeadlineCountsAsTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	gc := goredis.NewClient(&goredis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { gc.Close() })
	l, err := NewLimiterGoRedis(gc, LimiterConfig{Name: "a16io", Limit: PerSecond(1, 5), ServerCheck: CheckSkip})
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Allow(context.Background(), "k")
	if !errors.Is(err, ErrDegraded) || !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Allow = %+v, %v; want ErrDegraded wrapping an i/o deadline (not a context's)", d, err)
	}
	if d.Allowed {
		t.Fatalf("FailClosed admitted: %+v", d)
	}
	if st := l.Stats(); st.ServerErrors != 1 || st.Timeouts != 1 || st.PolicyDenials != 1 || st.DegradedPeriod != 1 {
		t.Fatalf("Stats %+v; want 1 server error counted as a timeout", st)
	}
}

// TestAudit16ResetAfterNotEarly: ResetAfter is the first whole ms at which
// the server's own estimate of the key's debt is 0, never one before (the
// limiter's decisions are never early). Counting in tokens (Rate 0.7 with
// a Burst too large for exact units), the closed form ceil(e/rate x 1000)
// lands one ms early for a debt of 7.875: 7.875 - 0.7 x 11250/1000 leaves
// 8.9e-16 in float64, so the answer is 11251 ms. Kills the mutant of
// sketch.lua's retryReset without its upward step.
func TestAudit16ResetAfterNotEarly(t *testing.T) {
	e := newEnv(t, "rueidis", "standalone")
	ctx := context.Background()
	for _, tc := range []struct{ rate, burst, take float64 }{
		{0.7, 20000, 7.875}, {0.7, 20000, 15.75}, {0.7, 20000, 31.5},
	} {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		name := fmt.Sprintf("a16reset:%v:%v", tc.rate, tc.take)
		l := e.limiter(t, LimiterConfig{Name: name, Limit: PerSecond(tc.rate, tc.burst), Clock: clk})
		if l.unit != 1 {
			t.Fatalf("%s: unit %v; the case needs a limiter counting tokens", name, l.unit)
		}
		d, err := l.AllowN(ctx, "k", tc.take)
		if err != nil || !d.Allowed || d.ResetAfter <= time.Millisecond {
			t.Fatalf("%s: AllowN(%v) = %+v, %v", name, tc.take, d, err)
		}
		clk.Advance(d.ResetAfter - time.Millisecond)
		if q, err := l.Sketch().Query(ctx, "k"); err != nil || !(q > 0) {
			t.Fatalf("%s: debt 1ms before ResetAfter %v = %v, %v; want > 0 (ResetAfter not the first ms at 0)", name, d.ResetAfter, q, err)
		}
		clk.Advance(time.Millisecond)
		if q, err := l.Sketch().Query(ctx, "k"); err != nil || q != 0 {
			t.Fatalf("%s: debt at ResetAfter %v = %v, %v; want 0 (ResetAfter early)", name, d.ResetAfter, q, err)
		}
	}
}
