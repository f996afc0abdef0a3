package limit_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/limit/limittest"
)

func a43unitDrain(t *testing.T, l *limit.Limiter) (unit, drain float64) {
	var buf bytes.Buffer
	if _, err := l.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	return math.Float64frombits(binary.LittleEndian.Uint64(b[8:])), math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
}

// limit/doc.go, "Exactness": "(5e-4 = 1/2000 at burst 1000: a token of
// 2,000,128 units of a millisecond's drain, not 2,000,000)", and "the rate
// is rounded down by at most 2^-8 of itself (2^-13 at MaxDebt 2000)".
func TestAudit43InexactTokenExample(t *testing.T) {
	l := limit.MustNew(5e-4, 1000)
	if l.Engine() != limit.CountMin || l.Exact() {
		t.Fatalf("5e-4/1000: engine %v exact %v; doc: count-min, inexact", l.Engine(), l.Exact())
	}
	unit, drain := a43unitDrain(t, l)
	if got := unit / drain; got != 2_000_128 {
		t.Errorf("token = %v ms of drain, doc says 2,000,128", got)
	}
	if rel := (unit/drain - 2_000_000) / 2_000_000; rel > math.Ldexp(1, -13) {
		t.Errorf("rate rounded down by %v, doc: at most 2^-13 at MaxDebt 2000", rel)
	}
	// Buckets, limit.New(10, 20): docs/design.md "1/1500 for limit.New(10, 20): 15 ticks per ms"
	u2, d2 := a43unitDrain(t, limit.MustNew(10, 20))
	if u2 != 1500 || d2 != 15 {
		t.Errorf("limit.New(10, 20) Buckets: %v ticks per token, %v per ms; design.md: 1500 and 15", u2, d2)
	}
}

// limit/doc.go "Engines": count-min "the default memory denies 16% of
// fresh keys with 100k keys at full debt"; Buckets "the default 6.1 MiB
// holds a million keys at full debt while denying 0.03% of fresh keys".
// Measured claims: checked with a wide tolerance, fixed seed.
func TestAudit43DefaultCapacityClaims(t *testing.T) {
	if testsize.Small() {
		t.Skip("long")
	}
	run := func(name string, keys int, opts []limit.Option, lo, hi float64) {
		c := limittest.NewFakeClock()
		c.Set(1_000_000)
		l := limit.MustNew(10, 20, append(opts, limit.WithClock(c), limit.WithSeed(43))...)
		now := c.Now()
		for i := 0; i < keys; i++ {
			l.AllowN(now, "k"+strconv.Itoa(i), 20)
		}
		sat := l.Stats().Saturation
		denied := 0
		probes := a43probes
		for i := 0; i < probes; i++ {
			if !l.PeekN(now, "fresh"+strconv.Itoa(i), 1).Allowed {
				denied++
			}
		}
		rate := float64(denied) / float64(probes)
		t.Logf("%s: %d keys at full debt: fresh denied %.4f%% (saturation %.4f%%)", name, keys, 100*rate, 100*sat)
		if rate < lo || rate > hi {
			t.Errorf("%s: fresh keys denied %.4f%%, doc claims about %.4f..%.4f%%", name, 100*rate, 100*lo, 100*hi)
		}
	}
	run("count-min", 100_000, []limit.Option{limit.WithEngine(limit.CountMin)}, 0.14, 0.18)
	run("buckets", 1_000_000, nil, 0.0001, 0.0005)
}

var a43probes = 300_000

// docs/capacity.md, "In limit and redis": "limit's default holds 1,249,306
// keys at 1% and 1,198,306 at 0.1% on Buckets ..., 38,011 and 19,577 on
// the count-min"; "7 x 13,707 instead of 13,705" for 10,000 keys at 1%;
// "1000 keys at 1% 85 lines", "20,000 at 0.1% 1,737 lines", "7,999 lines
// for 100,000 keys at 1%"; "50 keys at 1%: 6 x 84".
func TestAudit43CapacityDocNumbers(t *testing.T) {
	b := limit.MustNew(10, 20)
	cm := limit.MustNew(10, 20, limit.WithEngine(limit.CountMin))
	for _, c := range []struct {
		name string
		got  int
		want int
	}{
		{"Buckets Capacity(0.01)", b.Capacity(0.01), 1_249_306},
		{"Buckets Capacity(0.001)", b.Capacity(0.001), 1_198_306},
		{"CountMin Capacity(0.01)", cm.Capacity(0.01), 38_011},
		{"CountMin Capacity(0.001)", cm.Capacity(0.001), 19_577},
	} {
		// The docs' figures are amd64's; arm64 fuses multiply-adds in the
		// model's integration (a few keys in a million: 1,249,281).
		if c.got != c.want && (runtime.GOARCH == "amd64" || math.Abs(float64(c.got-c.want)) > 1e-4*float64(c.want)) {
			t.Errorf("%s = %d, docs/capacity.md says %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		keys          int
		deny          float64
		lines         int
		levels, cells uint32
	}{
		{1000, 0.01, 85, 0, 0},
		{20_000, 0.001, 1737, 0, 0},
		{100_000, 0.01, 7999, 7, 137045},
		{10_000, 0.01, 0, 7, 13707},
		{50, 0.01, 0, 6, 84},
	} {
		s, err := limit.Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		if c.lines != 0 && s.Buckets.Lines != c.lines {
			t.Errorf("Suggest(%d, %v).Buckets.Lines = %d, docs/capacity.md says %d", c.keys, c.deny, s.Buckets.Lines, c.lines)
		}
		if c.levels != 0 && (s.CountMin.Levels != c.levels || s.CountMin.Cells != c.cells) {
			t.Errorf("Suggest(%d, %v).CountMin = %d x %d, docs/capacity.md says %d x %d", c.keys, c.deny, s.CountMin.Levels, s.CountMin.Cells, c.levels, c.cells)
		}
	}
}

// docs/capacity.md, "Sizing": the table's "bucket: lines" column and the
// sentence "Large engines do not change: a floor there is a small share of
// the target (7,999 lines for 100,000 keys at 1%, as before)", after
// "Suggest now gives 1000 keys at 1% 85 lines". The table (commit 5be175a,
// before bucket.Fits) is what Suggest answered then; three of its rows
// are no longer Suggest's answer, one of them a 100,000-key engine.
func TestAudit43FixedCapacitySizingTableStale(t *testing.T) {
	var bad []string
	for _, c := range []struct {
		keys  int
		deny  float64
		lines int
	}{
		// Fixed in the doc: the paragraph above the table names Suggest's
		// answers for the three rows that changed (864, 816, 8,426).
		{10_000, 0.001, 864}, {10_000, 0.01, 816}, {100_000, 0.001, 8426}, {100_000, 0.01, 7999},
		{1_000_000, 0.001, 83392}, {1_000_000, 0.01, 79988}, {10_000_000, 0.001, 833919}, {10_000_000, 0.01, 799876},
	} {
		s, err := limit.Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		if s.Buckets.Lines != c.lines {
			bad = append(bad, fmt.Sprintf("%d keys at %v: table %d lines, Suggest %d", c.keys, c.deny, c.lines, s.Buckets.Lines))
		}
	}
	if len(bad) > 0 {
		t.Errorf("docs/capacity.md sizing table (\"bucket: lines\") and \"Large engines do not change\" vs limit.Suggest now: %v", bad)
	}
}
