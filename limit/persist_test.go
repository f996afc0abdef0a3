package limit_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/snapshot"
)

// persistCase is a limiter configuration of the persistence tests.
type persistCase struct {
	name  string
	lim   limit.Limit
	burst int
	opts  []limit.Option
}

var persistCases = []persistCase{
	// Few lines / cells: keys share them, lines evict, floors rise.
	{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(50, 0.05)}},
	{"buckets-1000/s", 1000, 50, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(50, 0.05), limit.WithRejectCost(1)}},
	{"count-min", 10, 20, []limit.Option{limit.WithSize(2, 64), limit.WithPeriod(5 * time.Second)}},
	{"count-min-3gen", limit.Every(700 * time.Millisecond), 5, []limit.Option{limit.WithSize(3, 32), limit.WithGenerations(3)}},
	{"count-min-cu", 10, 20, []limit.Option{limit.WithSize(2, 64), limit.WithConservativeUpdate(true)}},
}

// newPersist builds c on clock clk (seeded when seed != 0).
func newPersist(t testing.TB, c persistCase, clk *limittest.FakeClock, seed uint64) *limit.Limiter {
	t.Helper()
	opts := append([]limit.Option{limit.WithClock(clk)}, c.opts...)
	if seed != 0 {
		opts = append(opts, limit.WithSeed(seed))
	}
	l, err := limit.New(c.lim, c.burst, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// persistOps runs a deterministic mix of calls at the clock's reading,
// advancing it now and then, and returns their decisions.
func persistOps(l *limit.Limiter, clk *limittest.FakeClock, rng *rand.Rand, keys, ops int) []limit.Decision {
	var out []limit.Decision
	for range ops {
		k := fmt.Sprintf("k%d", rng.IntN(keys))
		now := clk.Now()
		switch rng.IntN(4) {
		case 0:
			out = append(out, l.DecideN(now, k, 1+rng.IntN(3)))
		case 1:
			r := l.ReserveN(now, k, 1+rng.IntN(2))
			out = append(out, limit.Decision{Allowed: r.OK(), RetryAfter: r.DelayFrom(now)})
			if rng.IntN(3) == 0 {
				r.Cancel()
			}
		case 2:
			out = append(out, limit.Decision{Allowed: l.AllowN(now, k, 1)})
		default:
			out = append(out, l.PeekN(now, k, 1))
		}
		if rng.IntN(6) == 0 {
			clk.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
	}
	return out
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

// TestRestoreDifferential: a limiter saved at t0 and restored, in a
// limiter built with another seed on a clock reading t0+d, decides
// exactly as the limiter that was never saved, advanced to t0+d: every
// key's Decision at t0+d, then every decision of the same calls on both.
func TestRestoreDifferential(t *testing.T) {
	downs := []time.Duration{0, time.Millisecond, 450 * time.Millisecond, 5 * time.Second, 17 * time.Second, time.Hour, 3 * 365 * 24 * time.Hour}
	for ci, c := range persistCases {
		for _, d := range downs {
			t.Run(fmt.Sprintf("%s/down=%v", c.name, d), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ci), uint64(d)))
				clk := limittest.NewFakeClock()
				clk.Set(1_700_000_000_000)
				a := newPersist(t, c, clk, 0)
				persistOps(a, clk, rng, 200, 2000)
				snap := limiterSnap(t, a)
				t0 := clk.NowMillis()

				clk2 := limittest.NewFakeClock()
				clk2.Set(t0 + d.Milliseconds())
				b := newPersist(t, c, clk2, 0) // another random seed: adopted from the snapshot
				if n, err := b.ReadFrom(bytes.NewReader(snap)); err != nil || n != int64(len(snap)) {
					t.Fatalf("ReadFrom: %d of %d bytes, %v", n, len(snap), err)
				}
				clk.Set(t0 + d.Milliseconds())
				for k := range 200 {
					key := fmt.Sprintf("k%d", k)
					if da, db := a.PeekN(clk.Now(), key, 1), b.PeekN(clk2.Now(), key, 1); da != db {
						t.Fatalf("%s at t0+%v: restored %+v, never saved %+v", key, d, db, da)
					}
				}
				seed := rng.Uint64()
				oa := persistOps(a, clk, rand.New(rand.NewPCG(seed, 7)), 200, 2000)
				ob := persistOps(b, clk2, rand.New(rand.NewPCG(seed, 7)), 200, 2000)
				for i := range oa {
					if oa[i] != ob[i] {
						t.Fatalf("call %d after the restore: restored %+v, never saved %+v", i, ob[i], oa[i])
					}
				}
			})
		}
	}
}

// TestRestoreDrains: a key at its burst, saved, restored 5 s later at
// 10/s has exactly 50 tokens' worth drained (capped at the burst).
func TestRestoreDrains(t *testing.T) {
	for _, c := range persistCases[:3] {
		t.Run(c.name, func(t *testing.T) {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			a := newPersist(t, c, clk, 0)
			for a.AllowN(clk.Now(), "abuser", 1) {
			}
			snap := limiterSnap(t, a)
			for _, d := range []time.Duration{0, 300 * time.Millisecond, time.Second, time.Minute} {
				clk2 := limittest.NewFakeClock()
				clk2.Set(clk.NowMillis() + d.Milliseconds())
				b := newPersist(t, c, clk2, 0)
				if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				want := min(float64(c.burst), a.TokensAt(clk.Now(), "abuser")+float64(c.lim)*d.Seconds())
				if got := b.Tokens("abuser"); got != want {
					t.Fatalf("restored %v later: %v tokens, want %v", d, got, want)
				}
			}
		})
	}
}

// TestRestoreMulti: a Multi is restored window by window; its decisions
// then follow the never-saved Multi's.
func TestRestoreMulti(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(clk *limittest.FakeClock) []*limit.Limiter {
		return []*limit.Limiter{
			newPersist(t, persistCases[0], clk, 0),
			newPersist(t, persistCase{"hour", limit.Every(time.Hour / 1000), 100, []limit.Option{limit.WithSize(2, 64)}}, clk, 0),
		}
	}
	wa := mk(clk)
	ma, _ := limit.NewMulti(wa...)
	rng := rand.New(rand.NewPCG(5, 5))
	for range 3000 {
		ma.AllowN(clk.Now(), fmt.Sprintf("k%d", rng.IntN(50)), 1)
		clk.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	dir := t.TempDir()
	for i, w := range wa {
		if err := snapshot.WriteFile(filepath.Join(dir, fmt.Sprint(i)), w); err != nil {
			t.Fatal(err)
		}
	}
	clk2 := limittest.NewFakeClock()
	clk2.Set(clk.NowMillis() + 2500)
	clk.Advance(2500 * time.Millisecond)
	wb := mk(clk2)
	for i, w := range wb {
		if err := snapshot.Load(filepath.Join(dir, fmt.Sprint(i)), w); err != nil {
			t.Fatal(err)
		}
	}
	mb, _ := limit.NewMulti(wb...)
	for i := range 3000 {
		k := fmt.Sprintf("k%d", rng.IntN(50))
		if da, db := ma.DecideKeys(clk.Now(), 1, k), mb.DecideKeys(clk2.Now(), 1, k); da != db {
			t.Fatalf("call %d: restored %+v, never saved %+v", i, db, da)
		}
		d := time.Duration(rng.IntN(20)) * time.Millisecond
		clk.Advance(d)
		clk2.Advance(d)
	}
}

// TestRestoreMismatch: a limiter of another configuration refuses the
// snapshot with a mismatch, before touching its state; the limit and
// burst themselves are configuration where they leave the base units.
func TestRestoreMismatch(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	for _, c := range persistCases {
		a := newPersist(t, c, clk, 0)
		a.AllowN(clk.Now(), "x", 3)
		snap := limiterSnap(t, a)
		for _, o := range persistCases {
			for _, v := range []struct {
				name  string
				lim   limit.Limit
				burst int
				extra []limit.Option
				ok    bool
			}{
				{"same", o.lim, o.burst, nil, o.name == c.name},
				{"limit x2", 2 * o.lim, o.burst, nil, false},
				{"MaxDebt", o.lim, o.burst, []limit.Option{limit.WithMaxDebt(float64(3 * o.burst))}, false},
				// Another burst with MaxDebt fixed: same units, same
				// clamp, so the snapshot is taken; the burst is the new
				// process's configuration.
				{"burst-1", o.lim, o.burst - 1, []limit.Option{limit.WithMaxDebt(float64(2 * o.burst))}, o.name == c.name},
				{"strict off", o.lim, o.burst, []limit.Option{limit.WithStrict(false)}, o.name == c.name},
				{"inf", limit.Inf, o.burst, nil, false},
			} {
				cc := o
				cc.lim, cc.burst, cc.opts = v.lim, v.burst, append(append([]limit.Option(nil), o.opts...), v.extra...)
				if v.lim == limit.Inf {
					cc.opts = nil
				}
				b, err := limit.New(cc.lim, cc.burst, append([]limit.Option{limit.WithClock(clk)}, cc.opts...)...)
				if err != nil {
					continue // a variant its options refuse (a Period too short for the MaxDebt)
				}
				if !b.AllowN(clk.Now(), "y", 1) && v.lim != limit.Inf {
					t.Fatal("fresh key denied")
				}
				before := b.TokensAt(clk.Now(), "y")
				_, err = b.ReadFrom(bytes.NewReader(snap))
				if v.ok {
					if err != nil {
						t.Fatalf("%s into %s/%s: %v", c.name, o.name, v.name, err)
					}
					continue
				}
				if !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("%s into %s/%s: %v, want a mismatch", c.name, o.name, v.name, err)
				}
				if got := b.TokensAt(clk.Now(), "y"); got != before {
					t.Fatalf("%s into %s/%s: the refused restore changed the limiter (%v tokens, had %v)", c.name, o.name, v.name, got, before)
				}
			}
		}
	}
}

// TestRestoreInf: Inf's snapshot is its header; it restores into Inf only.
func TestRestoreInf(t *testing.T) {
	a := limit.MustNew(limit.Inf, 1)
	snap := limiterSnap(t, a)
	if len(snap) != 64 {
		t.Fatalf("Inf snapshot: %d bytes", len(snap))
	}
	if _, err := limit.MustNew(limit.Inf, 5).ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if _, err := limit.MustNew(10, 5).ReadFrom(bytes.NewReader(snap)); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("Inf into 10/s: %v", err)
	}
	var z limit.Limiter
	for name, f := range map[string]func(){
		"WriteTo":      func() { z.WriteTo(&bytes.Buffer{}) },
		"ReadFrom":     func() { z.ReadFrom(bytes.NewReader(snap)) },
		"SnapshotSize": func() { z.SnapshotSize() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("zero Limiter %s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestRestoreCorrupt: every truncation and every flipped byte of a
// snapshot is refused with a typed error, and the limiter is then empty;
// through snapshot.Load a truncated file is refused before ReadFrom.
func TestRestoreCorrupt(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	for _, c := range []persistCase{
		{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(20, 0.2)}},
		{"count-min", 10, 20, []limit.Option{limit.WithSize(1, 8)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newPersist(t, c, clk, 0)
			persistOps(a, clk, rand.New(rand.NewPCG(1, 1)), 30, 300)
			snap := limiterSnap(t, a)
			b := newPersist(t, c, clk, 0)
			empty := func(what string) {
				t.Helper()
				for k := range 30 {
					if tok := b.TokensAt(clk.Now(), fmt.Sprintf("k%d", k)); tok != float64(c.burst) {
						t.Fatalf("%s: k%d has %v tokens after a refused restore", what, k, tok)
					}
				}
			}
			step := max(1, len(snap)/3000)
			for n := 0; n < len(snap); n += step {
				if _, err := b.ReadFrom(bytes.NewReader(snap[:n])); !errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Fatalf("truncated at %d of %d: %v", n, len(snap), err)
				}
				empty(fmt.Sprintf("truncated at %d", n))
			}
			for i := 0; i < len(snap); i += step {
				bad := bytes.Clone(snap)
				bad[i] ^= 0x10
				_, err := b.ReadFrom(bytes.NewReader(bad))
				if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
					t.Fatalf("byte %d flipped: %v", i, err)
				}
				empty(fmt.Sprintf("byte %d flipped", i))
			}
			path := filepath.Join(t.TempDir(), "snap")
			if err := os.WriteFile(path, snap[:len(snap)-1], 0o600); err != nil {
				t.Fatal(err)
			}
			if err := snapshot.Load(path, b); !errors.Is(err, sketch.ErrCorruptSnapshot) {
				t.Fatalf("Load of a truncated file: %v", err)
			}
			empty("Load of a truncated file")
		})
	}
}

// TestSaverLimiter: a Saver takes a *Limiter as its Source and Load as a
// Destination; WriteTo runs while other goroutines decide (under -race),
// and a key denied before the snapshot began is still denied after the
// restore.
func TestSaverLimiter(t *testing.T) {
	l := limit.MustNew(limit.Every(5*time.Second), 5) // Buckets, real clock: a token per 5 s
	for l.Allow("abuser") {
	}
	path := filepath.Join(t.TempDir(), "limiter.snap")
	s, err := snapshot.NewSaver(path, time.Hour, l)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l.Allow(fmt.Sprintf("g%d-%d", g, i%500))
			}
		}()
	}
	for range 3 {
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := limit.MustNew(limit.Every(5*time.Second), 5)
	if err := snapshot.Load(path, r); err != nil {
		t.Fatal(err)
	}
	got := 0
	for range 2 {
		if r.Allow("abuser") {
			got++
		}
	}
	if got == 2 {
		t.Fatal("the abuser got two tokens back within the 10 s they take")
	}
}

// fixLimiterCRCs repairs the limiter header's checksum and the trailing
// one of the engine's snapshot, so that fuzzed bytes reach the checks
// behind them.
func fixLimiterCRCs(b []byte) {
	le := binary.LittleEndian
	tab := crc32.MakeTable(crc32.Castagnoli)
	if len(b) >= 64 {
		le.PutUint32(b[60:], crc32.Checksum(b[:60], tab))
	}
	if len(b) >= 64+4 {
		le.PutUint32(b[len(b)-4:], crc32.Checksum(b[64:len(b)-4], tab))
	}
}

// FuzzLimiterReadFrom feeds arbitrary bytes, seeded with real snapshots
// of both engines, to ReadFrom: it must never panic, must refuse with a
// typed error and leave the limiter empty, or restore a limiter whose
// every key holds between burst - MaxDebt and burst tokens and keeps
// deciding.
func FuzzLimiterReadFrom(f *testing.F) {
	cases := []persistCase{
		{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(10, 0.2)}},
		{"count-min", 10, 20, []limit.Option{limit.WithSize(1, 8)}},
	}
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	for i, c := range cases {
		a := newPersist(f, c, clk, 0)
		persistOps(a, clk, rand.New(rand.NewPCG(2, 2)), 30, 300)
		s := limiterSnap(f, a)
		f.Add(s, uint8(i), false)
		f.Add(s, uint8(i), true)
		f.Add(s[:len(s)-7], uint8(i), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8, fix bool) {
		c := cases[int(which)%len(cases)]
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_001_000)
		l := newPersist(t, c, clk, 0)
		if fix {
			data = bytes.Clone(data)
			fixLimiterCRCs(data)
		}
		_, err := l.ReadFrom(bytes.NewReader(data))
		if err != nil && !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
			t.Fatalf("untyped error: %v", err)
		}
		for k := range 30 {
			key := fmt.Sprintf("k%d", k)
			tok := l.TokensAt(clk.Now(), key)
			if err != nil && tok != float64(c.burst) {
				t.Fatalf("refused (%v), but %s has %v tokens", err, key, tok)
			}
			if tok > float64(c.burst) || tok < float64(c.burst)-l.MaxDebt() {
				t.Fatalf("%s has %v tokens, outside [burst - MaxDebt, burst]", key, tok)
			}
		}
		for k := range 30 {
			key := fmt.Sprintf("k%d", k)
			l.DecideN(clk.Now(), key, 1)
			if tok := l.TokensAt(clk.Now(), key); tok > float64(c.burst) || tok < float64(c.burst)-l.MaxDebt() {
				t.Fatalf("%s has %v tokens after a decision, outside [burst - MaxDebt, burst]", key, tok)
			}
			clk.Advance(7 * time.Millisecond)
		}
	})
}
