package sketch_test

// Audit 98: docs/precision.md, "The same bits on every target. Where the
// compiler may fuse a multiply into an add (arm64, GOAMD64=v3), TwoSum
// and the round-up round their operands explicitly, so an add stores the
// same word as at GOAMD64=v1; only the exponential law's upward nudge
// may fuse", and docs/design.md, "Fused multiply-add": the remaining
// fusions are the nudge, wholeDrain's exact product and sizing
// estimates. So a fixed workload under None, Linear (fractional, whole
// and subnormal-free rates) and a custom law reads the same bits on
// amd64 (v1 or v3) and arm64: a digest of every level's bits after every
// operation, computed on amd64 v1 and asserted here (CI runs this file
// under qemu for arm64 and at GOAMD64=v3).

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func a98TwinDigest(t *testing.T, d decay.Decay, lo, hi float64) string {
	clk := sketchtest.NewFakeClock()
	clk.Set(1_000)
	s := mustNewSketch(t, sketch.Config{Levels: 3, CellsPerLevel: 16, Decay: d, Lo: lo, Hi: hi, Seed: 98, Clock: clk})
	rng := rand.New(rand.NewPCG(98, 98))
	h := fnv.New64a()
	var b [8]byte
	put := func(x float64) {
		u := math.Float64bits(x)
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		h.Write(b[:])
	}
	for range 3000 {
		k := fmt.Sprint("k", rng.IntN(40))
		delta := []float64{0.1, 1e-5, 1 << 24, 3, 1.0 / 3, 1e6 + 0.3, -0.7, -1e-9, 0}[rng.IntN(9)]
		switch rng.IntN(4) {
		case 0:
			s.UpdateString(k, delta)
		case 1:
			put(s.UpdateAndQueryString(k, delta))
		case 2:
			s.TryUpdateString(k, delta, s.QueryString(k)+delta+float64(rng.IntN(3)-1))
		case 3:
			clk.Set(clk.NowMillis() + []int64{1, 7, 999, 1 << 20, 1<<24 + 3}[rng.IntN(5)])
		}
		for _, lv := range s.QueryDetailed([]byte(k)).Levels {
			put(lv.Score)
		}
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

func TestAudit98PrecTwinDigestsAcrossTargets(t *testing.T) {
	cases := []struct {
		name   string
		d      decay.Decay
		lo, hi float64
		want   string
	}{
		{"none", decay.None(), -1e3, 1e9, "0c9dec52d5a9caa4"},
		{"linear-0.1", decay.Linear(0.1), -1e3, 1e9, "b2f196c5765b237c"},
		{"linear-third", decay.Linear(1.0 / 3), -1e7, 1e7, "359068d79f186da9"},
		{"linear-7000", decay.Linear(7000), -1e3, 1e12, "854087ecc75500a8"},
		{"custom-drain3", a98Drain3{}, -1e3, 1e9, "01796529279cfe0e"},
	}
	for _, c := range cases {
		got := a98TwinDigest(t, c.d, c.lo, c.hi)
		if got != c.want {
			t.Errorf("%s: digest %s, want %s (amd64 v1)", c.name, got, c.want)
		}
	}
}
