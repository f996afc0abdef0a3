package limit_test

// Audit 85, "says when it is full": limiters pushed to 10x the keys
// they were sized for. Promises: the package doc's one-sidedness (a key
// is never admitted beyond its own bucket: collisions and floors only
// over-count), Stats().Saturation "the estimated probability that a fresh
// key ... asking for one token now is denied", in [0, 1]; docs/design.md
// section 8: the Buckets reading 1 − (1−q)²(1 − 1/65535)^(2h) is "within
// 2% of the measured rate wherever a measurement can tell
// (docs/capacity.md)"; docs/capacity.md: "TestSaturation (package limit)
// asserts 20% on both engines from 2% to 99% denied".

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
)

// TestAudit85CapTenTimesOneSided floods limiters sized WithCapacity(keys,
// 1%) with 10 x keys keys, first all at once (each asks for its burst at
// one instant: Saturation must then read high, and agree with the
// measured rate within 20% where the engine has more than a handful of
// lines), then with a random schedule on a stepped clock: AllowN and
// ReserveN of 1 to 3 tokens over the 10 x keys keys, 0 to 30 ms apart.
// Each key's own debt (what the limiter charged it, in ms of drain: a
// token is 100 ms, burst 2000 ms, MaxDebt 4000 ms) is the exact bucket's;
// an AllowN admitted beyond it, a ReserveN OK beyond MaxDebt or with a
// Delay shorter than its own debt's, is an over-admission. No panic, and
// every Saturation read is in [0, 1].
func TestAudit85CapTenTimesOneSided(t *testing.T) {
	testsize.Serial(t)
	cases := []struct {
		e     limit.Engine
		keys  int
		check bool // the reading's accuracy is checked at the flood
	}{
		{limit.Buckets, 10, false}, // 2 lines: see TestAudit85CapSmallBucketsSaturationUnderReads
		{limit.Buckets, 100, false},
		{limit.Buckets, 2000, true},
		{limit.CountMin, 10, true},
		{limit.CountMin, 2000, true},
	}
	ops := testsize.Pick(60_000, 15_000)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%d", c.e, c.keys), func(t *testing.T) {
			l, clk := audit85capNew(t, c.e, 85, limit.WithCapacity(c.keys, 0.01))
			n := 10 * c.keys
			// own[i]: the ms at which key i's own debt drains to 0 (what
			// the limiter charged it: nothing when it denied).
			own := make([]int64, n)
			now := clk.NowMillis()
			for i := range n {
				if l.AllowN(clk.Now(), "k"+strconv.Itoa(i), 20) {
					own[i] = now + 2000
				}
			}
			sat := l.Stats().Saturation
			const probes = 20_000
			denied := audit85capProbe(l, clk.Now(), "fresh", probes)
			t.Logf("%v sized for %d at 1%%, %d keys at full debt: Saturation %.4f%%, measured %.4f%%", c.e, c.keys, n, 100*sat, 100*float64(denied)/probes)
			if math.IsNaN(sat) || sat < 0 || sat > 1 {
				t.Fatalf("Saturation %v", sat)
			}
			if c.check && (sat < 0.5 || !audit85capSatAgrees(sat, denied, probes, 0.2)) {
				t.Errorf("10x full: Saturation %.4f%% against %.4f%% measured", 100*sat, 100*float64(denied)/probes)
			}
			rng := rand.New(rand.NewPCG(85, uint64(c.keys)))
			over := 0
			for op := range ops {
				clk.Advance(time.Duration(rng.IntN(31)) * time.Millisecond)
				now = clk.NowMillis()
				i := rng.IntN(n)
				k := "k" + strconv.Itoa(i)
				tok := 1 + rng.IntN(3)
				debt := max(own[i]-now, 0)
				cost := int64(tok) * 100
				if rng.IntN(8) == 0 {
					r := l.ReserveN(clk.Now(), k, tok)
					if r.OK() {
						if debt+cost > 4000 {
							over++
							t.Errorf("op %d: %s ReserveN(%d) OK with its own debt at %d ms (MaxDebt 4000 ms)", op, k, tok, debt)
						}
						if want := time.Duration(max(debt+cost-2000, 0)) * time.Millisecond; r.Delay() < want {
							over++
							t.Errorf("op %d: %s ReserveN(%d) Delay %v, its own debt of %d ms needs %v", op, k, tok, r.Delay(), debt, want)
						}
						own[i] = now + debt + cost
					}
				} else if l.AllowN(clk.Now(), k, tok) {
					if debt+cost > 2000 {
						over++
						t.Errorf("op %d: %s AllowN(%d) admitted with its own debt at %d ms (burst 2000 ms)", op, k, tok, debt)
					}
					own[i] = now + debt + cost
				}
				if op%5000 == 0 {
					if s := l.Stats().Saturation; math.IsNaN(s) || s < 0 || s > 1 {
						t.Fatalf("op %d: Saturation %v", op, s)
					}
				}
				if over > 5 {
					t.FailNow()
				}
			}
		})
	}
}

// TestAudit85CapFixedSmallBucketsSaturation: Buckets engines that
// WithCapacity sizes for a few keys have a few lines (WithCapacity(10,
// 0.01) and WithCapacity(1, 0.5): 2 lines; WithCapacity(100, 0.01): 9).
// Past their capacity, Saturation under-reads the fresh-key denial rate
// by far more than design.md's 2%: with 2 lines every key's two lines
// are both lines (locate makes them distinct), so one floor denies every
// fresh key, but the reading assumes two independent draws, 1 − (1−q)²,
// and the victim rule puts the floors on one line: 40 keys (4x), or 100
// (10x), leave 100% of fresh keys denied and a reading of 75.0%, however
// many more keys come. With 9 lines (130 keys, seed 7) the same pairing
// error reads 55.6% against 58.1% measured (4.4% low; seed 11 with other
// key names: 69.1% against 73.2%). (docs/design.md section 8: "within
// 2% of the measured rate wherever a measurement can tell"; limit/stats.go:
// "the estimated probability that a fresh key ... asking for one token
// now is denied".) Fixed after audit 85: the second line is one of the
// other n-1 (internal/bucket/saturation.go). Counts are of 100,000 fresh
// peeks; the tolerance is 2% relative plus the Chernoff band at 1e-9
// (audit85capSatAgrees).
func TestAudit85CapFixedSmallBucketsSaturation(t *testing.T) {
	for _, c := range []struct {
		keys int
		deny float64
		fill int
	}{{10, 0.01, 40}, {10, 0.01, 100}, {1, 0.5, 100}, {100, 0.01, 130}} {
		l, clk := audit85capNew(t, limit.Buckets, 7, limit.WithCapacity(c.keys, c.deny))
		now := clk.Now()
		audit85capFill(l, now, "held", 0, c.fill, false)
		const probes = 100_000
		denied := audit85capProbe(l, now, "fresh", probes)
		sat := l.Stats().Saturation
		lines := l.Sizes().Cells/64 - 1
		if !audit85capSatAgrees(sat, denied, probes, 0.02) {
			t.Errorf("Buckets WithCapacity(%d, %v) (%d lines), %d keys at full debt: Saturation %.3f%%, but %.3f%% of %d fresh keys are denied one token",
				c.keys, c.deny, lines, c.fill, 100*sat, 100*float64(denied)/probes, probes)
		}
	}
}

// TestAudit85CapSmallCountMinSaturationReadsLow: a count-min that
// WithCapacity sizes for a few keys reads Saturation as the Bloom rate,
// the product of the levels' denying shares, which leaves out what double
// hashing adds (docs/capacity.md: "core.Index derives a key's L cells from
// two 32-bit values, so a fresh key covers all L cells of one held key
// about 1/(M^2 (L-1)) of the time, not 1/M^L"). Audit 85 measured
// WithCapacity(1, 0.05) (3 x 4 cells) holding its one key at 3.16% of
// fresh keys denied against a reading of 1.5625% = (1/4)^3, and
// WithCapacity(2, 0.05) at 2.67% against 1.28%; adding the sizing's
// term instead read 5.16%, as far above. limit/stats.go and
// docs/capacity.md now say so ("it can read half the measured rate");
// this test asserts that documented band: the reading is at most the
// measured rate and at least 0.4 of it, within the Chernoff band at 1e-9
// on 200,000 probes.
func TestAudit85CapSmallCountMinSaturationReadsLow(t *testing.T) {
	for _, keys := range []int{1, 2} {
		l, clk := audit85capNew(t, limit.CountMin, 7, limit.WithCapacity(keys, 0.05))
		now := clk.Now()
		audit85capFill(l, now, "held", 0, keys, false)
		const probes = 200_000
		denied := audit85capProbe(l, now, "fresh", probes)
		sat := l.Stats().Saturation
		rate := float64(denied) / probes
		if denied > audit85capUpper(probes, min(1, sat/0.4), audit85capFail)+1 || denied < audit85capLower(probes, sat, audit85capFail)-1 {
			t.Errorf("count-min WithCapacity(%d, 0.05), %d key(s) at full debt: Saturation %.4f%%, %.4f%% of %d fresh keys denied one token: outside [0.4, 1] of it",
				keys, keys, 100*sat, 100*rate, probes)
		}
	}
}
