package sketch_test

// TestPrecision measures what the lock-free sketch's packed float32 cells
// cost in precision. Each workload drives the same operation sequence into
// a sketch.Sketch and a sketch/ref.Sketch (float64 cells) built from
// the same Config and sharing one FakeClock, with L=1 and M=1<<16 so that a
// key's estimate is one cell on both sides and the comparison is direct.
// After the operations it compares Query on both:
//
//	abs err = |lockfree - reference|
//	rel err = abs err / max(|reference|, 1)   (absolute below magnitude 1)
//
// and checks the one-sided guarantee: lockfree - reference >= -1e-12 *
// max(|reference|, 1). With -v it prints the Markdown table recorded in
// docs/precision.md:
//
//	go test -run Precision -v ./sketch/

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/ref"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// oneSidedSlack is the relative tolerance on lockfree >= reference; it
// only absorbs float64 rounding differences in how the two decay.
const oneSidedSlack = 1e-12

// precPair drives one workload into both implementations and accumulates
// the error statistics.
type precPair struct {
	clk *sketchtest.FakeClock
	lf  *sketch.Sketch
	ref *ref.Sketch

	ops     int       // mutating operations, per implementation
	rel     []float64 // one relative error per comparison
	maxAbs  float64
	worst   float64 // smallest (lockfree-reference)/max(|reference|,1) seen
	lastLF  float64 // the last compared values, for exact checks
	lastRef float64
}

func newPrecPair(t *testing.T, cfg sketch.Config) *precPair {
	t.Helper()
	p := &precPair{clk: sketchtest.NewFakeClock(), worst: math.Inf(1)}
	cfg.Levels, cfg.CellsPerLevel, cfg.Clock = 1, 1<<16, p.clk
	var err error
	if p.lf, err = sketch.New(cfg); err != nil {
		t.Fatal(err)
	}
	if p.ref, err = ref.New(cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *precPair) update(k []byte, d float64) {
	p.lf.Update(k, d)
	p.ref.Update(k, d)
	p.ops++
}

// compare queries k on both sides at the current fake time and records
// the error.
func (p *precPair) compare(k []byte) {
	a, r := p.lf.Query(k), p.ref.Query(k)
	p.lastLF, p.lastRef = a, r
	den := math.Max(math.Abs(r), 1)
	abs := math.Abs(a - r)
	p.rel = append(p.rel, abs/den)
	p.maxAbs = math.Max(p.maxAbs, abs)
	p.worst = math.Min(p.worst, (a-r)/den)
}

// precResult is one row of the table.
type precResult struct {
	name                   string
	ops, samples           int
	maxRel, medRel, maxAbs float64
	oneSided               bool
}

func (p *precPair) result(name string) precResult {
	rel := slices.Clone(p.rel)
	slices.Sort(rel)
	r := precResult{name: name, ops: p.ops, samples: len(rel), maxAbs: p.maxAbs, oneSided: p.worst >= -oneSidedSlack}
	if n := len(rel); n > 0 {
		r.maxRel = rel[n-1]
		if n%2 == 1 {
			r.medRel = rel[n/2]
		} else {
			r.medRel = (rel[n/2-1] + rel[n/2]) / 2
		}
	}
	return r
}

func precKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
	}
	return keys
}

func TestPrecision(t *testing.T) {
	t.Parallel()
	// Under -short or -race the two largest workloads shrink tenfold
	// (the numbers in docs/precision.md are from the full run).
	small := testsize.Small()
	var rows []precResult
	// check records the row and fails the test if the one-sided guarantee
	// or the workload's bound does not hold.
	check := func(r precResult, maxRel, maxAbs float64) {
		t.Helper()
		rows = append(rows, r)
		if !r.oneSided {
			t.Errorf("%s: lockfree fell below reference", r.name)
		}
		if r.samples == 0 {
			t.Errorf("%s: no comparisons", r.name)
		}
		if r.maxRel > maxRel {
			t.Errorf("%s: max rel err %.3g > bound %.3g", r.name, r.maxRel, maxRel)
		}
		if r.maxAbs > maxAbs {
			t.Errorf("%s: max abs err %.6g > bound %.6g", r.name, r.maxAbs, maxAbs)
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))

	// (a1) Decayed rate counter, hot: +1 per event, half-life 10 s, every
	// key at 1 kHz for 60 s. Steady state is 1000/lambda = 14427 events,
	// where a float32 ulp is 2^-10: each +1 rounds up by < 2^-10 and the
	// excess accumulates like the count itself, so the relative error is
	// bounded by score*2^-23/delta = 14427*2^-23 = 1.7e-3.
	{
		nKeys := 100
		if small {
			nKeys = 10
		}
		keys := precKeys(nKeys)
		p := newPrecPair(t, sketch.Config{Decay: decay.Exponential(math.Ln2 / 10), Hi: 1e9})
		for ms := 1; ms <= 60_000; ms++ {
			p.clk.Set(int64(ms))
			for _, k := range keys {
				p.update(k, 1)
			}
			if ms%10 == 0 {
				for _, k := range keys {
					p.compare(k)
				}
			}
		}
		// Absolute: the relative bound at the steady state, 14427^2 * 2^-23.
		check(p.result(fmt.Sprintf("a1 rate counter, %d keys x 1 kHz, 60 s", nKeys)), 14427.0/(1<<23), 25)
	}

	// (a2) Decayed rate counter, 1 kHz in total over 100 keys (10 Hz per
	// key): steady state about 144, ulp 2^-16.
	{
		keys := precKeys(100)
		p := newPrecPair(t, sketch.Config{Decay: decay.Exponential(math.Ln2 / 10), Hi: 1e9})
		for ms := 1; ms <= 60_000; ms++ {
			p.clk.Set(int64(ms))
			k := keys[rng.IntN(len(keys))]
			p.update(k, 1)
			p.compare(k)
		}
		check(p.result("a2 rate counter, 100 keys, 1 kHz total, 60 s"), 256.0/(1<<23), 0.01)
	}

	// (b) Debt meter (token bucket in debt form): +cost in [0.1, 5),
	// Linear(100/s), Lo=0, Hi=1000, 10 minutes. Key i's inflow is
	// (0.5 + i/9) times the drain rate, so low keys drain to 0, high keys
	// sit at Hi and the middle ones wander in between. Linear decay does
	// not shrink the rounding excess; only the clamps reset it (Lo to 0,
	// Hi to 1000 on both sides), so it grows by < ulp(1000) = 2^-14 per
	// event while a key wanders between the bounds. Measured: 0.13 after
	// ~2,000 such events; the bounds leave 4x room.
	{
		keys := precKeys(10)
		p := newPrecPair(t, sketch.Config{Decay: decay.Linear(100), Lo: 0, Hi: 1000})
		for ms := 1; ms <= 600_000; ms++ {
			p.clk.Set(int64(ms))
			for i, k := range keys {
				inflow := (0.5 + float64(i)/9) * 100 // per second
				if rng.Float64() < inflow/1000/2.55 {
					p.update(k, 0.1+4.9*rng.Float64())
					p.compare(k)
				}
			}
		}
		check(p.result("b debt meter, Linear(100/s), 10 keys, 10 min"), 0.5, 0.5)
	}

	// (c) Tiny deltas on a large score, no decay: 1e6, then +1e-5 1e5
	// times. A float32 ulp at 1e6 is 2^-4 = 0.0625, 6250 times the delta:
	// rounding toward +Inf turns every +1e-5 into +0.0625, so the estimate
	// ends at exactly 1e6 + 6250 where the true score is 1e6 + 1.
	{
		k := []byte("big")
		p := newPrecPair(t, sketch.Config{Hi: 1e12})
		p.update(k, 1e6)
		for i := 1; i <= 100_000; i++ {
			p.update(k, 1e-5)
			if i%100 == 0 {
				p.compare(k)
			}
		}
		if p.lastLF != 1e6+6250 {
			t.Errorf("c: lockfree = %v, want exactly 1e6 + 1e5*0.0625 = 1006250", p.lastLF)
		}
		if math.Abs(p.lastRef-(1e6+1)) > 1e-5 { // float64 drifts ~4e-6 over 1e5 adds
			t.Errorf("c: reference = %v, want 1e6 + 1", p.lastRef)
		}
		check(p.result("c +1e-5 x 1e5 on 1e6, no decay"), 6250.0/1e6, 6249.001)
	}

	// (d) Integer counts below 2^24, no decay: exact. 100 keys get random
	// integer deltas in [-50, 100] (Lo=-2^24), and one key climbs from
	// 2^24-5000 to exactly 2^24 by +1.
	{
		keys := precKeys(100)
		p := newPrecPair(t, sketch.Config{Lo: -(1 << 24), Hi: 1 << 24})
		for range 200_000 {
			k := keys[rng.IntN(len(keys))]
			d := float64(rng.IntN(151) - 50)
			if d == 0 {
				d = 1
			}
			p.update(k, d)
			p.compare(k)
		}
		edge := []byte("edge")
		p.update(edge, 1<<24-5000)
		for range 5000 {
			p.update(edge, 1)
			p.compare(edge)
		}
		if p.lastLF != 1<<24 || p.lastRef != 1<<24 {
			t.Errorf("d: edge key = %v (lockfree), %v (reference), want 2^24", p.lastLF, p.lastRef)
		}
		check(p.result("d integer deltas, |score| <= 2^24, no decay"), 0, 0)
	}

	// (e) Counts above 2^24, no decay: from 2^24-n/10, +1 n times
	// (n = 1e6). The first n/10 are exact; above 2^24 the float32 ulp is
	// 2, so each +1 rounds up to +2: the estimate ends at
	// 2^24 + 2*(9n/10), twice the true excess over 2^24.
	{
		n := 1_000_000
		if small {
			n = 100_000
		}
		k := []byte("large")
		p := newPrecPair(t, sketch.Config{Hi: 1e12})
		p.update(k, float64(1<<24-n/10))
		for i := 1; i <= n; i++ {
			p.update(k, 1)
			if i%1000 == 0 {
				p.compare(k)
			}
		}
		above := float64(n - n/10)
		wantLF, wantRef := 1<<24+2*above, 1<<24+above
		if p.lastLF != wantLF || p.lastRef != wantRef {
			t.Errorf("e: lockfree = %v, reference = %v; want %v and %v", p.lastLF, p.lastRef, wantLF, wantRef)
		}
		check(p.result(fmt.Sprintf("e +1 x %d from 2^24-%d, no decay", n, n/10)), above/wantRef+1e-9, above)
	}

	// (f) Feedback score: successes -1, failures +5 (20%), plus a random
	// fraction, Lo=-100, Hi=100, half-life 30 s, 50 keys, one event per ms
	// for 2 minutes (20 Hz per key). Rounding toward +Inf biases negative
	// scores toward 0. Each event rounds up by < ulp(100) = 2^-17 and the
	// excess decays with the score, so it stays below 2^-17 * (20 Hz /
	// lambda) = 6.6e-3 in absolute terms, and rel err <= abs err here
	// (the denominator is at least 1).
	{
		keys := precKeys(50)
		p := newPrecPair(t, sketch.Config{Decay: decay.Exponential(math.Ln2 / 30), Lo: -100, Hi: 100})
		for ms := 1; ms <= 120_000; ms++ {
			p.clk.Set(int64(ms))
			k := keys[rng.IntN(len(keys))]
			d := -1 + 0.5*rng.Float64()
			if rng.IntN(5) == 0 {
				d = 5 * rng.Float64()
			}
			p.update(k, d)
			p.compare(k)
		}
		check(p.result("f feedback score +/-, Lo=-100, Hi=100, Exponential"), 0.01, 0.01)
	}

	var b strings.Builder
	b.WriteString("\n| workload | ops | comparisons | max rel err | median rel err | max abs err | lockfree >= reference? |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		yes := "yes"
		if !r.oneSided {
			yes = "NO"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.3g | %.3g | %.4g | %s |\n", r.name, r.ops, r.samples, r.maxRel, r.medRel, r.maxAbs, yes)
	}
	t.Log(b.String())
}
