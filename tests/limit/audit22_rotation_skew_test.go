package limit_test

// audit22: the count-min engine writes an admitted request into its
// younger generations at a later time than the primary decided it at.
//
// core.Rotator.tryUpdate decides on the primary at the operation's time
// ms, then addYounger writes the younger generations through
// Sketch.AddStringAt / UpdateStringAt(t, ...), each of which converts t
// again with s.tb.Millis(t): max(t, the high-water mark now). When the
// mark moved meanwhile (another goroutine read a later clock: found by
// TestAudit22ConcurrentSteppingClock's first runs, under -race at
// GOMAXPROCS 2 and 4, around the count-min's first rotation), the
// younger generation takes the request later: a debt that the primary
// drains from ms drains there only from the later time, so the younger
// generation reads the key higher than the primary by up to rate x the
// skew. Once it is promoted, a key alone in its cells reads above its
// true debt (the exact bucket's): a retry at t+RetryAfter is denied
// (limit/doc.go, "Exactness": "a retry at t+RetryAfter is admitted";
// Decision.RetryAfter), WaitN returns before Tokens is back to >= 0, and
// the rotator's own doc is contradicted ("Update adds delta to the key's
// score in every generation, at one time"; "Every operation reads the
// clock once").
//
// Deterministic reproduction: the later mark is injected by the hasher
// (WithHasher; WithPrefetch(false) hashes the younger generation after
// the primary admitted): on its second call within the request it moves
// the fake clock 90 ms on and reads the limiter's Now, as a concurrent
// request at that time would. Suggested fix (internal/core/rotator.go,
// addYounger / updateAndQuery and the Update path): write every
// generation at the operation's own ms (an ms-taking add, as tryHold
// takes ms), not through a second Millis(t).

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

// a22HookHasher is SipHash with a hook run on the call'th hash after
// arming (then disarmed).
type a22HookHasher struct {
	inner sketch.Hasher
	h     *a22Hook
}

type a22Hook struct {
	armed atomic.Int64 // calls left before the hook runs; 0: disarmed
	run   func()
}

func (h a22HookHasher) Sum64(key []byte) uint64 { h.h.tick(); return h.inner.Sum64(key) }
func (h a22HookHasher) Sum64String(key string) uint64 {
	h.h.tick()
	return h.inner.Sum64String(key)
}

func (h *a22Hook) tick() {
	if h.armed.Load() > 0 && h.armed.Add(-1) == 0 {
		h.run()
	}
}

func (h *a22Hook) factory() sketch.HasherFactory {
	sip := sketch.SipHash()
	return func(seed uint64) sketch.Hasher { return a22HookHasher{inner: sip(seed), h: h} }
}

// TestAudit22FixedYoungerGenerationWrittenLater: limit.New(10, 1) on
// the count-min, MaxDebt 2, Period 200 ms (the least New takes), built
// at S, so the first rotation is due at S+200 and promotes the
// generation built with the first (it saw every write: no amnesty).
// Key k alone: admitted at S (debt 1 token), admitted at S+100 (its debt
// drained to 0: debt 1 again), and during that second request a
// concurrent reader moves the mark to S+190. At S+190, DecideN(k, 1) is
// denied with RetryAfter 10 ms: the exact bucket (debt 0.1) and the
// limiter agree. The retry at S+200 must be admitted; it is denied: the
// promoted generation took the S+100 request at S+190 and reads a debt
// of 0.9 at S+200.
func TestAudit22FixedYoungerGenerationWrittenLater(t *testing.T) {
	clk := limittest.NewFakeClock()
	S := int64(1_700_000_000_000)
	clk.Set(S)
	hook := &a22Hook{}
	l, err := limit.New(10, 1, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithMaxDebt(2),
		limit.WithPeriod(200*time.Millisecond), limit.WithPrefetch(false), limit.WithHasher(hook.factory()), limit.WithSeed(22))
	if err != nil {
		t.Fatal(err)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(S + ms) }
	if !l.AllowN(at(0), "k", 1) {
		t.Fatal("first request denied")
	}
	clk.Set(S + 100)
	hook.run = func() {
		clk.Set(S + 190)
		l.Now() // a concurrent request reads the clock: the mark moves
	}
	hook.armed.Store(2) // the primary's hash, then the younger generation's
	if !l.AllowN(at(100), "k", 1) {
		t.Fatal("request at S+100 (debt drained to 0) denied")
	}
	if hook.armed.Load() != 0 {
		t.Fatalf("the hook did not run (%d calls left)", hook.armed.Load())
	}
	d := l.DecideN(at(190), "k", 1)
	if d.Allowed || d.RetryAfter != 10*time.Millisecond {
		t.Fatalf("DecideN at S+190 = %+v, want denied with RetryAfter 10ms (debt 0.1 token)", d)
	}
	if l.Stats().Rotations != 0 {
		t.Fatal("rotated before S+200")
	}
	clk.Set(S + 200)
	d2 := l.DecideN(at(200), "k", 1)
	if r := l.Stats().Rotations; r != 1 {
		t.Fatalf("rotations at S+200: %d, want 1", r)
	}
	if !d2.Allowed {
		t.Fatalf("retry at t+RetryAfter (S+200) after the first rotation denied: %+v (the exact bucket has debt 0 there; Tokens reads %v: the promoted generation took the S+100 request at S+190)", d2, l.Tokens("k"))
	}
}

// TestAudit22YoungerGenerationNoSkewControl: the same schedule with the
// hook moving nothing: the retry at S+200 is admitted across the
// rotation, so the denial above is the skew's alone.
func TestAudit22YoungerGenerationNoSkewControl(t *testing.T) {
	clk := limittest.NewFakeClock()
	S := int64(1_700_000_000_000)
	clk.Set(S)
	hook := &a22Hook{run: func() {}}
	l, err := limit.New(10, 1, limit.WithClock(clk), limit.WithEngine(limit.CountMin), limit.WithMaxDebt(2),
		limit.WithPeriod(200*time.Millisecond), limit.WithPrefetch(false), limit.WithHasher(hook.factory()), limit.WithSeed(22))
	if err != nil {
		t.Fatal(err)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(S + ms) }
	if !l.AllowN(at(0), "k", 1) {
		t.Fatal("first request denied")
	}
	clk.Set(S + 100)
	if !l.AllowN(at(100), "k", 1) {
		t.Fatal("request at S+100 denied")
	}
	clk.Set(S + 190)
	if d := l.DecideN(at(190), "k", 1); d.Allowed || d.RetryAfter != 10*time.Millisecond {
		t.Fatalf("DecideN at S+190 = %+v, want denied with RetryAfter 10ms", d)
	}
	clk.Set(S + 200)
	if d := l.DecideN(at(200), "k", 1); !d.Allowed || l.Stats().Rotations != 1 {
		t.Fatalf("retry at S+200 across the rotation: %+v, rotations %d", d, l.Stats().Rotations)
	}
}
