package limit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// TestMultiRetryAfter: a Multi's RetryAfter is the time when every
// window admits, so the retry at exactly RetryAfter is admitted and one
// 1 ms earlier is not. Before, it was the first denying window's: with
// per-user 10/s and per-tenant 1/s, the retry at 100 ms met the tenant's
// denial (and a second RetryAfter, 900 ms later).
func TestMultiRetryAfter(t *testing.T) { forEngines(t, testMultiRetryAfter) }

func testMultiRetryAfter(t *testing.T, eng limit.Option) {
	clk := sketchtest.NewFakeClock()
	user := limit.MustNew(10, 1, limit.WithClock(clk), eng)
	tenant := limit.MustNew(1, 1, limit.WithClock(clk), eng)
	m, err := limit.NewMulti(user, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if !m.DecideKeys(clk.Now(), 1, "alice", "acme").Allowed {
		t.Fatal("first request denied")
	}
	d := m.DecideKeys(clk.Now(), 1, "alice", "acme")
	if d.Allowed || d.RetryAfter != time.Second || d.Limit != 1 || d.ResetAfter != time.Second {
		t.Fatalf("denial %+v, want RetryAfter 1s (the tenant's), ResetAfter 1s", d)
	}
	at := clk.Now()
	clk.SetTime(at.Add(d.RetryAfter - time.Millisecond))
	if m.DecideKeys(clk.Now(), 1, "alice", "acme").Allowed {
		t.Fatal("admitted 1 ms before RetryAfter")
	}
	clk.SetTime(at.Add(d.RetryAfter))
	if d2 := m.DecideKeys(clk.Now(), 1, "alice", "acme"); !d2.Allowed {
		t.Fatalf("retry at RetryAfter denied: %+v", d2)
	}
}

// The same over random windows (exact rates), keys and schedules: at
// every denial, some window still denies 1 ms before RetryAfter and every
// window admits at RetryAfter (Peek: no write), where the Multi admits;
// Remaining is the least of the windows'.
func TestMultiRetryAfterProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := sketchtest.NewFakeClock()
		nw := rapid.IntRange(1, 3).Draw(rt, "windows")
		ws := make([]*limit.Limiter, nw)
		for i := range ws {
			ms := rapid.Int64Range(1, 2000).Draw(rt, fmt.Sprint("everyMs", i))
			burst := rapid.IntRange(1, 20).Draw(rt, fmt.Sprint("burst", i))
			ws[i] = limit.MustNew(limit.Every(time.Duration(ms)*time.Millisecond), burst, limit.WithClock(clk),
				limit.WithRejectCost(float64(rapid.IntRange(0, 1).Draw(rt, fmt.Sprint("reject", i)))), drawEngine(rt))
		}
		m, err := limit.NewMulti(ws...)
		if err != nil {
			rt.Fatal(err)
		}
		users := []string{"u1", "u2"}
		for range rapid.IntRange(1, 100).Draw(rt, "ops") {
			clk.Advance(time.Duration(rapid.IntRange(0, 500).Draw(rt, "gap")) * time.Millisecond)
			keys := make([]string, nw)
			for i := range keys {
				keys[i] = rapid.SampledFrom(users).Draw(rt, "key")
			}
			n := rapid.IntRange(1, 3).Draw(rt, "n")
			d := m.DecideKeys(clk.Now(), n, keys...)
			least := -1
			for i, w := range ws {
				if r := w.PeekN(clk.Now(), keys[i], 1).Remaining; least < 0 || r < least {
					least = r
				}
			}
			if d.Allowed || d.Never {
				continue
			}
			// Peek's Remaining is after one more token: the state has one
			// more (or the window is empty).
			if d.Remaining < least || d.Remaining > least+1 {
				rt.Fatalf("Remaining %d, windows' least (after one more) %d", d.Remaining, least)
			}
			at := clk.Now()
			clk.SetTime(at.Add(d.RetryAfter - time.Millisecond))
			all := true
			for i, w := range ws {
				all = all && w.PeekN(clk.Now(), keys[i], n).Allowed
			}
			if all {
				rt.Fatalf("every window admits 1 ms before RetryAfter %v", d.RetryAfter)
			}
			clk.SetTime(at.Add(d.RetryAfter))
			for i, w := range ws {
				if p := w.PeekN(clk.Now(), keys[i], n); !p.Allowed {
					rt.Fatalf("window %d denies at RetryAfter %v: %+v", i, d.RetryAfter, p)
				}
			}
			if !m.DecideKeys(clk.Now(), n, keys...).Allowed {
				rt.Fatalf("Multi denies at RetryAfter %v", d.RetryAfter)
			}
		}
	})
}
