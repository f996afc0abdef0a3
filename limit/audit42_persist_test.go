package limit_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/core"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
	"github.com/lfgrudge/grudge/sketch"
)

var audit42Engines = []persistCase{
	{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(2000, 0.01)}},
	{"count-min", 10, 20, []limit.Option{limit.WithSize(4, 4096)}},
	{"count-min-cu", 10, 20, []limit.Option{limit.WithSize(4, 4096), limit.WithConservativeUpdate(true)}},
}

// audit42Debt is a key's debt in tokens at t (burst - Tokens).
func audit42Debt(l *limit.Limiter, t time.Time, key string) float64 {
	return float64(l.Burst()) - l.TokensAt(t, key)
}

// TestAudit42RestoreClockBehind: a snapshot restored by a clock that
// reads earlier than the snapshot's instant drains nothing and never
// grows: every key reads exactly the debt it had at the snapshot
// (limit/doc.go, "Saving and restoring": "drain by the wall time elapsed
// since (...; none if the restoring clock reads earlier), so a debt saved
// 5 s ago has drained 5 s worth, never more, and never grows").
func TestAudit42RestoreClockBehind(t *testing.T) {
	for _, c := range audit42Engines {
		for _, behind := range []time.Duration{time.Millisecond, 700 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, 24 * time.Hour} {
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			a := newPersist(t, c, clk, 5)
			t0 := clk.Now()
			want := map[string]float64{}
			for i := range 40 {
				k := fmt.Sprintf("k%d", i)
				a.AllowN(t0, k, 1+i%20)
				if i%3 == 0 {
					a.ReserveN(t0, k, 1+i%20) // above the burst, up to MaxDebt
				}
				want[k] = audit42Debt(a, t0, k)
			}
			snap := limiterSnap(t, a)
			clk2 := limittest.NewFakeClock()
			clk2.Set(t0.UnixMilli() - behind.Milliseconds())
			b := newPersist(t, c, clk2, 9)
			if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			for k, w := range want {
				if got := audit42Debt(b, clk2.Now(), k); got != w {
					t.Errorf("%s, restored %v behind: %s reads %v tokens of debt, had %v at the snapshot", c.name, behind, k, got, w)
				}
			}
		}
	}
}

// TestAudit42RestoreAfterClockStepBack: the limiter decided at T, then its
// clock stepped back 5 s and it was saved. The never-stopped limiter
// still counts time from T (a key's time never runs back: "a t before a
// time already used counts as that time"). Restored by a clock reading
// T-5s+d, the key must read at least its debt at T drained by
// max(0, (T-5s+d) - T): the restored limiter "decides as the
// never-stopped one would at the same wall time".
func TestAudit42RestoreAfterClockStepBack(t *testing.T) {
	for _, c := range audit42Engines {
		for _, d := range []time.Duration{0, time.Second, 4 * time.Second, 6 * time.Second} {
			clk := limittest.NewFakeClock()
			T := int64(1_700_000_000_000)
			clk.Set(T)
			a := newPersist(t, c, clk, 5)
			a.AllowN(clk.Now(), "abuser", 20)
			a.ReserveN(clk.Now(), "abuser", 20) // debt 40 = MaxDebt
			clk.Set(T - 5000)
			snap := limiterSnap(t, a)
			clk.Set(T - 5000 + d.Milliseconds())
			never := audit42Debt(a, clk.Now(), "abuser")
			truth := max(0, 40-float64(max(0, d.Milliseconds()-5000))/100)
			clk2 := limittest.NewFakeClock()
			clk2.Set(T - 5000 + d.Milliseconds())
			b := newPersist(t, c, clk2, 9)
			if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			got := audit42Debt(b, clk2.Now(), "abuser")
			t.Logf("%s d=%v: never-stopped %v, restored %v, truth %v", c.name, d, never, got, truth)
			if got < truth {
				t.Errorf("%s: saved after a 5 s clock step back, restored %v later: debt %v tokens, the key's own debt is %v (never-stopped limiter: %v)", c.name, d, got, truth, never)
			}
		}
	}
}

// TestAudit42RestoreNeverBelowTruth: a crowded engine (keys share lines
// and cells, lines evict) takes a random history whose true per-key
// debts are tracked on the side; after a save and a restore at downtimes
// from 0 to 10 s, every key reads at least its true debt drained by the
// downtime, and every key whose drained debt is above burst-1 is denied.
func TestAudit42RestoreNeverBelowTruth(t *testing.T) {
	cases := []persistCase{
		{"buckets crowded", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(40, 0.2)}},
		{"count-min crowded", 10, 20, []limit.Option{limit.WithSize(2, 32)}},
		{"count-min-cu crowded", 10, 20, []limit.Option{limit.WithSize(2, 32), limit.WithConservativeUpdate(true)}},
		{"count-min 3gen", 10, 20, []limit.Option{limit.WithSize(2, 64), limit.WithGenerations(3), limit.WithPeriod(2 * time.Second)}},
	}
	for _, c := range cases {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 42))
			clk := limittest.NewFakeClock()
			clk.Set(1_700_000_000_000)
			a := newPersist(t, c, clk, seed)
			const keys = 150
			debt := make([]float64, keys) // tokens, at last[k]
			last := make([]int64, keys)
			at := func(k int, ms int64) float64 {
				return max(0, debt[k]-float64(ms-last[k])/100)
			}
			for range 4000 {
				k := rng.IntN(keys)
				n := 1 + rng.IntN(8)
				now := clk.NowMillis()
				key := fmt.Sprintf("k%d", k)
				if rng.IntN(4) == 0 {
					if r := a.ReserveN(clk.Now(), key, n); r.OK() {
						debt[k], last[k] = at(k, now)+float64(n), now
					}
				} else if a.AllowN(clk.Now(), key, n) {
					debt[k], last[k] = at(k, now)+float64(n), now
				}
				if rng.IntN(10) == 0 {
					clk.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
			}
			t0 := clk.NowMillis()
			snap := limiterSnap(t, a)
			amnesty := 0
			for _, down := range []int64{0, 1, 99, 1000, 3001, 10000} {
				clk2 := limittest.NewFakeClock()
				clk2.Set(t0 + down)
				b := newPersist(t, c, clk2, 0)
				if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				clk.Set(t0 + down) // the never-stopped limiter, at the same time
				for k := range keys {
					key := fmt.Sprintf("k%d", k)
					truth := at(k, t0+down)
					never := audit42Debt(a, clk.Now(), key)
					if never < truth-1e-9 {
						// The count-min's documented rotation gain ("Rotation and
						// amnesty": a key admitted at its rate keeps old debt unseen
						// by the young generation): not the restore's doing.
						amnesty++
						t.Logf("%s seed %d: never-stopped %s reads %.3f below its own %.3f at t0+%d ms, %d ms after its last admission", c.name, seed, key, never, truth, down, t0+down-last[k])
						truth = never
					}
					if got := audit42Debt(b, clk2.Now(), key); got < truth-1e-9 {
						t.Fatalf("%s seed %d down %d ms: %s reads %v, its own debt is %v (never-stopped limiter: %v)", c.name, seed, down, key, got, at(k, t0+down), never)
					}
					if truth > 19 && b.PeekN(clk2.Now(), key, 1).Allowed {
						t.Fatalf("%s seed %d down %d ms: %s with %v of its own debt admitted after the restore", c.name, seed, down, key, truth)
					}
				}
			}
			t.Logf("%s seed %d: history over %d ms; %d (key, downtime) readings where the never-stopped limiter was already below the key's own debt", c.name, seed, t0-1_700_000_000_000, amnesty)
		}
	}
}

// TestAudit42RestoreMismatchNamesField: a snapshot from another
// configuration is refused with an error matching
// sketch.ErrSnapshotMismatch whose Field names what differs, and the
// refusing limiter is unchanged (its own snapshot bytes are the same).
func TestAudit42RestoreMismatchNamesField(t *testing.T) {
	clk := limittest.NewFakeClock()
	clk.Set(1_700_000_000_000)
	mk := func(lim limit.Limit, burst int, opts ...limit.Option) *limit.Limiter {
		l, err := limit.New(lim, burst, append([]limit.Option{limit.WithClock(clk), limit.WithSeed(1)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cmo := []limit.Option{limit.WithSize(2, 64), limit.WithPeriod(8 * time.Second)}
	base := func() []limit.Option { return append([]limit.Option(nil), cmo...) }
	cases := []struct {
		name     string
		from, to *limit.Limiter
		field    string
	}{
		{"engine", mk(10, 20, limit.WithCapacity(100, 0.1)), mk(10, 20, append(base(), limit.WithEngine(limit.CountMin))...), "Engine"},
		{"buckets lines", mk(10, 20, limit.WithCapacity(100, 0.1)), mk(10, 20, limit.WithCapacity(5000, 0.1)), "Lines"},
		{"buckets rate", mk(10, 20, limit.WithCapacity(100, 0.1)), mk(20, 20, limit.WithCapacity(100, 0.1), limit.WithMaxDebt(40)), ""},
		{"buckets MaxDebt", mk(10, 20, limit.WithCapacity(100, 0.1)), mk(10, 20, limit.WithCapacity(100, 0.1), limit.WithMaxDebt(41)), ""},
		{"count-min size", mk(10, 20, base()...), mk(10, 20, limit.WithSize(2, 128), limit.WithPeriod(8*time.Second)), "Size"},
		{"count-min levels", mk(10, 20, base()...), mk(10, 20, limit.WithSize(3, 64), limit.WithPeriod(8*time.Second)), "Size"},
		{"count-min generations", mk(10, 20, base()...), mk(10, 20, append(base(), limit.WithGenerations(3))...), "Generations"},
		{"count-min period", mk(10, 20, base()...), mk(10, 20, limit.WithSize(2, 64), limit.WithPeriod(9*time.Second)), "Period"},
		{"count-min cu", mk(10, 20, base()...), mk(10, 20, append(base(), limit.WithConservativeUpdate(true))...), "ConservativeUpdate"},
		{"count-min MaxDebt", mk(10, 20, base()...), mk(10, 20, append(base(), limit.WithMaxDebt(60))...), "MaxDebt"},
		{"count-min rate", mk(10, 20, base()...), mk(limit.Limit(10.5), 20, base()...), ""},
	}
	for _, c := range cases {
		c.from.AllowN(clk.Now(), "x", 5)
		c.to.AllowN(clk.Now(), "y", 7)
		snap := limiterSnap(t, c.from)
		before := limiterSnap(t, c.to)
		_, err := c.to.ReadFrom(bytes.NewReader(snap))
		var se *core.SnapshotError
		if !errors.Is(err, sketch.ErrSnapshotMismatch) || !errors.As(err, &se) {
			t.Errorf("%s: %v, want a mismatch", c.name, err)
			continue
		}
		t.Logf("%s: field %s: %v", c.name, se.Field, err)
		if c.field != "" && se.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, se.Field, c.field, err)
		}
		if c.field == "" && se.Field != "Unit" && se.Field != "Drain" && se.Field != "MaxDebt" {
			t.Errorf("%s: field %q, want one of the base units or MaxDebt (%v)", c.name, se.Field, err)
		}
		if after := limiterSnap(t, c.to); !bytes.Equal(before, after) {
			t.Errorf("%s: the refused restore changed the limiter", c.name)
		}
	}
}

// TestAudit42NoHalfRestore: a snapshot whose engine part is damaged (a
// flipped byte in the last cells, a truncation in the middle, a trailing
// garbage-free short read) leaves the limiter "empty, as built": its own
// snapshot afterwards is byte for byte that of a limiter built the same
// way and never used, on both engines, whatever limiter state it had.
func TestAudit42NoHalfRestore(t *testing.T) {
	for _, c := range audit42Engines {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a := newPersist(t, c, clk, 5)
		persistOps(a, clk, rand.New(rand.NewPCG(3, 3)), 300, 3000)
		snap := limiterSnap(t, a)
		built := limiterSnap(t, newPersist(t, c, clk, 9))
		for _, cut := range []int{len(snap) / 2, len(snap) - 1, len(snap) - 4, 70} {
			b := newPersist(t, c, clk, 9)
			_, err := b.ReadFrom(bytes.NewReader(snap[:cut]))
			if !errors.Is(err, sketch.ErrCorruptSnapshot) {
				t.Fatalf("%s cut %d: %v", c.name, cut, err)
			}
			if got := limiterSnap(t, b); !bytes.Equal(got, built) {
				t.Errorf("%s: after a restore truncated at %d of %d bytes, the limiter is not as built (%d bytes differ)", c.name, cut, len(snap), audit42Diff(got, built))
			}
		}
		for _, pos := range []int{len(snap) - 1, len(snap) - 9, len(snap) / 2, 64 + 3} {
			bad := bytes.Clone(snap)
			bad[pos] ^= 0x01
			b := newPersist(t, c, clk, 9)
			_, err := b.ReadFrom(bytes.NewReader(bad))
			if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
				t.Fatalf("%s flip %d: %v", c.name, pos, err)
			}
			if got := limiterSnap(t, b); !bytes.Equal(got, built) {
				t.Errorf("%s: after a restore with byte %d of %d flipped (%v), the limiter is not as built (%d bytes differ)", c.name, pos, len(snap), err, audit42Diff(got, built))
			}
		}
	}
}

func audit42Diff(a, b []byte) int {
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestAudit42RestoreAfterSetLimitAndTrailing: a limiter whose policy was
// changed by SetLimit/SetBurst before the save restores into one built
// with New's arguments (MaxDebt and the base units stay New's), and after
// the same SetLimit/SetBurst decides as the never-saved one; ReadFrom
// reads exactly its snapshot's bytes from a stream that continues.
func TestAudit42RestoreAfterSetLimitAndTrailing(t *testing.T) {
	for _, c := range audit42Engines[:2] {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a := newPersist(t, c, clk, 5)
		if err := a.SetLimit(5); err != nil {
			t.Fatal(err)
		}
		if err := a.SetBurst(10); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(8, 8))
		persistOps(a, clk, rng, 100, 1500)
		snap := limiterSnap(t, a)
		stream := append(bytes.Clone(snap), "TRAILER"...)
		clk2 := limittest.NewFakeClock()
		clk2.Set(clk.NowMillis())
		b := newPersist(t, c, clk2, 9)
		r := bytes.NewReader(stream)
		n, err := b.ReadFrom(r)
		if err != nil || n != int64(len(snap)) || r.Len() != len("TRAILER") {
			t.Fatalf("%s: ReadFrom read %d of %d bytes (%d left), %v", c.name, n, len(snap), r.Len(), err)
		}
		if err := b.SetLimit(5); err != nil {
			t.Fatal(err)
		}
		if err := b.SetBurst(10); err != nil {
			t.Fatal(err)
		}
		clk.Advance(250 * time.Millisecond)
		clk2.Advance(250 * time.Millisecond)
		for k := range 100 {
			key := fmt.Sprintf("k%d", k)
			if da, db := a.PeekN(clk.Now(), key, 1), b.PeekN(clk2.Now(), key, 1); da != db {
				t.Fatalf("%s: %s restored %+v, never saved %+v", c.name, key, db, da)
			}
		}
		oa := persistOps(a, clk, rand.New(rand.NewPCG(9, 9)), 100, 1000)
		ob := persistOps(b, clk2, rand.New(rand.NewPCG(9, 9)), 100, 1000)
		for i := range oa {
			if oa[i] != ob[i] {
				t.Fatalf("%s: call %d after the restore: restored %+v, never saved %+v", c.name, i, ob[i], oa[i])
			}
		}
	}
}

// TestAudit42RestoreDowntimeSweep: lone keys (30 keys in an engine sized
// for 1000) with debts from 1 to 40 tokens, saved and restored after
// downtimes swept from 0 to 70 s (every 211 ms, and around the wraps of
// the Buckets engine's 16-bit tick residues: 65,536 ticks of 1/15 ms is
// 4,369.07 ms; 2^16 ms), read exactly their debt drained by the downtime
// on both engines ("a debt saved 5 s ago has drained 5 s worth, never
// more, and never grows").
func TestAudit42RestoreDowntimeSweep(t *testing.T) {
	testsize.Serial(t)
	downs := []int64{}
	for d := int64(0); d <= 70_000; d += 211 * int64(testsize.Stride(testsize.Sample(1, 5, 20))) {
		downs = append(downs, d)
	}
	for _, w := range []int64{4369, 4370, 8738, 8739, 65535, 65536, 65537, 61438, 61439} {
		downs = append(downs, w-1, w, w+1)
	}
	for _, c := range []persistCase{
		{"buckets", 10, 20, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(1000, 0.01)}},
		{"buckets 1/s", 1, 30, []limit.Option{limit.WithEngine(limit.Buckets), limit.WithCapacity(1000, 0.01)}},
		{"count-min", 10, 20, []limit.Option{limit.WithEngine(limit.CountMin), limit.WithCapacity(1000, 0.001)}},
	} {
		clk := limittest.NewFakeClock()
		clk.Set(1_700_000_000_000)
		a := newPersist(t, c, clk, 5)
		rate := float64(c.lim)
		maxDebt := 2 * c.burst
		want := make([]float64, 30)
		for i := range want {
			k := fmt.Sprintf("lone%d", i)
			n := 1 + i%maxDebt
			if n <= c.burst {
				a.AllowN(clk.Now(), k, n)
			} else {
				a.AllowN(clk.Now(), k, c.burst)
				a.ReserveN(clk.Now(), k, n-c.burst)
			}
			want[i] = float64(n)
			if got := audit42Debt(a, clk.Now(), k); got != want[i] {
				t.Fatalf("%s: %s at %v, want %v (not alone?)", c.name, k, got, want[i])
			}
		}
		snap := limiterSnap(t, a)
		t0 := clk.NowMillis()
		for _, d := range downs {
			clk2 := limittest.NewFakeClock()
			clk2.Set(t0 + d)
			b := newPersist(t, c, clk2, 9)
			if _, err := b.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				truth := max(0, w-rate*float64(d)/1000)
				if got := audit42Debt(b, clk2.Now(), fmt.Sprintf("lone%d", i)); got != truth && !(truth == 0 && got == 0) {
					if got < truth-1e-9 || got > truth+1e-9 {
						t.Fatalf("%s: lone%d (debt %v) restored after %d ms reads %v, want %v", c.name, i, w, d, got, truth)
					}
				}
			}
		}
	}
}
