package limit_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

// TestAudit98BucketsDocumentedRestoreBehindDrainsEarly (audit 98;
// documented at stop 59, the text below says what was wrong; limit's doc
// now says a restoring clock behind the snapshot counts its reading as the
// instant and drains ahead of a never-stopped limiter by up to that lag,
// and the test asserts that bound).
// TestAudit98BucketsFindingRestoreBehindDrainsEarly: a limiter decided at
// T (a key took its burst: 2 s of debt at 10/s), then its clock stepped
// back 5 s, and it was saved (the snapshot's instant is T, the time it
// had used). A fresh limiter restores the snapshot with its clock at the
// same reading, T - 5 s: the key reads its debt at T, as it should
// ("none if the restoring clock reads earlier"). But from there the
// restored limiter drains as its clock advances, while the never-stopped
// one holds the debt until its clock passes T (a key's time never runs
// back): at wall time T - 3 s the never-stopped limiter still has 0
// tokens for the key and the restored one has its full burst of 20, five
// seconds before the key's own bucket refills. The restore maps the
// restoring clock's reading to the snapshot's instant (Engine.ReadFrom:
// epoch = now - instant), so every ms the restoring clock then reads
// before T counts as drain. Both engines (the count-min's restore does
// the same). Repro: a := New(10, 20, WithClock(c)) at T; a.AllowN(T, k,
// 20); c.Set(T-5s); a.WriteTo(buf); b := New(10, 20, WithClock(c2)) with
// c2 at T-5s; b.ReadFrom(buf); c, c2 advanced 2 s: a.Tokens(k) 0,
// b.Tokens(k) 20.
//
// Contradicts limit/doc.go:322-326 ("debts are restored as of the
// snapshot's instant and drain by the wall time elapsed since (the limiter
// clock's time.Time; none if the restoring clock reads earlier) ... the
// restored limiter decides as the never-stopped one would at the same
// wall time") and limit/doc.go:333-334 ("every key's restored debt is at
// least its debt when its cells were read, drained since (the one-sided
// rule holds)"). (TestAudit42RestoreAfterClockStepBack checks the reading
// at the instant of the restore only.)
func TestAudit98BucketsDocumentedRestoreBehindDrainsEarly(t *testing.T) {
	const T = 1_700_000_000_000
	for _, eng := range []limit.Engine{limit.Buckets, limit.CountMin} {
		clk := limittest.NewFakeClock()
		clk.Set(T)
		a, err := limit.New(10, 20, limit.WithClock(clk), limit.WithSeed(1), limit.WithEngine(eng))
		if err != nil {
			t.Fatal(err)
		}
		if !a.AllowN(a.Now(), "k", 20) {
			t.Fatalf("%v: a fresh key's burst denied", eng)
		}
		clk.Set(T - 5000) // the clock steps back 5 s
		var buf bytes.Buffer
		if _, err := a.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		clk2 := limittest.NewFakeClock()
		clk2.Set(T - 5000)
		b, err := limit.New(10, 20, limit.WithClock(clk2), limit.WithSeed(7), limit.WithEngine(eng))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadFrom(&buf); err != nil {
			t.Fatal(err)
		}
		for _, d := range []time.Duration{0, time.Second, 2 * time.Second, 5 * time.Second, 6 * time.Second, 7 * time.Second} {
			clk.Set(T - 5000 + d.Milliseconds())
			clk2.Set(T - 5000 + d.Milliseconds())
			never, restored := a.Tokens("k"), b.Tokens("k")
			// The key's own bucket: 2 s of debt at T, drained from T on.
			own := float64(max(0, d.Milliseconds()-5000)) / 100
			if never != own {
				t.Fatalf("%v, T-5s+%v: the never-stopped limiter has %v tokens; its own bucket %v", eng, d, never, own)
			}
			// The documented bound: the restore drains from its own
			// reading, so at most the lag's 5 s ahead of the key's bucket.
			ahead := min(float64(d.Milliseconds())/100, 20)
			if restored != ahead {
				t.Errorf("%v, T-5s+%v: the restored limiter gives the key %v tokens; limit's doc: drained from the restore, %v (the never-stopped one %v)", eng, d, restored, ahead, never)
			}
		}
	}
}
