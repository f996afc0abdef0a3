package limit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

var bothEngines = []limit.Engine{limit.Buckets, limit.CountMin}

// TestTierDecisions: a tier of rate r and burst b on a limiter of rate R
// decides as the token bucket (r, b) for a key that only it uses, on
// both engines: its full burst at once, then one token per 1/r, with
// RetryAfter, ResetAfter, NextAfter and Remaining in its own tokens.
func TestTierDecisions(t *testing.T) {
	for _, e := range bothEngines {
		t.Run(e.String(), func(t *testing.T) {
			// 10/s, MaxDebt 40 tokens (4 s): tiers down to 10/4 with burst 10.
			l, clk := newFake(t, 10, 10, limit.WithMaxDebt(40), limit.WithEngine(e))
			free, err := l.Tier("free", 2.5, 10) // a token is 400 ms
			if err != nil {
				t.Fatal(err)
			}
			if !free.Exact() || free.Name() != "free" || free.Limit() != 2.5 || free.Burst() != 10 || free.MaxDebt() != 10 {
				t.Fatalf("tier: exact %v name %q limit %v burst %d maxDebt %v", free.Exact(), free.Name(), free.Limit(), free.Burst(), free.MaxDebt())
			}
			for i := range 10 {
				if d := free.Decide("k"); !d.Allowed || d.Remaining != 9-i || d.Policy != "free" || d.Limit != 2.5 || d.Burst != 10 {
					t.Fatalf("request %d: %+v", i, d)
				}
			}
			d := free.Decide("k")
			want := limit.Decision{Limit: 2.5, Burst: 10, Policy: "free", RetryAfter: 400 * time.Millisecond,
				ResetAfter: 4 * time.Second, NextAfter: 400 * time.Millisecond}
			if d != want {
				t.Fatalf("denial %+v, want %+v", d, want)
			}
			clk.Advance(399 * time.Millisecond)
			if free.Allow("k") {
				t.Fatal("admitted 1 ms before RetryAfter")
			}
			clk.Advance(time.Millisecond)
			if !free.Allow("k") {
				t.Fatal("denied at RetryAfter")
			}
			if got := free.Tokens("k"); got != 0 {
				t.Fatalf("Tokens %v, want 0", got)
			}
			// The limiter's own policy reads the same debt (4 s) in its
			// tokens: 40 owed against a burst of 10.
			if got := l.Tokens("k"); got != -30 {
				t.Fatalf("limiter Tokens %v, want -30", got)
			}
			if d := l.Decide("k"); d.Allowed || d.RetryAfter != 3100*time.Millisecond {
				t.Fatalf("limiter on the tier's debt: %+v", d)
			}
			// n above the tier's burst: Never; a reservation queues in the
			// tier's tokens within the limiter's MaxDebt.
			if d := free.DecideN(clk.Now(), "k2", 11); !d.Never || d.RetryAfter != limit.InfDuration {
				t.Fatalf("n > burst: %+v", d)
			}
			free.ReserveN(clk.Now(), "k2", 4)
			r := free.ReserveN(clk.Now(), "k2", 4)
			if !r.OK() || r.Delay() != 0 {
				t.Fatalf("reserve within the burst: ok %v delay %v", r.OK(), r.Delay())
			}
			if r := free.ReserveN(clk.Now(), "k2", 3); r.OK() {
				t.Fatal("reservation past MaxDebt (10 tier tokens) admitted")
			}
			r.Cancel()
			if got := free.Tokens("k2"); got != 6 {
				t.Fatalf("Tokens after Cancel %v, want 6", got)
			}
		})
	}
}

// TestTierSharesKeys: tiers of one limiter share every key's debt, held
// as time: a key that spent the free tier's burst (2 s of drain at 5/s)
// has spent 2 s of the paid tier's 4 s, and the paid tier's requests
// cost 1/20 s.
func TestTierSharesKeys(t *testing.T) {
	for _, e := range bothEngines {
		t.Run(e.String(), func(t *testing.T) {
			l, clk := newFake(t, 20, 40, limit.WithEngine(e)) // MaxDebt 80 tokens: 4 s
			free, err := l.Tier("free", 5, 10)
			if err != nil {
				t.Fatal(err)
			}
			paid, err := l.Tier("paid", 20, 80)
			if err != nil {
				t.Fatal(err)
			}
			for range 10 {
				if !free.Allow("u") {
					t.Fatal("free burst denied")
				}
			}
			if d := free.Decide("u"); d.Allowed || d.RetryAfter != 200*time.Millisecond {
				t.Fatalf("free after its burst: %+v", d)
			}
			// 2 s owed of paid's 4 s: 40 paid tokens left.
			if d := paid.PeekN(clk.Now(), "u", 40); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("paid peek 40: %+v", d)
			}
			if d := paid.PeekN(clk.Now(), "u", 41); d.Allowed || d.RetryAfter != 50*time.Millisecond {
				t.Fatalf("paid peek 41: %+v", d)
			}
			if !paid.AllowN(clk.Now(), "u", 40) {
				t.Fatal("paid denied its remaining 40")
			}
			if d := free.Decide("u"); d.Allowed || d.RetryAfter != 2200*time.Millisecond || d.ResetAfter != 4*time.Second {
				t.Fatalf("free after paid: %+v", d)
			}
		})
	}
}

// TestSetLimitMidDebt: SetLimit keeps every key's debt as time to drain:
// a key in debt still drains it in the same time (ResetAfter), its new
// requests cost the new rate's tokens against the burst in the new
// tokens, and RetryAfter stays exact.
func TestSetLimitMidDebt(t *testing.T) {
	for _, e := range bothEngines {
		t.Run(e.String(), func(t *testing.T) {
			l, clk := newFake(t, 10, 10, limit.WithMaxDebt(40), limit.WithEngine(e))
			for range 10 {
				l.Allow("k")
			}
			if d := l.Decide("k"); d.Allowed || d.RetryAfter != 100*time.Millisecond || d.ResetAfter != time.Second {
				t.Fatalf("before: %+v", d)
			}
			// Faster: a token is 50 ms, the burst 500 ms; 1 s owed.
			if err := l.SetLimit(20); err != nil {
				t.Fatal(err)
			}
			if l.Limit() != 20 || l.Burst() != 10 || !l.Exact() {
				t.Fatalf("after SetLimit(20): %v %d exact %v", l.Limit(), l.Burst(), l.Exact())
			}
			d := l.Decide("k")
			want := limit.Decision{Limit: 20, Burst: 10, Policy: "default", RetryAfter: 550 * time.Millisecond,
				ResetAfter: time.Second, NextAfter: 550 * time.Millisecond}
			if d != want {
				t.Fatalf("after SetLimit(20): %+v, want %+v", d, want)
			}
			if got := l.Tokens("k"); got != -10 {
				t.Fatalf("Tokens %v, want -10", got)
			}
			clk.Advance(549 * time.Millisecond)
			if l.Allow("k") {
				t.Fatal("admitted 1 ms before RetryAfter")
			}
			clk.Advance(time.Millisecond)
			if !l.Allow("k") {
				t.Fatal("denied at RetryAfter")
			}
			// Slower: a token is 400 ms, the burst 4 s; 500 ms owed.
			if err := l.SetLimit(2.5); err != nil {
				t.Fatal(err)
			}
			if d := l.Decide("k"); !d.Allowed || d.Remaining != 7 || d.ResetAfter != 900*time.Millisecond {
				t.Fatalf("after SetLimit(2.5): %+v", d)
			}
			// A burst that does not fit MaxDebt (4 s) in the new tokens.
			err := l.SetBurst(11)
			var me *limit.MaxDebtError
			if !errors.As(err, &me) || !errors.Is(err, sketch.ErrInvalidConfig) || me.Need != 44 || me.Have != 40 ||
				!strings.Contains(err.Error(), "needs MaxDebt >= 44") {
				t.Fatalf("SetBurst(11) at 2.5/s: %v", err)
			}
			if l.Burst() != 10 || l.Limit() != 2.5 {
				t.Fatal("a refused SetBurst changed the policy")
			}
			if err := l.SetBurst(4); err != nil {
				t.Fatal(err)
			}
			// 900 ms owed against 1.6 s: one more token (400 ms) fits.
			if d := l.Decide("k"); !d.Allowed || d.Remaining != 0 || d.Burst != 4 {
				t.Fatalf("after SetBurst(4): %+v", d)
			}
			if err := l.SetLimit(10); err != nil {
				t.Fatal(err)
			}
			if err := l.SetBurst(10); err != nil {
				t.Fatal(err)
			}
			if !l.Exact() || l.Limit() != 10 || l.Burst() != 10 {
				t.Fatal("back to New's policy: not the same")
			}
		})
	}
}

// TestTierErrors: a tier or a SetLimit that does not fit MaxDebt is a
// *MaxDebtError naming the MaxDebt it needs (and WithMaxDebt(Need)
// makes it fit); bad rates and bursts are *sketch.ConfigErrors; Inf
// limiters take no finite policy; nothing changes on an error.
func TestTierErrors(t *testing.T) {
	for _, e := range bothEngines {
		l, _ := newFake(t, 10, 10, limit.WithEngine(e)) // MaxDebt 20
		_, err := l.Tier("slow", 2, 10)                 // 10 tokens of 500 ms: 50 of 10/s
		var me *limit.MaxDebtError
		if !errors.As(err, &me) || me.Need != 50 || me.Have != 20 || me.Limit != 2 || me.Burst != 10 || !errors.Is(err, sketch.ErrInvalidConfig) {
			t.Fatalf("%v: Tier(2, 10): %v", e, err)
		}
		if !strings.HasPrefix(err.Error(), "limit: ") {
			t.Fatalf("no package prefix: %v", err)
		}
		l2, _ := newFake(t, 10, 10, limit.WithEngine(e), limit.WithMaxDebt(me.Need))
		if _, err := l2.Tier("slow", 2, 10); err != nil {
			t.Fatalf("%v: with WithMaxDebt(%v): %v", e, me.Need, err)
		}
		if err := l.SetLimit(4); !errors.As(err, &me) || me.Need != 25 {
			t.Fatalf("%v: SetLimit(4): %v", e, err)
		}
		if l.Limit() != 10 {
			t.Fatal("a refused SetLimit changed the limit")
		}
		for _, c := range []struct {
			lim   limit.Limit
			burst int
			field string
		}{
			{0, 1, "Limit"}, {-1, 1, "Limit"}, {limit.Inf, 1, "Limit"}, {1e30, 1, "Limit"},
			{10, 0, "Burst"}, {10, 1 << 25, "Burst"},
		} {
			_, err := l.Tier("", c.lim, c.burst)
			var ce *sketch.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("%v: Tier(%v, %d): %v, want a ConfigError on %s", e, float64(c.lim), c.burst, err, c.field)
			}
		}
		if err := l.SetBurst(0); err == nil {
			t.Fatal("SetBurst(0) accepted")
		}
	}
	inf := limit.MustNew(limit.Inf, 3)
	if _, err := inf.Tier("", 10, 1); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("Tier of Inf: %v", err)
	}
	if err := inf.SetLimit(10); !errors.Is(err, sketch.ErrInvalidConfig) {
		t.Fatalf("SetLimit(10) of Inf: %v", err)
	}
	if err := inf.SetLimit(limit.Inf); err != nil {
		t.Fatal(err)
	}
	if err := inf.SetBurst(5); err != nil || inf.Burst() != 5 || inf.Decide("k").Remaining != 5 {
		t.Fatalf("SetBurst on Inf: %v, burst %d", err, inf.Burst())
	}
	var zero limit.Limiter
	for name, f := range map[string]func(){
		"Tier":     func() { _, _ = zero.Tier("", 1, 1) },
		"SetLimit": func() { _ = zero.SetLimit(1) },
		"SetBurst": func() { _ = zero.SetBurst(1) },
		"zeroTier": func() { var tr limit.Tier; tr.Allow("k") },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "limit: zero") {
					t.Fatalf("%s on a zero value: recovered %v", name, r)
				}
			}()
			f()
		}()
	}
	if zero.Limit() != 0 || zero.Burst() != 0 || zero.Exact() || (*limit.Tier)(nil).Policies() != nil {
		t.Fatal("zero values' accessors")
	}
}

// TestTierAllocs: a Tier's hot paths allocate nothing, as the Limiter's.
func TestTierAllocs(t *testing.T) {
	for _, e := range bothEngines {
		l, clk := newFake(t, 100, 10, limit.WithEngine(e), limit.WithMaxDebt(100))
		tr, err := l.Tier("paid", 25, 10)
		if err != nil {
			t.Fatal(err)
		}
		key := "client"
		for name, f := range map[string]func(){
			"Allow":    func() { tr.Allow(key) },
			"AllowN":   func() { tr.AllowN(clk.Now(), key, 2) },
			"DecideN":  func() { tr.DecideN(clk.Now(), key, 1) },
			"PeekN":    func() { tr.PeekN(clk.Now(), key, 1) },
			"l.Allow":  func() { l.Allow(key) },
			"l.Decide": func() { l.Decide(key) },
		} {
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Fatalf("%v %s: %v allocs", e, name, a)
			}
		}
	}
}

// TestSetLimitRace: decisions racing SetLimit and SetBurst use one policy
// wholly: every Decision's (Limit, Burst) is a pair the setter made, and
// its Remaining fits that Burst; Tiers are never changed. Run under
// -race at GOMAXPROCS 1, 2 and 4.
func TestSetLimitRace(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	// The setter cycles SetLimit(lims[i]), SetBurst(bursts[i]): the
	// pairs it can make are (lims[i], bursts[i-1]) and (lims[i], bursts[i]).
	lims := []limit.Limit{100, 50, 200, 25}
	bursts := []int{10, 20, 5, 40}
	valid := map[[2]float64]bool{}
	for i := range lims {
		prev := bursts[(i+len(bursts)-1)%len(bursts)]
		valid[[2]float64{float64(lims[i]), float64(prev)}] = true
		valid[[2]float64{float64(lims[i]), float64(bursts[i])}] = true
	}
	for _, procs := range []int{1, 2, 4} {
		for _, e := range bothEngines {
			runtime.GOMAXPROCS(procs)
			l, err := limit.New(100, 10, limit.WithEngine(e), limit.WithMaxDebt(400))
			if err != nil {
				t.Fatal(err)
			}
			tier, err := l.Tier("fixed", 100, 10)
			if err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						key := fmt.Sprint(g, i%7)
						d := l.Decide(key)
						if !valid[[2]float64{float64(d.Limit), float64(d.Burst)}] || d.Remaining > d.Burst {
							errs <- fmt.Errorf("decision mixes policies: %+v", d)
							return
						}
						if !l.Exact() {
							errs <- fmt.Errorf("a policy of the cycle is not exact")
							return
						}
						if d := tier.Decide(key); d.Limit != 100 || d.Burst != 10 || d.Remaining > 10 {
							errs <- fmt.Errorf("tier changed: %+v", d)
							return
						}
					}
				}()
			}
			for i := 0; i < 400; i++ {
				j := i % len(lims)
				if err := l.SetLimit(lims[j]); err != nil {
					t.Fatal(err)
				}
				if err := l.SetBurst(bursts[j]); err != nil {
					t.Fatal(err)
				}
				if i%50 == 0 {
					runtime.Gosched()
				}
			}
			stop.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("GOMAXPROCS %d %v: %v", procs, e, err)
			}
		}
	}
}

// TestTierContext: a Tier is what httplimit.Limiter asks (DecideContext
// and Policies), and WaitN waits in its tokens.
func TestTierContext(t *testing.T) {
	clk := limittest.NewFakeClock()
	l := limit.MustNew(10, 10, limit.WithMaxDebt(40), limit.WithClock(clk))
	tr, err := l.Tier("", 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p := tr.Policies(); len(p) != 1 || p[0] != (limit.Policy{Name: "default", Limit: 5, Burst: 2}) {
		t.Fatalf("Policies %+v", p)
	}
	d, err := tr.DecideContext(context.Background(), "k", 2)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("DecideContext: %+v %v", d, err)
	}
	if err := tr.WaitN(context.Background(), "k", 3); !errors.Is(err, limit.ErrAboveBurst) {
		t.Fatalf("WaitN above the burst: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait(context.Background(), "k") }()
	clk.BlockUntilTimers(1)
	clk.Advance(200 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
