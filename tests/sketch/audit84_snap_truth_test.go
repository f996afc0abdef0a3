package sketch_test

// Audit 84: snapshots, restore and merge against an exact per-key oracle.
// Every estimate must stay at or above the key's true score after a
// snapshot and a restore (at the same time, after idle gaps from 1 ms to
// centuries, on a clock behind the snapshot, into a destination days
// old), after a merge of two replicas, and the refusals (another
// configuration) must be typed and leave the receiver as it was.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

type audit84snapLaw struct {
	name string
	d    decay.Decay
}

func audit84snapLaws() []audit84snapLaw {
	return []audit84snapLaw{
		{"none", decay.None()},
		{"exp", decay.Exponential(1e-9)}, // slow enough to leave mass after years
		{"exp-fast", decay.Exponential(0.05)},
		{"linear", decay.Linear(1e-6)},
	}
}

// audit84snapOracle is the exact per-key truth: each key's own score
// under the law, fed only that key's deltas.
type audit84snapOracle struct {
	d     decay.Decay
	score map[string]float64
	at    map[string]int64
}

func newAudit84snapOracle(d decay.Decay) *audit84snapOracle {
	return &audit84snapOracle{d: d, score: map[string]float64{}, at: map[string]int64{}}
}

func (o *audit84snapOracle) update(k string, delta float64, ms int64) {
	s := o.score[k]
	if t, ok := o.at[k]; ok && ms > t {
		s = o.d.Apply(s, ms-t)
	}
	o.score[k] = s + delta
	o.at[k] = ms
}

func (o *audit84snapOracle) truth(k string, ms int64) float64 {
	s := o.score[k]
	if t, ok := o.at[k]; ok && ms > t {
		s = o.d.Apply(s, ms-t)
	}
	return s
}

func audit84snapKeys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("audit84-key-%d", i)
	}
	return ks
}

// audit84snapCheck fails if any key reads below its truth at ms.
func audit84snapCheck(t *testing.T, what string, s *sketch.Sketch, o *audit84snapOracle, keys []string, ms int64) {
	t.Helper()
	bad := 0
	for _, k := range keys {
		got, want := s.QueryString(k), o.truth(k, ms)
		if math.IsNaN(got) || math.IsInf(got, 0) {
			t.Fatalf("%s: %s reads %v", what, k, got)
		}
		if got < want*(1-1e-12)-1e-300 {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s reads %.17g, below its truth %.17g", what, k, got, want)
			}
		}
	}
}

const audit84snapT0 = int64(1_700_000_000_000) // a wall time, Unix ms

func audit84snapCfg(d decay.Decay, clk sketch.Clock) sketch.Config {
	return sketch.Config{Levels: 3, CellsPerLevel: 61, Decay: d, Hi: 1e30, Seed: 84, Clock: clk}
}

// audit84snapFeed writes random non-negative deltas to keys over about
// 20 s of the clock, into s and the oracle.
func audit84snapFeed(s *sketch.Sketch, o *audit84snapOracle, clk *sketchtest.FakeClock, keys []string, rng *rand.Rand, ops int) {
	for range ops {
		clk.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
		k := keys[rng.IntN(len(keys))]
		d := float64(rng.IntN(9)) // integers: exact under None
		s.UpdateString(k, d)
		o.update(k, d, clk.NowMillis())
	}
}

// TestAudit84SnapRestoreNeverBelowTruth restores one snapshot at idle
// gaps from 0 to two centuries, by UnmarshalBinary and by ReadFrom, and
// checks every key at or above its exact truth; for gaps whose ages stay
// below 2^29 ms the restored sketch must answer exactly as the original
// at the same wall time (docs/snapshots.md, "Time across restarts").
func TestAudit84SnapRestoreNeverBelowTruth(t *testing.T) {
	gaps := []time.Duration{0, time.Millisecond, 20 * time.Second, time.Hour, 6 * 24 * time.Hour,
		7 * 24 * time.Hour, 30 * 24 * time.Hour, 3 * 365 * 24 * time.Hour, 200 * 365 * 24 * time.Hour}
	for _, lw := range audit84snapLaws() {
		t.Run(lw.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(84, 1))
			keys := audit84snapKeys(150)
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84snapT0)
			src, err := sketch.New(audit84snapCfg(lw.d, clk))
			if err != nil {
				t.Fatal(err)
			}
			o := newAudit84snapOracle(lw.d)
			audit84snapFeed(src, o, clk, keys, rng, 2000)
			snap, err := src.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			T := clk.NowMillis()
			audit84snapCheck(t, "original at T", src, o, keys, T)
			for gi, gap := range gaps {
				for _, stream := range []bool{false, true} {
					rclk := sketchtest.NewFakeClock()
					rclk.Set(T + gap.Milliseconds())
					dst, err := sketch.New(audit84snapCfg(lw.d, rclk))
					if err != nil {
						t.Fatal(err)
					}
					if stream {
						n, err := dst.ReadFrom(bytes.NewReader(snap))
						if err != nil || n != int64(len(snap)) {
							t.Fatalf("gap %v: ReadFrom = %d, %v", gap, n, err)
						}
					} else if err := dst.UnmarshalBinary(snap); err != nil {
						t.Fatalf("gap %v: %v", gap, err)
					}
					now := rclk.NowMillis()
					what := fmt.Sprintf("restored after %v (stream %v)", gap, stream)
					audit84snapCheck(t, what, dst, o, keys, now)
					// Live on: more writes after the restore, then a
					// later read, still never below the truth.
					rng2 := rand.New(rand.NewPCG(84, uint64(gi)))
					o2 := &audit84snapOracle{d: o.d, score: map[string]float64{}, at: map[string]int64{}}
					for k, v := range o.score {
						o2.score[k], o2.at[k] = v, o.at[k]
					}
					audit84snapFeed(dst, o2, rclk, keys, rng2, 300)
					rclk.Advance(90 * time.Second)
					audit84snapCheck(t, what+", then 300 writes and 90 s", dst, o2, keys, rclk.NowMillis())
				}
			}
		})
	}
}

// TestAudit84SnapRestoreEqualsOriginalLater restores at gaps below
// 2^29 ms of total age and compares every key with the original advanced
// to the same wall time: equality, not a bound (docs/snapshots.md: "The
// restored sketch then answers every Query exactly as the original would
// at the same wall time").
func TestAudit84SnapRestoreEqualsOriginalLater(t *testing.T) {
	for _, lw := range audit84snapLaws() {
		for _, gap := range []time.Duration{0, time.Millisecond, 20 * time.Second, time.Hour, 5 * 24 * time.Hour} {
			t.Run(fmt.Sprintf("%s/%v", lw.name, gap), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(84, 2))
				keys := audit84snapKeys(120)
				clk := sketchtest.NewFakeClock()
				clk.Set(audit84snapT0)
				src, _ := sketch.New(audit84snapCfg(lw.d, clk))
				o := newAudit84snapOracle(lw.d)
				audit84snapFeed(src, o, clk, keys, rng, 1500)
				snap, err := src.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				T := clk.NowMillis()
				rclk := sketchtest.NewFakeClock()
				rclk.Set(T + gap.Milliseconds())
				dst, _ := sketch.New(audit84snapCfg(lw.d, rclk))
				if err := dst.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				clk.Set(T + gap.Milliseconds())
				for _, k := range keys {
					if got, want := dst.QueryString(k), src.QueryString(k); got != want {
						t.Fatalf("%s: restored %v, original %v at the same wall time", k, got, want)
					}
				}
				// And 15 s on, both sides.
				clk.Advance(15 * time.Second)
				rclk.Advance(15 * time.Second)
				for _, k := range keys {
					if got, want := dst.QueryString(k), src.QueryString(k); got != want {
						t.Fatalf("%s (+15 s): restored %v, original %v", k, got, want)
					}
				}
			})
		}
	}
}

// TestAudit84SnapRestoreBackwardsClock restores on clocks behind the
// snapshot instant (1 ms, 1 h, 3 years): no downtime, no growth: every
// key reads what the original read at the snapshot instant, and a later
// advance decays from there (docs/snapshots.md: "counted as 0 when
// negative (a restore clock behind the snapshot never makes scores
// grow)").
func TestAudit84SnapRestoreBackwardsClock(t *testing.T) {
	for _, lw := range audit84snapLaws() {
		t.Run(lw.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(84, 3))
			keys := audit84snapKeys(100)
			clk := sketchtest.NewFakeClock()
			clk.Set(audit84snapT0)
			src, _ := sketch.New(audit84snapCfg(lw.d, clk))
			o := newAudit84snapOracle(lw.d)
			audit84snapFeed(src, o, clk, keys, rng, 1000)
			snap, err := src.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			T := clk.NowMillis()
			atT, at10 := map[string]float64{}, map[string]float64{}
			for _, k := range keys {
				atT[k] = src.QueryString(k)
			}
			clk.Advance(10 * time.Second)
			for _, k := range keys {
				at10[k] = src.QueryString(k)
			}
			for _, back := range []time.Duration{time.Millisecond, time.Hour, 3 * 365 * 24 * time.Hour} {
				rclk := sketchtest.NewFakeClock()
				rclk.Set(T - back.Milliseconds())
				dst, _ := sketch.New(audit84snapCfg(lw.d, rclk))
				if _, err := dst.ReadFrom(bytes.NewReader(snap)); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if got := dst.QueryString(k); got != atT[k] {
						t.Fatalf("clock %v behind: %s restored %v, the original read %v at the instant", back, k, got, atT[k])
					}
				}
				// 10 s later on the restoring clock: as the original 10 s
				// after T, since the clock's elapsed time is what decays.
				rclk.Advance(10 * time.Second)
				for _, k := range keys {
					want := at10[k]
					if got := dst.QueryString(k); got != want {
						t.Fatalf("clock %v behind, +10 s: %s restored %v, original at T+10s %v", back, k, got, want)
					}
				}
			}
		})
	}
}

// TestAudit84SnapRestoreIntoOldDestination restores into a sketch whose
// own epoch is weeks to months behind the restoring instant, after it ran
// (and swept) alone: ReadFrom is the same restore (its stamps wrap mod
// 2^32 ms past 49.7 days).
func TestAudit84SnapRestoreIntoOldDestination(t *testing.T) {
	for _, lw := range audit84snapLaws() {
		for _, age := range []time.Duration{20 * 24 * time.Hour, 50 * 24 * time.Hour, 400 * 24 * time.Hour} {
			t.Run(fmt.Sprintf("%s/%v", lw.name, age), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(84, 4))
				keys := audit84snapKeys(100)
				clk := sketchtest.NewFakeClock()
				clk.Set(audit84snapT0)
				src, _ := sketch.New(audit84snapCfg(lw.d, clk))
				o := newAudit84snapOracle(lw.d)
				audit84snapFeed(src, o, clk, keys, rng, 1000)
				snap, err := src.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				T := clk.NowMillis()
				// The destination was built age before T + 1 h, used
				// every few days (sweeps), then restored.
				rclk := sketchtest.NewFakeClock()
				rclk.Set(T + time.Hour.Milliseconds() - age.Milliseconds())
				dst, _ := sketch.New(audit84snapCfg(lw.d, rclk))
				for rclk.NowMillis() < T+time.Hour.Milliseconds() {
					dst.UpdateString("unrelated", 3)
					dst.QueryString(keys[0])
					rclk.Advance(min(3*24*time.Hour, time.Duration(T+time.Hour.Milliseconds()-rclk.NowMillis())*time.Millisecond))
				}
				if err := dst.UnmarshalBinary(snap); err != nil {
					t.Fatal(err)
				}
				clk.Set(T + time.Hour.Milliseconds())
				for _, k := range keys {
					got, want := dst.QueryString(k), src.QueryString(k)
					if got != want {
						t.Fatalf("%s: restored into an old sketch %v, original at the same time %v", k, got, want)
					}
				}
				audit84snapCheck(t, "old destination", dst, o, keys, rclk.NowMillis())
				rclk.Advance(40 * 24 * time.Hour)
				audit84snapCheck(t, "old destination +40 d", dst, o, keys, rclk.NowMillis())
			})
		}
	}
}

// audit84snapFixedHasher is a custom hasher; its salt changes its
// fingerprint.
type audit84snapFixedHasher struct{ salt uint64 }

func (h audit84snapFixedHasher) Sum64(k []byte) uint64 { return h.Sum64String(string(k)) }
func (h audit84snapFixedHasher) Sum64String(k string) uint64 {
	x := h.salt ^ 0x9e3779b97f4a7c15
	for i := 0; i < len(k); i++ {
		x = (x ^ uint64(k[i])) * 0x100000001b3
	}
	return x ^ x>>29
}

// audit84snapCells reads the score of every cell from a snapshot of s
// taken now.
func audit84snapCells(t *testing.T, s *sketch.Sketch) []uint32 {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cells := make([]uint32, 0, (len(b)-92)/8)
	for p := 88; p+8 <= len(b)-4; p += 8 {
		cells = append(cells, uint32(b[p])|uint32(b[p+1])<<8|uint32(b[p+2])<<16|uint32(b[p+3])<<24)
	}
	return cells
}

func audit84snapSameCells(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAudit84SnapMismatchRefusedUnchanged restores a snapshot into, and
// merges with, sketches that differ in one field each: every one must be
// refused with an error matching ErrSnapshotMismatch (not
// ErrCorruptSnapshot), naming the field, and leave the receiver as it
// was (docs/snapshots.md, "What is checked on restore"; sketch doc: "A
// refused snapshot leaves s as it was").
func TestAudit84SnapMismatchRefusedUnchanged(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(audit84snapT0)
	base := sketch.Config{Levels: 3, CellsPerLevel: 64, Decay: decay.Exponential(0.01), Lo: -5, Hi: 1000, Seed: 7, Clock: clk,
		Hasher: func(seed uint64) sketch.Hasher { return audit84snapFixedHasher{salt: seed} }}
	src, err := sketch.New(base)
	if err != nil {
		t.Fatal(err)
	}
	keys := audit84snapKeys(40)
	for i, k := range keys {
		src.UpdateString(k, float64(i%7+1))
	}
	snap, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	variants := []struct {
		field string
		mod   func(*sketch.Config)
	}{
		{"Seed", func(c *sketch.Config) { c.Seed = 8 }},
		{"Levels", func(c *sketch.Config) { c.Levels = 4 }},
		{"CellsPerLevel", func(c *sketch.Config) { c.CellsPerLevel = 65 }},
		{"Decay", func(c *sketch.Config) { c.Decay = decay.Linear(0.01) }},
		{"Decay", func(c *sketch.Config) { c.Decay = decay.None() }},
		{"Decay parameter", func(c *sketch.Config) { c.Decay = decay.Exponential(math.Nextafter(0.01, 1)) }},
		{"Lo", func(c *sketch.Config) { c.Lo = -4 }},
		{"Lo", func(c *sketch.Config) { c.Lo = 0 }},
		{"Hi", func(c *sketch.Config) { c.Hi = 1001 }},
		{"Aggregator", func(c *sketch.Config) { c.Aggregator = sketch.Max }},
		{"Aggregator", func(c *sketch.Config) { c.Aggregator = sketch.Mean }},
		{"Aggregator", func(c *sketch.Config) {
			c.AggregateFunc = func(s []float64) float64 {
				m := s[0]
				for _, x := range s[1:] {
					m = math.Min(m, x)
				}
				return m
			}
		}},
		{"Hasher", func(c *sketch.Config) { c.Hasher = sketch.XXH3() }},
		{"Hasher", func(c *sketch.Config) { c.Hasher = sketch.SipHash() }},
		{"Hasher fingerprint", func(c *sketch.Config) {
			c.Hasher = func(seed uint64) sketch.Hasher { return audit84snapFixedHasher{salt: seed + 1} }
		}},
	}
	for i, v := range variants {
		t.Run(fmt.Sprintf("%d-%s", i, v.field), func(t *testing.T) {
			cfg := base
			v.mod(&cfg)
			dst, err := sketch.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for j, k := range keys {
				dst.UpdateString(k, float64(j%5)+0.5)
			}
			before := audit84snapCells(t, dst)
			srcBefore := audit84snapCells(t, src)
			check := func(how string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: a snapshot/sketch differing in %s was accepted", how, v.field)
				}
				if !errors.Is(err, sketch.ErrSnapshotMismatch) || errors.Is(err, sketch.ErrCorruptSnapshot) {
					t.Fatalf("%s: %v: want ErrSnapshotMismatch only", how, err)
				}
				if !strings.Contains(err.Error(), v.field) {
					t.Errorf("%s: %q does not name %s", how, err, v.field)
				}
				if after := audit84snapCells(t, dst); !audit84snapSameCells(before, after) {
					t.Fatalf("%s: refused, but the receiver changed", how)
				}
				if after := audit84snapCells(t, src); !audit84snapSameCells(srcBefore, after) {
					t.Fatalf("%s: refused, but the other sketch changed", how)
				}
			}
			check("UnmarshalBinary", dst.UnmarshalBinary(snap))
			_, err = dst.ReadFrom(bytes.NewReader(snap))
			check("ReadFrom", err)
			check("dst.Merge(src)", dst.Merge(src))
			check("src.Merge(dst)", src.Merge(dst))
		})
	}
	// A sketch into itself is refused too.
	if err := src.Merge(src); !errors.Is(err, sketch.ErrSnapshotMismatch) {
		t.Fatalf("Merge into itself: %v", err)
	}
}

// TestAudit84SnapMergeNeverBelowUnion feeds two replicas disjoint parts of
// one stream on clocks that disagree (one 3 s ahead, one an hour behind:
// wall times are what Merge maps by, so each replica's writes happened at
// its own wall time), merges, snapshots the merge and restores it a day
// later: every key at or above its truth over the union at each step
// (None and Exponential: the sum of the replicas' truths; Linear, clocks
// agreeing, with the overlap: the union fed in order). The merged sketch
// must also snapshot and restore (its cells stay within [Lo, Hi]).
func TestAudit84SnapMergeNeverBelowUnion(t *testing.T) {
	for _, lw := range audit84snapLaws() {
		for _, skew := range []time.Duration{0, 3 * time.Second, -time.Hour} {
			linear := strings.HasPrefix(lw.name, "linear")
			if linear && skew != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", lw.name, skew), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(84, 5))
				keys := audit84snapKeys(120)
				ca, cb := sketchtest.NewFakeClock(), sketchtest.NewFakeClock()
				ca.Set(audit84snapT0)
				cb.Set(audit84snapT0 + skew.Milliseconds())
				a, _ := sketch.New(audit84snapCfg(lw.d, ca))
				b, _ := sketch.New(audit84snapCfg(lw.d, cb))
				oa, ob, ou := newAudit84snapOracle(lw.d), newAudit84snapOracle(lw.d), newAudit84snapOracle(lw.d)
				start := ca.NowMillis()
				for range 2000 {
					dt := time.Duration(rng.IntN(50)) * time.Millisecond
					ca.Advance(dt)
					cb.Advance(dt)
					k := keys[rng.IntN(len(keys))]
					d := float64(rng.IntN(9))
					if rng.IntN(2) == 0 {
						a.UpdateString(k, d)
						oa.update(k, d, ca.NowMillis())
					} else {
						b.UpdateString(k, d)
						ob.update(k, d, cb.NowMillis())
					}
					ou.update(k, d, ca.NowMillis())
				}
				truth := &audit84snapOracle{d: lw.d, score: map[string]float64{}, at: map[string]int64{}}
				at := func(ms int64) *audit84snapOracle {
					if linear {
						return ou
					}
					// Sum of the replicas' truths at ms, as an oracle
					// frozen at ms.
					for _, k := range keys {
						truth.score[k] = oa.truth(k, ms) + ob.truth(k, ms)
						truth.at[k] = ms
					}
					return truth
				}
				overlap := time.Duration(ca.NowMillis()-start+1) * time.Millisecond
				if err := a.Merge(b, overlap); err != nil {
					t.Fatal(err)
				}
				now := ca.NowMillis()
				audit84snapCheck(t, "merged", a, at(now), keys, now)
				snap, err := a.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				rclk := sketchtest.NewFakeClock()
				rclk.Set(now + 24*time.Hour.Milliseconds())
				dst, _ := sketch.New(audit84snapCfg(lw.d, rclk))
				if err := dst.UnmarshalBinary(snap); err != nil {
					t.Fatalf("the merged sketch's snapshot is refused: %v", err)
				}
				audit84snapCheck(t, "merged, restored a day later", dst, at(rclk.NowMillis()), keys, rclk.NowMillis())
			})
		}
	}
}
