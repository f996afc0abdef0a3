package limit_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

var audit48Engines = []persistCase{
	{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(500, 0.01)}},
	{"count-min", 10, 20, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithSize(4, 1024)}},
}

// TestAudit48SetLimitBurstPolicyIsReceivers: SetLimit/SetBurst state is
// configuration, not state (limit/doc.go, "Saving and restoring": "The
// burst, RejectCost, the name and the mode are configuration, not state:
// the restoring process's apply"). A snapshot of New(10,20) after
// SetLimit(20), SetBurst(10) restores into New(10,20) with the receiver's
// policy (10/s, 20); re-applying SetLimit/SetBurst gives the original's
// readings exactly. New(20,10) (the SetLimit'd policy at construction)
// has other base units and is refused, naming Unit.
func TestAudit48SetLimitBurstPolicyIsReceivers(t *testing.T) {
	for _, c := range audit48Engines {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a := newPersist(t, c, clk, 3)
		if err := a.SetLimit(20); err != nil {
			t.Fatal(err)
		}
		if err := a.SetBurst(10); err != nil {
			t.Fatal(err)
		}
		t0 := clk.Now()
		for i := range 30 {
			a.AllowN(t0, fmt.Sprintf("k%d", i), 1+i%10)
		}
		snap := limiterSnap(t, a)
		b := newPersist(t, c, clk, 11)
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if b.Limit() != 10 || b.Burst() != 20 {
			t.Errorf("%s: restored policy %v/%d, want the receiver's 10/20", c.name, b.Limit(), b.Burst())
		}
		_ = b.SetLimit(20)
		_ = b.SetBurst(10)
		for i := range 30 {
			k := fmt.Sprintf("k%d", i)
			for _, d := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond} {
				clk.SetTime(t0.Add(d)) // a future t counts as the clock's reading
				if g, w := b.TokensAt(t0.Add(d), k), a.TokensAt(t0.Add(d), k); g != w {
					t.Errorf("%s: %s at +%v: restored %v tokens, original %v", c.name, k, d, g, w)
				}
			}
		}
		copts := append([]limit.Option{limit.WithClock(clk)}, c.opts...)
		cl, err := limit.New(20, 10, copts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.ReadFrom(bytes.NewReader(snap))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Errorf("%s: New(20,10) receiver: %v, want ErrSnapshotMismatch", c.name, err)
		} else {
			t.Logf("%s: New(20,10) receiver refused: %v", c.name, err)
		}
	}
}

// TestAudit48TierAcrossSnapshot: tiers share the key's debt, held in the
// engine; a tier rebuilt on the restored limiter reads what the
// original tier read (the tier is configuration, built from the receiver).
func TestAudit48TierAcrossSnapshot(t *testing.T) {
	for _, c := range audit48Engines {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a := newPersist(t, c, clk, 3)
		ta, err := a.Tier("paid", 20, 40)
		if err != nil {
			t.Fatal(err)
		}
		fa, err := a.Tier("free", 5, 10)
		if err != nil {
			t.Fatal(err)
		}
		t0 := clk.Now()
		for i := range 40 {
			k := fmt.Sprintf("k%d", i)
			if i%2 == 0 {
				ta.AllowN(t0, k, 1+i%40)
			} else {
				fa.AllowN(t0, k, 1+i%10)
			}
		}
		snap := limiterSnap(t, a)
		clk2 := limittest.NewFakeClock()
		clk2.Set(t0.UnixMilli() + 1500)
		b := newPersist(t, c, clk2, 99)
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		clk.SetTime(clk2.Now()) // a future t counts as the clock's reading
		tb, _ := b.Tier("paid", 20, 40)
		fb, _ := b.Tier("free", 5, 10)
		t1 := clk2.Now()
		for i := range 40 {
			k := fmt.Sprintf("k%d", i)
			if g, w := tb.TokensAt(t1, k), ta.TokensAt(t1, k); g != w {
				t.Errorf("%s: paid %s: restored %v, original %v", c.name, k, g, w)
			}
			if g, w := fb.TokensAt(t1, k), fa.TokensAt(t1, k); g != w {
				t.Errorf("%s: free %s: restored %v, original %v", c.name, k, g, w)
			}
		}
	}
}

// TestAudit48MultiWindowByWindow: "A Multi is saved and restored window by
// window (each window is a Limiter)".
func TestAudit48MultiWindowByWindow(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(seed uint64) []*limit.Limiter {
		w1 := limit.MustNew(10, 20, limit.WithClock(clk), limit.WithSeed(seed), limit.WithEngine(limit.Buckets), limit.WithCapacity(200, 0.01))
		w2 := limit.MustNew(limit.Every(time.Minute/100), 100, limit.WithClock(clk), limit.WithSeed(seed+1), limit.WithSize(4, 512))
		return []*limit.Limiter{w1, w2}
	}
	wa := mk(1)
	ma, err := limit.NewMulti(wa...)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	for i := range 300 {
		clk.SetTime(t0.Add(time.Duration(i) * 37 * time.Millisecond))
		ma.AllowN(t0.Add(time.Duration(i)*37*time.Millisecond), fmt.Sprintf("k%d", i%17), 1+i%5)
	}
	wb := mk(50)
	for i := range wa {
		if _, err := wb[i].ReadFrom(bytes.NewReader(limiterSnap(t, wa[i]))); err != nil {
			t.Fatal(err)
		}
	}
	mb, _ := limit.NewMulti(wb...)
	tt := t0.Add(300 * 37 * time.Millisecond)
	for i := range 200 {
		k := fmt.Sprintf("k%d", i%17)
		ti := tt.Add(time.Duration(i) * 11 * time.Millisecond)
		clk.SetTime(ti)
		da, db := ma.DecideKeys(ti, 1+i%3, k), mb.DecideKeys(ti, 1+i%3, k)
		if da.Allowed != db.Allowed || da.RetryAfter != db.RetryAfter || da.Remaining != db.Remaining {
			t.Fatalf("call %d %s: original %+v, restored %+v", i, k, da, db)
		}
	}
}

// TestAudit48ConcurrentSnapshotKeepsAdmitted: a snapshot taken while other
// goroutines decide keeps every debt admitted before WriteTo began
// ("every key's restored debt is at least its debt when its cells were
// read, drained since"). The clock is frozen, so nothing drains.
func TestAudit48ConcurrentSnapshotKeepsAdmitted(t *testing.T) {
	for _, c := range audit48Engines {
		c := c
		c.burst = 1000
		c.lim = 100
		t.Run(c.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for round := range 4 {
					clk := limittest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					a := newPersist(t, c, clk, uint64(round+1))
					const workers, keys = 4, 16
					var admitted [workers][keys]atomic.Int64
					var stop atomic.Bool
					var wg sync.WaitGroup
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; !stop.Load(); i++ {
								k := i % keys
								if a.Allow(fmt.Sprintf("w%d-k%d", w, k)) {
									admitted[w][k].Add(1)
								}
							}
						}()
					}
					time.Sleep(2 * time.Millisecond)
					var before [workers][keys]int64
					for w := range workers {
						for k := range keys {
							before[w][k] = admitted[w][k].Load()
						}
					}
					snap := limiterSnap(t, a)
					stop.Store(true)
					wg.Wait()
					b := newPersist(t, c, clk, 77)
					if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
						t.Fatal(err)
					}
					var sumBefore int64
					var sumDebt float64
					defer func() {
						t.Logf("round %d: %d admitted before WriteTo began, %v restored debt over %d keys", round, sumBefore, sumDebt, workers*keys)
					}()
					for w := range workers {
						for k := range keys {
							key := fmt.Sprintf("w%d-k%d", w, k)
							debt := audit42Debt(b, clk.Now(), key)
							if debt < float64(before[w][k]) {
								t.Errorf("round %d %s: restored debt %v < %d admitted before the snapshot began", round, key, debt, before[w][k])
							}
							sumBefore += before[w][k]
							sumDebt += debt
						}
					}
				}
			})
		})
	}
}

// TestAudit48BucketsFarRestore: the Buckets engine saved after traffic
// across many seal epochs and restored at times far from the snapshot's
// (61.5 s, 2^31 ms, 2^32 ms, 2^40 ms later, and 1 h earlier) decides as
// the never-saved limiter at the same time, call by call.
func TestAudit48BucketsFarRestore(t *testing.T) {
	c := persistCase{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(60, 0.05)}}
	for _, start := range []int64{1_700_000_000_000, 1 << 42} {
		for _, d := range []int64{-3_600_000, 0, 1500, 2500, 61_500, 1 << 31, 1 << 32, (1 << 32) + 777, 1 << 40} {
			clk := limittest.NewFakeClock()
			clk.Set(start)
			a := newPersist(t, c, clk, 5)
			t0 := clk.Now()
			// traffic over ~20 minutes: many seal epochs
			for i := range 3000 {
				clk.SetTime(t0.Add(time.Duration(i) * 397 * time.Millisecond))
				a.AllowN(t0.Add(time.Duration(i)*397*time.Millisecond), fmt.Sprintf("k%d", (i*7)%90), 1+i%7)
			}
			tS := t0.Add(2999 * 397 * time.Millisecond)
			clk.SetTime(tS)
			snap := limiterSnap(t, a)
			clk2 := limittest.NewFakeClock()
			clk2.Set(tS.UnixMilli() + d)
			b := newPersist(t, c, clk2, 1234)
			if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			tR := clk2.Now()
			ref := tR // the original's time for comparison
			if d < 0 {
				ref = tS // restored behind: no drain
			}
			clk.SetTime(ref)
			for i := range 90 {
				k := fmt.Sprintf("k%d", i)
				if g, w := b.TokensAt(tR, k), a.TokensAt(ref, k); g != w {
					t.Errorf("start %d d=%dms: %s restored %v tokens, never-saved %v", start, d, k, g, w)
				}
			}
			if d < 0 {
				continue
			}
			for i := range 2000 {
				k := fmt.Sprintf("k%d", (i*13)%120)
				ti := tR.Add(time.Duration(i) * 53 * time.Millisecond)
				clk.SetTime(ti)
				clk2.SetTime(ti)
				da, db := a.DecideN(ti, k, 1+i%6), b.DecideN(ti, k, 1+i%6)
				if da.Allowed != db.Allowed || da.RetryAfter != db.RetryAfter {
					t.Fatalf("start %d d=%dms call %d %s: never-saved %+v, restored %+v", start, d, i, k, da, db)
				}
			}
		}
	}
}

// TestAudit48MismatchNamesFieldReceiverUnchanged: a snapshot of another
// engine or size is refused with ErrSnapshotMismatch naming the field,
// and the receiver (which already holds debts) is unchanged ("or
// unchanged, when the header is refused").
func TestAudit48MismatchNamesFieldReceiverUnchanged(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(opts ...limit.Option) *limit.Limiter {
		return limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(4)}, opts...)...)
	}
	cases := []struct {
		name     string
		src, dst []limit.Option
		field    string
	}{
		{"buckets->countmin", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(500, 0.01)}, []limit.Option{limit.WithSize(4, 1024)}, "Engine"},
		{"countmin->buckets", []limit.Option{limit.WithSize(4, 1024)}, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(500, 0.01)}, "Engine"},
		{"buckets lines", []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(500, 0.01)}, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(5000, 0.01)}, "Lines"},
		{"countmin cells", []limit.Option{limit.WithSize(4, 1024)}, []limit.Option{limit.WithSize(4, 2048)}, "Size"},
		{"countmin levels", []limit.Option{limit.WithSize(4, 1024)}, []limit.Option{limit.WithSize(3, 1024)}, "Size"},
		{"countmin gens", []limit.Option{limit.WithSize(4, 1024)}, []limit.Option{limit.WithSize(4, 1024), limit.WithGenerations(3)}, "Generations"},
		{"countmin period", []limit.Option{limit.WithSize(4, 1024)}, []limit.Option{limit.WithSize(4, 1024), limit.WithPeriod(7 * time.Second)}, "Period"},
		{"countmin cu", []limit.Option{limit.WithSize(4, 1024)}, []limit.Option{limit.WithSize(4, 1024), limit.WithConservativeUpdate(true)}, "ConservativeUpdate"},
	}
	for _, tc := range cases {
		src := mk(tc.src...)
		src.AllowN(clk.Now(), "s", 20)
		snap := limiterSnap(t, src)
		dst := mk(tc.dst...)
		dst.AllowN(clk.Now(), "d", 13)
		before := dst.Tokens("d")
		_, err := dst.ReadFrom(bytes.NewReader(snap))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want ErrSnapshotMismatch naming %s", tc.name, err, tc.field)
		}
		if g := dst.Tokens("d"); g != before {
			t.Errorf("%s: receiver's key read %v tokens before, %v after the refused restore", tc.name, before, g)
		}
		if g := dst.Tokens("s"); g != 20 {
			t.Errorf("%s: receiver took the snapshot's key: %v tokens", tc.name, g)
		}
	}
}

// TestAudit48ConcurrentSnapshotRunningClock: as above with a clock that
// runs (1 ms a step) during traffic and the snapshot. Each key's debt is
// read (TokensAt) after the clock read tB and before WriteTo; restored by
// a clock at tE (the clock after WriteTo), the debt must be at least the
// debt read less the drain over tE - tB (limit/doc.go: "every key's
// restored debt is at least its debt when its cells were read, drained
// since").
func TestAudit48ConcurrentSnapshotRunningClock(t *testing.T) {
	for _, c := range audit48Engines {
		c := c
		c.burst, c.lim = 1000, 100
		t.Run(c.name, func(t *testing.T) {
			sketchtest.ForEachGOMAXPROCS(t, func(t *testing.T) {
				for round := range 4 {
					clk := limittest.NewFakeClock()
					clk.Set(1_700_000_000_000)
					a := newPersist(t, c, clk, uint64(round+1))
					const workers, keys = 3, 16
					var stop atomic.Bool
					var wg sync.WaitGroup
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; !stop.Load(); i++ {
								a.AllowN(clk.Now(), fmt.Sprintf("w%d-k%d", w, i%keys), 1+i%3)
							}
						}()
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for !stop.Load() {
							clk.Advance(time.Millisecond)
							time.Sleep(50 * time.Microsecond)
						}
					}()
					time.Sleep(3 * time.Millisecond)
					tB := clk.Now()
					read := map[string]float64{}
					for w := range workers {
						for k := range keys {
							key := fmt.Sprintf("w%d-k%d", w, k)
							read[key] = float64(c.burst) - a.TokensAt(tB, key)
						}
					}
					snap := limiterSnap(t, a)
					tE := clk.Now()
					stop.Store(true)
					wg.Wait()
					clk2 := limittest.NewFakeClock()
					clk2.SetTime(tE)
					b := newPersist(t, c, clk2, 77)
					if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
						t.Fatal(err)
					}
					drain := float64(c.lim) * tE.Sub(tB).Seconds()
					for key, r := range read {
						got := float64(c.burst) - b.TokensAt(tE, key)
						if got < r-drain-1e-9 {
							t.Errorf("round %d %s: restored debt %v at tE, read %v at tB, drain over %v is %v", round, key, got, r, tE.Sub(tB), drain)
						}
					}
				}
			})
		})
	}
}

// TestAudit48BucketsRestoreOffsetSweep: restore offsets swept from 0 to
// ~400 s in 1,301 ms steps (across the stamps' 16-bit residue and the
// 61.4 s span several times): every key reads as the never-saved
// limiter at the same time, and 300 later calls decide alike.
func TestAudit48BucketsRestoreOffsetSweep(t *testing.T) {
	c := persistCase{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(60, 0.05)}}
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	a0 := newPersist(t, c, clk, 5)
	t0 := clk.Now()
	for i := range 600 {
		clk.SetTime(t0.Add(time.Duration(i) * 211 * time.Millisecond))
		a0.AllowN(clk.Now(), fmt.Sprintf("k%d", (i*7)%90), 1+i%7)
	}
	tS := clk.Now()
	snap := limiterSnap(t, a0)
	for d := int64(0); d < 400_000; d += 1301 * int64(testsize.Stride(testsize.Sample(1, 4, 12))) {
		clkA := limittest.NewFakeClock()
		clkA.SetTime(tS)
		a := newPersist(t, c, clkA, 5)
		if _, err := a.ReadFrom(bytes.NewReader(snap)); err != nil { // the reference: restored with no downtime
			t.Fatal(err)
		}
		clkB := limittest.NewFakeClock()
		clkB.Set(tS.UnixMilli() + d)
		b := newPersist(t, c, clkB, 6)
		if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		tR := clkB.Now()
		clkA.SetTime(tR)
		for i := range 90 {
			k := fmt.Sprintf("k%d", i)
			if g, w := b.TokensAt(tR, k), a.TokensAt(tR, k); g != w {
				t.Fatalf("d=%dms: %s restored %v tokens, reference %v", d, k, g, w)
			}
		}
		for i := range 300 {
			ti := tR.Add(time.Duration(i) * 29 * time.Millisecond)
			clkA.SetTime(ti)
			clkB.SetTime(ti)
			k := fmt.Sprintf("k%d", (i*11)%120)
			da, db := a.DecideN(ti, k, 1+i%6), b.DecideN(ti, k, 1+i%6)
			if da.Allowed != db.Allowed || da.RetryAfter != db.RetryAfter {
				t.Fatalf("d=%dms call %d %s: reference %+v, restored %+v", d, i, k, da, db)
			}
		}
	}
}

// TestAudit48InfSnapshot: an Inf limiter's snapshot is the 64-byte header
// alone; it restores into an Inf limiter and is refused (naming Engine)
// by a finite one, whose debt is kept, and vice versa.
func TestAudit48InfSnapshot(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	inf := limit.MustNew(limit.Inf, 5, limit.WithClock(clk))
	s := limiterSnap(t, inf)
	if len(s) != 64 {
		t.Fatalf("Inf snapshot is %d bytes, want 64", len(s))
	}
	if _, err := limit.MustNew(limit.Inf, 9, limit.WithClock(clk)).ReadFrom(bytes.NewReader(s)); err != nil {
		t.Fatalf("Inf into Inf: %v", err)
	}
	for name, opts := range map[string][]limit.Option{"buckets": audit48Engines[0].opts, "count-min": audit48Engines[1].opts} {
		fin := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk)}, opts...)...)
		fin.AllowN(clk.Now(), "d", 13)
		_, err := fin.ReadFrom(bytes.NewReader(s))
		if !errors.Is(err, sketch.ErrSnapshotMismatch) || !strings.Contains(err.Error(), "Engine") {
			t.Errorf("Inf into %s: %v, want a mismatch naming Engine", name, err)
		}
		if g := fin.Tokens("d"); g != 7 {
			t.Errorf("Inf into %s: receiver's key %v tokens, want 7", name, g)
		}
		_, err = limit.MustNew(limit.Inf, 5, limit.WithClock(clk)).ReadFrom(bytes.NewReader(limiterSnap(t, fin)))
		if err == nil {
			t.Errorf("%s into Inf: accepted", name)
		} else {
			t.Logf("%s into Inf: %v", name, err)
		}
	}
}

// TestAudit48FixedInfEngineNamedAuto (cosmetic; fixed: engineName): the format says the
// header's engine byte is "0 none (Inf)" (limit/persist.go's format
// comment; docs/snapshots.md, "Limiters and meters": "engine | 0 none
// (Inf), 1 Buckets, 2 CountMin"), but the mismatch error prints byte 0
// through Engine.String as "auto", the engine option that means "let New
// pick Buckets or CountMin": restoring a Buckets snapshot into an Inf
// limiter says "the limiter has auto".
func TestAudit48FixedInfEngineNamedAuto(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	fin := limit.MustNew(10, 20, append([]limit.Option{limit.WithClock(clk)}, audit48Engines[0].opts...)...)
	_, err := limit.MustNew(limit.Inf, 5, limit.WithClock(clk)).ReadFrom(bytes.NewReader(limiterSnap(t, fin)))
	if err == nil {
		t.Fatal("a Buckets snapshot restored into an Inf limiter")
	}
	if strings.Contains(err.Error(), "auto") {
		t.Errorf("got %q: an Inf limiter's engine (format: \"0 none (Inf)\") is named \"auto\", the option that picks an engine; want it named none or Inf", err)
	}
}
