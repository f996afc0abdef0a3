package limit_test

// Adversarial acceptance tests of Limiter.WriteTo/ReadFrom and the
// meters' save and restore, against the package documentation ("Saving
// and restoring") and Stats' "ReadFrom restores debts, not counts".

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
	"pgregory.net/rapid"
)

// advEngines are the configurations of these tests: keys alone in their
// cells (roomy), on each engine.
var advEngines = []struct {
	name string
	opts []limit.Option
}{
	{"buckets", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(2000, 0.001)}},
	{"count-min", []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(4, 1<<14)}},
}

func advNew(t testing.TB, clk *limittest.FakeClock, opts []limit.Option, extra ...limit.Option) *limit.Limiter {
	t.Helper()
	// 10/s: 100 ms a token; MaxDebt 60 tokens = 6 s.
	l, err := limit.New(10, 30, append(append([]limit.Option{limit.WithClock(clk), limit.WithMaxDebt(60)}, opts...), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAdvSaveUnderTraffic: WriteTo runs while goroutines hammer keys
// (Allow, DecideN, ReserveN) on a frozen clock, so every key's debt only
// grows during the save. Restored d later, every key's debt is at least
// its debt when the save began, drained by d ("every key's restored debt
// is at least its debt when its cells were read, drained since"), and at
// most its debt when the save ended, drained by d (keys alone in their
// cells); the restored Stats count nothing ("ReadFrom restores debts, not
// counts").
func TestAdvSaveUnderTraffic(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		for _, e := range advEngines {
			t.Run(fmt.Sprintf("P%d/%s", procs, e.name), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				a := advNew(t, clk, e.opts)
				const keys = 64
				debt := func(l *limit.Limiter, c *limittest.FakeClock, k int) time.Duration {
					return debtOf(l, c.Now(), fmt.Sprintf("k%d", k))
				}
				var stop atomic.Bool
				var wg sync.WaitGroup
				var started sync.WaitGroup
				for g := range 4 {
					started.Add(1)
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 1))
						for i := 0; !stop.Load() || i < 50; i++ {
							if i == 50 {
								started.Done()
							}
							k := fmt.Sprintf("k%d", rng.IntN(keys))
							switch i % 3 {
							case 0:
								a.Allow(k)
							case 1:
								a.DecideN(clk.Now(), k, 1+rng.IntN(2))
							default:
								a.ReserveN(clk.Now(), k, 1)
							}
						}
					})
				}
				started.Wait()
				var before [keys]time.Duration
				for k := range keys {
					before[k] = debt(a, clk, k)
				}
				var buf bytes.Buffer
				if _, err := a.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				var after [keys]time.Duration
				for k := range keys {
					after[k] = debt(a, clk, k)
				}
				stop.Store(true)
				wg.Wait()
				for _, down := range []time.Duration{0, 1 * time.Millisecond, 777 * time.Millisecond, 3 * time.Second, 10 * time.Second} {
					clk2 := limittest.NewFakeClock()
					clk2.Set(clk.NowMillis() + down.Milliseconds())
					b := advNew(t, clk2, e.opts)
					if _, err := b.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
						t.Fatal(err)
					}
					if st := b.Stats(); st.Admitted != 0 || st.Denied != 0 {
						t.Fatalf("restored Stats %+v: counts must start at 0", st)
					}
					for k := range keys {
						got := debt(b, clk2, k)
						lo, hi := max(before[k]-down, 0), max(after[k]-down, 0)
						if got < lo {
							t.Fatalf("down %v: k%d restored debt %v below the debt at the save's start %v drained %v", down, k, got, before[k], down)
						}
						if got > hi {
							t.Fatalf("down %v: k%d restored debt %v above the debt at the save's end %v drained %v", down, k, got, after[k], down)
						}
					}
				}
			})
		}
	}
}

// TestAdvRestoreAfterRefusal: "On any error the limiter is left empty, as
// built": after a refused restore (mismatch, a truncated or corrupted
// body) the limiter admits every key's full burst, counts from 0, and
// still takes the good snapshot, which then decides as the limiter that
// was never saved.
func TestAdvRestoreAfterRefusal(t *testing.T) {
	testsize.Serial(t)
	for _, e := range advEngines {
		t.Run(e.name, func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			a := advNew(t, clk, e.opts)
			rng := rand.New(rand.NewPCG(3, 3))
			for range 2000 {
				a.AllowN(clk.Now(), fmt.Sprintf("k%d", rng.IntN(40)), 1+rng.IntN(3))
				clk.Advance(time.Duration(rng.IntN(5)) * time.Millisecond)
			}
			good := limiterSnap(t, a)
			other := advNew(t, clk, e.opts, limit.WithMaxDebt(61))
			mismatch := limiterSnap(t, other)
			bads := map[string][]byte{
				"mismatch":       mismatch,
				"truncated body": good[:len(good)-len(good)/3],
				"last byte":      good[:len(good)-1],
			}
			for _, off := range []int{64 + 1, len(good) / 2, len(good) - 2} {
				c := bytes.Clone(good)
				c[off] ^= 0xA5
				bads[fmt.Sprintf("byte %d", off)] = c
			}
			for name, bad := range bads {
				clk2 := limittest.NewFakeClock()
				clk2.Set(clk.NowMillis())
				b := advNew(t, clk2, e.opts)
				_, err := b.ReadFrom(bytes.NewReader(bad))
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("%s: ReadFrom %v", name, err)
				}
				for k := range 40 {
					if tok := b.Tokens(fmt.Sprintf("k%d", k)); tok != 30 {
						t.Fatalf("%s: k%d has %v tokens after a refused restore, want the full burst 30", name, k, tok)
					}
				}
				if _, err := b.ReadFrom(bytes.NewReader(good)); err != nil {
					t.Fatalf("%s: the good snapshot after a refused one: %v", name, err)
				}
				if st := b.Stats(); st.Admitted != 0 || st.Denied != 0 {
					t.Fatalf("%s: Stats %+v after restores", name, st)
				}
				for k := range 40 {
					key := fmt.Sprintf("k%d", k)
					if da, db := a.PeekN(clk.Now(), key, 1), b.PeekN(clk2.Now(), key, 1); da != db {
						t.Fatalf("%s: %s restored %+v, never saved %+v", name, key, db, da)
					}
				}
			}
		})
	}
}

// TestAdvRestoreCorruptNoPanic: random damage (several bytes, any
// values, any length) never panics; it is refused with a typed error or,
// when it happens to leave a valid snapshot, restored.
func TestAdvRestoreCorruptNoPanic(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	small := [][]limit.Option{
		{limit.WithEngine(limit.Buckets), limit.WithCapacity(10, 0.3)},
		{limit.WithEngine(limit.CountMin), limit.WithSize(1, 8)},
		{limit.WithEngine(limit.CountMin), limit.WithSize(2, 8), limit.WithGenerations(3), limit.WithConservativeUpdate(true)},
	}
	snaps := make([][]byte, len(small))
	for i, o := range small {
		a := advNew(t, clk, o)
		for k := range 30 {
			a.AllowN(clk.Now(), fmt.Sprintf("k%d", k), 1+k%5)
		}
		snaps[i] = limiterSnap(t, a)
	}
	rapid.Check(t, func(rt *rapid.T) {
		i := rapid.IntRange(0, len(small)-1).Draw(rt, "config")
		bad := bytes.Clone(snaps[i])
		for range rapid.IntRange(1, 6).Draw(rt, "flips") {
			off := rapid.IntRange(0, len(bad)-1).Draw(rt, "off")
			bad[off] = rapid.Byte().Draw(rt, "val")
		}
		bad = bad[:rapid.IntRange(0, len(bad)).Draw(rt, "len")]
		if rapid.Bool().Draw(rt, "extra") {
			bad = append(bad, rapid.SliceOfN(rapid.Byte(), 1, 100).Draw(rt, "tail")...)
		}
		b := advNew(t, clk, small[i])
		_, err := b.ReadFrom(bytes.NewReader(bad))
		if err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			rt.Fatalf("untyped error: %v", err)
		}
		if err != nil {
			for k := range 30 {
				if tok := b.Tokens(fmt.Sprintf("k%d", k)); tok != 30 {
					rt.Fatalf("k%d has %v tokens after a refused restore", k, tok)
				}
			}
		}
		b.Allow("x")
	})
}

// TestAdvRestoreClockBackwards: "debts ... drain by the wall time elapsed
// since (...; none if the restoring clock reads earlier) ... and never
// grows". A limiter restored on a clock 10 s behind the save holds every
// key's saved debt, undrained; from there its decisions keep the
// contract: RetryAfter exact (retry at t+RetryAfter admitted, 1 ms
// earlier not), and the debt drains at the rate from the restoring
// clock's reading (ResetAfter after the restore is the saved debt).
func TestAdvRestoreClockBackwards(t *testing.T) {
	for _, e := range advEngines {
		for _, back := range []time.Duration{time.Millisecond, 2 * time.Second, 10 * time.Second, time.Hour} {
			t.Run(fmt.Sprintf("%s/back=%v", e.name, back), func(t *testing.T) {
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				a := advNew(t, clk, e.opts)
				for range 25 {
					a.Allow("k") // 2.5 s of debt
				}
				a.ReserveN(clk.Now(), "q", 30)
				a.ReserveN(clk.Now(), "q", 20) // 5 s of debt
				saved := map[string]time.Duration{"k": debtOf(a, clk.Now(), "k"), "q": debtOf(a, clk.Now(), "q")}
				snap := limiterSnap(t, a)
				clk2 := limittest.NewFakeClock()
				clk2.Set(clk.NowMillis() - back.Milliseconds())
				b := advNew(t, clk2, e.opts)
				if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				for k, want := range saved {
					if got := debtOf(b, clk2.Now(), k); got != want {
						t.Errorf("%s: debt %v right after a restore %v back, saved %v", k, got, back, want)
					}
				}
				// The limiter's own promise from here on: RetryAfter.
				for i := range 40 {
					d := b.DecideN(clk2.Now(), "q", 1+i%3)
					if d.Allowed {
						continue
					}
					at := clk2.Now()
					clk2.SetTime(at.Add(d.RetryAfter - time.Millisecond))
					if b.PeekN(clk2.Now(), "q", 1+i%3).Allowed {
						t.Fatalf("step %d: admitted 1 ms before RetryAfter %v", i, d.RetryAfter)
					}
					clk2.SetTime(at.Add(d.RetryAfter))
					if !b.PeekN(clk2.Now(), "q", 1+i%3).Allowed {
						t.Fatalf("step %d: denied at RetryAfter %v (restored %v back)", i, d.RetryAfter, back)
					}
				}
				// ResetAfter read right after the restore holds.
				clk3 := limittest.NewFakeClock()
				clk3.Set(clk.NowMillis() - back.Milliseconds())
				c := advNew(t, clk3, e.opts)
				if _, err := c.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				reset := debtOf(c, clk3.Now(), "k")
				clk3.Advance(reset)
				if tok := c.Tokens("k"); tok != 30 {
					t.Errorf("at ResetAfter %v after a restore %v back: %v tokens, want the full burst", reset, back, tok)
				}
			})
		}
	}
}

// TestAdvRateRestore: a meter.Rate saved and restored (into a Rate of
// another seed) reads what the never-stopped one reads, at the save's
// instant and later, for every key; restored on an earlier clock it
// reads the saved values.
func TestAdvRateRestore(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(c sketch.Clock) *meter.Rate {
		r, err := meter.NewRate(2*time.Second, meter.WithClock(c), meter.WithSize(4, 4096))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := mk(clk)
	rng := rand.New(rand.NewPCG(8, 8))
	for range 20000 {
		a.ObserveAt(clk.Now(), fmt.Sprintf("k%d", rng.IntN(100)), float64(1+rng.IntN(3)))
		clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	t0 := clk.NowMillis()
	for _, down := range []time.Duration{0, 7 * time.Millisecond, 1500 * time.Millisecond, 30 * time.Second} {
		clk2 := sketchtest.NewFakeClock()
		clk2.Set(t0 + down.Milliseconds())
		b := mk(clk2)
		if _, err := b.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		clk.Set(t0 + down.Milliseconds())
		for k := range 100 {
			key := fmt.Sprintf("k%d", k)
			if pa, pb := a.PerSecond(key), b.PerSecond(key); pa != pb {
				t.Fatalf("down %v: %s restored %v, never stopped %v", down, key, pb, pa)
			}
		}
		// and both go on alike
		for i := range 200 {
			key := fmt.Sprintf("k%d", i%100)
			a.Observe(key)
			b.Observe(key)
			if pa, pb := a.PerSecond(key), b.PerSecond(key); pa != pb {
				t.Fatalf("down %v, op %d: %s restored %v, never stopped %v", down, i, key, pb, pa)
			}
		}
		buf2 := bytes.Buffer{}
		if _, err := a.WriteTo(&buf2); err != nil {
			t.Fatal(err)
		}
		buf = buf2
		t0 = clk.NowMillis()
	}
	// Backwards: the saved values, undrained.
	want := map[string]float64{}
	for k := range 100 {
		key := fmt.Sprintf("k%d", k)
		want[key] = a.PerSecond(key)
	}
	clk2 := sketchtest.NewFakeClock()
	clk2.Set(t0 - 5000)
	b := mk(clk2)
	if _, err := b.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	for key, w := range want {
		if got := b.PerSecond(key); got != w {
			t.Fatalf("restored 5 s back: %s reads %v, saved %v", key, got, w)
		}
	}
}

func limiterSnap(t testing.TB, l *limit.Limiter) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := l.WriteTo(&b)
	if err != nil || n != int64(b.Len()) || n != l.SnapshotSize() {
		t.Fatalf("WriteTo: %d bytes (buffer %d, SnapshotSize %d), %v", n, b.Len(), l.SnapshotSize(), err)
	}
	return b.Bytes()
}
