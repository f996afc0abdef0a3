package limit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// countingHasher is XXH3 that counts the keys it hashes.
type countingHasher struct {
	sketch.Hasher
	n *atomic.Int64
}

func (h countingHasher) Sum64(key []byte) uint64 { h.n.Add(1); return h.Hasher.Sum64(key) }
func (h countingHasher) Sum64String(key string) uint64 {
	h.n.Add(1)
	return h.Hasher.Sum64String(key)
}

// TestWithHasher: the limiter hashes its keys with the factory given
// (and so never with the default SipHash): one hasher for the Buckets
// engine, one per generation for the count-min.
func TestWithHasher(t *testing.T) {
	for _, c := range []struct {
		engine limit.Engine
		want   int64
	}{{limit.Buckets, 1}, {limit.CountMin, 2}} {
		var n atomic.Int64
		var seeds atomic.Int64
		f := func(seed uint64) sketch.Hasher {
			seeds.Add(1)
			return countingHasher{sketch.XXH3()(seed), &n}
		}
		l, err := limit.New(10, 5, limit.WithHasher(f), limit.WithPrefetch(false), limit.WithEngine(c.engine))
		if err != nil {
			t.Fatal(err)
		}
		if seeds.Load() != c.want {
			t.Fatalf("%v: the factory built %d hashers, want %d", c.engine, seeds.Load(), c.want)
		}
		for name, f := range map[string]func(){
			"Allow":  func() { l.Allow("k") },
			"Peek":   func() { l.Peek("k") },
			"Decide": func() { l.Decide("k") },
		} {
			before := n.Load()
			f()
			if n.Load() == before {
				t.Errorf("%v: %s did not hash with WithHasher's factory", c.engine, name)
			}
		}
	}
}

// TestMultiWindows: Windows returns the windows in order, as a copy.
func TestMultiWindows(t *testing.T) {
	a := limit.MustNew(10, 5)
	b := limit.MustNew(limit.Every(time.Hour), 100)
	m, err := limit.NewMulti(a, b)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Windows()
	if len(w) != 2 || w[0] != a || w[1] != b {
		t.Fatalf("Windows() = %v, want [a b]", w)
	}
	w[0] = nil
	if m.Windows()[0] != a {
		t.Fatal("Windows() shares the Multi's slice")
	}
}

// TestShortForms: each short form is its full form at the clock's
// reading with n = 1: twin limiters on one clock, one driven through the
// short forms and one through the full forms, answer alike at every step.
func TestShortForms(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_000_000)
	twin := func() *limit.Limiter {
		return limit.MustNew(10, 3, limit.WithClock(clk), limit.WithSeed(1), limit.WithRejectCost(0.5))
	}
	a, b := twin(), twin()
	ma, mb := mustMulti(t, twin(), twin()), mustMulti(t, twin(), twin())
	for i := range 12 {
		now := clk.Now()
		if x, y := a.Tokens("k"), b.TokensAt(now, "k"); x != y {
			t.Fatalf("step %d: Tokens %v, TokensAt %v", i, x, y)
		}
		if x, y := a.Peek("k"), b.PeekN(now, "k", 1); x != y {
			t.Fatalf("step %d: Peek %+v, PeekN %+v", i, x, y)
		}
		if x, y := a.Allow("k"), b.AllowN(now, "k", 1); x != y {
			t.Fatalf("step %d: Allow %v, AllowN %v", i, x, y)
		}
		if x, y := a.Decide("d"), b.DecideN(now, "d", 1); x != y {
			t.Fatalf("step %d: Decide %+v, DecideN %+v", i, x, y)
		}
		if x, y := ma.Allow("m"), mb.AllowN(now, "m", 1); x != y {
			t.Fatalf("step %d: Multi.Allow %v, Multi.AllowN %v", i, x, y)
		}
		ra, rb := a.Reserve("r"), b.ReserveN(now, "r", 1)
		if ra.OK() != rb.OK() || ra.Delay() != rb.Delay() {
			t.Fatalf("step %d: Reserve (%v, %v), ReserveN (%v, %v)", i, ra.OK(), ra.Delay(), rb.OK(), rb.Delay())
		}
		clk.Advance(40 * time.Millisecond)
	}
	// Wait is WaitN with n = 1: both return at once with room, and both
	// give up alike on a context that has ended.
	ctx := context.Background()
	if err := a.Wait(ctx, "w"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := b.WaitN(ctx, "w", 1); err != nil {
		t.Fatalf("WaitN: %v", err)
	}
	a.AllowN(clk.Now(), "w", 2)
	b.AllowN(clk.Now(), "w", 2)
	dl, cancel := context.WithDeadline(ctx, clk.Now().Add(time.Millisecond))
	defer cancel()
	ea, eb := a.Wait(dl, "w"), b.WaitN(dl, "w", 1)
	if ea == nil || eb == nil || ea.Error() != eb.Error() {
		t.Fatalf("Wait on an ended context: %v, WaitN: %v", ea, eb)
	}
}

func mustMulti(t *testing.T, windows ...*limit.Limiter) *limit.Multi {
	t.Helper()
	m, err := limit.NewMulti(windows...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
