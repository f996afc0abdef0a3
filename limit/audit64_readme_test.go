package limit_test

import (
	"bytes"
	"encoding"
	"fmt"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

const audit64MiB = 1 << 20

// README: "l := limit.MustNew(10, 20) // 10 per second per key, bursts of 20
// if !l.Allow(clientIP) { // zero allocations".
func TestAudit64ReadmeLimitSnippet(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	clientIP := "192.0.2.1"
	for i := 0; i < 20; i++ {
		if !l.Allow(clientIP) {
			t.Fatalf("call %d of a burst of 20 denied", i+1)
		}
	}
	if l.Allow(clientIP) {
		t.Fatalf("21st call at the same instant admitted; README: bursts of 20")
	}
	clk.Advance(100 * time.Millisecond) // 10 per second: one token back
	if !l.Allow(clientIP) {
		t.Fatalf("after 100 ms at 10/s no token came back")
	}
	if l.Allow(clientIP) {
		t.Fatalf("two tokens came back in 100 ms at 10/s")
	}
	// zero allocations, admitted and denied paths.
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		l.Allow(keys[i%len(keys)])
		i++
	}); a != 0 {
		t.Fatalf("Allow allocated %v per call; README: zero allocations", a)
	}
	if a := testing.AllocsPerRun(1000, func() { l.Allow(clientIP) }); a != 0 {
		t.Fatalf("denied Allow allocated %v per call; README: zero allocations", a)
	}
}

// README: "Its default memory (6.1 MiB) ... (`limit.New` runs on a bucketed
// table wherever it is exact ...)".
func TestAudit64ReadmeDefaultMemory(t *testing.T) {
	l := limit.MustNew(10, 20)
	if e := l.Engine(); e != limit.Buckets {
		t.Fatalf("MustNew(10, 20) engine %v, want Buckets", e)
	}
	st := l.Stats()
	mib := float64(st.Bytes) / audit64MiB
	if mib < 6.05 || mib >= 6.15 {
		t.Fatalf("default memory %.3f MiB (%d B), README says 6.1 MiB", mib, st.Bytes)
	}
	if st.Bytes != l.Sizes().Total {
		t.Fatalf("Stats().Bytes %d != Sizes().Total %d", st.Bytes, l.Sizes().Total)
	}
	if s := st.Saturation; s != 0 {
		t.Fatalf("fresh limiter Saturation %v, want 0", s)
	}
	// Capacity keeps Suggest's deny/2 margin, so it reads the README's
	// "a million at 0.03%" as about half a million; only log it.
	t.Logf("Capacity(0.0003) = %d", l.Capacity(0.0003))
}

// README: a million clients at their limit, then fresh clients denied at
// about 0.03%, and Stats().Saturation "the share of new clients the limiter
// would deny now".
func TestAudit64ReadmeMillionClients(t *testing.T) {
	if testsize.Small() {
		t.Skip("1M keys")
	}
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(64))
	now := clk.Now()
	var b []byte
	for i := 0; i < 1_000_000; i++ {
		b = fmt.Appendf(b[:0], "client-%d", i)
		if !l.AllowN(now, string(b), 20) {
			// a held client denied its first burst is itself a fresh-key denial
			continue
		}
	}
	sat := l.Stats().Saturation
	const fresh = 200_000
	denied := 0
	for i := 0; i < fresh; i++ {
		b = fmt.Appendf(b[:0], "fresh-%d", i)
		if !l.PeekN(now, string(b), 1).Allowed {
			denied++
		}
	}
	rate := float64(denied) / fresh
	t.Logf("fresh denied %d of %d (%.4f%%), Saturation %.4f%%", denied, fresh, 100*rate, 100*sat)
	if rate > 0.0006 {
		t.Fatalf("1M clients at their limit: fresh keys denied %.4f%%; README: 0.03%%", 100*rate)
	}
	if sat > 0.001 || (rate > 0 && sat == 0) {
		t.Fatalf("Saturation %.5f against a measured %.5f", sat, rate)
	}
}

// README's sizing table, limit.Suggest columns (MiB as 2^20 bytes, to the
// README's precision).
func TestAudit64ReadmeSuggestTable(t *testing.T) {
	rows := []struct {
		keys            int
		deny            float64
		buckets, cmin   float64 // MiB
		bucketsTol, cmT float64
	}{
		{100_000, 0.01, 0.49, 14.6, 0.005, 0.05},
		{1_000_000, 0.01, 4.9, 146, 0.05, 0.5},
		{1_000_000, 0.001, 5.1, 223, 0.05, 0.5},
		{10_000_000, 0.01, 49, 1.4 * 1024, 0.5, 0.05 * 1024},
	}
	for _, r := range rows {
		s, err := limit.Suggest(r.keys, r.deny)
		if err != nil {
			t.Fatalf("Suggest(%d, %v): %v", r.keys, r.deny, err)
		}
		b := float64(s.Buckets.Bytes) / audit64MiB
		c := float64(s.CountMin.Bytes) / audit64MiB
		t.Logf("Suggest(%d, %v): Buckets %.3f MiB (%d lines), CountMin %.2f MiB (%d x %d x %d)", r.keys, r.deny, b, s.Buckets.Lines, c, s.CountMin.Generations, s.CountMin.Levels, s.CountMin.Cells)
		if d := b - r.buckets; d > r.bucketsTol || d < -r.bucketsTol {
			t.Errorf("Suggest(%d, %v).Buckets = %.3f MiB; README table says %v MiB", r.keys, r.deny, b, r.buckets)
		}
		if d := c - r.cmin; d > r.cmT || d < -r.cmT {
			t.Errorf("Suggest(%d, %v).CountMin = %.2f MiB; README table says %v MiB", r.keys, r.deny, c, r.cmin)
		}
		if s.CountMin.Generations != 2 {
			t.Errorf("count-min column is '2 generations'; got %d", s.CountMin.Generations)
		}
		// "about 5 bytes per key at its limit"
		if per := float64(s.Buckets.Bytes) / float64(r.keys); per < 4 || per > 6 {
			t.Errorf("Buckets %.2f bytes per key; README: about 5", per)
		}
	}
}

// README: "`limit.ParseLimit("100/s")` (a `Limit` is an
// `encoding.TextUnmarshaler`)".
func TestAudit64ReadmeParseLimit(t *testing.T) {
	r, err := limit.ParseLimit("100/s")
	if err != nil || r != 100 {
		t.Fatalf("ParseLimit(100/s) = %v, %v", r, err)
	}
	var x limit.Limit
	var u encoding.TextUnmarshaler = &x
	if err := u.UnmarshalText([]byte("1000/h")); err != nil {
		t.Fatal(err)
	}
	if got := float64(x) * 3600; got < 999.999 || got > 1000.001 {
		t.Fatalf("1000/h read as %v per second", float64(x))
	}
}

// README: "`l.Tier(name, limit, burst)` is a policy of its own over the same
// keys and memory ..., and `SetLimit` / `SetBurst` change the policy at run
// time without forgetting any key's debt".
func TestAudit64ReadmeTierSetLimit(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	l := limit.MustNew(10, 20, limit.WithClock(clk))
	free, err := l.Tier("free", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	first, second, third := free.Allow("k"), free.Allow("k"), free.Allow("k")
	if !first || !second || third {
		t.Fatalf("free tier 1/s burst 2: want admit, admit, deny; got %v, %v, %v", first, second, third)
	}
	// 2 free tokens at 1/s = 2 s of debt = 20 of the 10/s limiter's tokens:
	// the paid limiter's burst of 20 is spent too (shared as time).
	if l.Allow("k") {
		t.Fatalf("paid limiter admitted a key whose 2 s of debt the free tier spent")
	}
	for i := 0; i < 20; i++ {
		l.Allow("x")
	}
	if l.Allow("x") {
		t.Fatal("x not at its limit")
	}
	if err := l.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	// x owes 2 s (kept as time to drain); at 5/s a burst of 20 spans 4 s:
	// 10 fit at once (migrating.md's worked example, halved rate).
	n := 0
	for n < 100 && l.Allow("x") {
		n++
	}
	if n != 10 {
		t.Fatalf("after SetLimit(5) x admitted %d at once, want 10 (2 s of its 4 s burst owed)", n)
	}
	if err := l.SetBurst(10); err != nil {
		t.Fatal(err)
	}
	if l.Allow("x") {
		t.Fatalf("SetBurst forgot x's debt")
	}
}

// README: "A limiter ... survives a deploy: it is a snapshot.Source and
// Destination, so a snapshot.Saver writes it every interval and
// snapshot.Load restores it, debts drained by the downtime."
func TestAudit64ReadmeSurvivesDeploy(t *testing.T) {
	for _, e := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := sketchtest.NewFakeClock()
		l := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithEngine(e))
		for i := 0; i < 20; i++ {
			l.Allow("abuser")
		}
		var buf bytes.Buffer
		if _, err := l.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second) // the downtime
		clk2 := sketchtest.NewFakeClock()
		clk2.SetTime(clk.Now())
		l2 := limit.MustNew(10, 20, limit.WithClock(clk2), limit.WithEngine(e))
		if _, err := l2.ReadFrom(&buf); err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < 100 && l2.Allow("abuser") {
			n++
		}
		if n != 10 {
			t.Fatalf("%v: restored after 1 s of downtime the abuser got %d, want 10 (20 owed, 10 drained)", e, n)
		}
		if !l2.Allow("someone-else") {
			t.Fatalf("%v: a fresh key denied after restore", e)
		}
	}
}
