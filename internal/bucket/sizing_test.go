package bucket

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/lfgrudge/grudge/decay"
	"github.com/lfgrudge/grudge/internal/testsize"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// fillAtLimit puts keys keys at their limit (a burst of 20 each, one
// instant) into e and returns how many got it.
func fillAtLimit(e *Engine, keys int, prefix string) int {
	buf := make([]byte, 0, 32)
	got := 0
	for i := range keys {
		buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 10)
		if e.TryUpdate(unsafe.String(&buf[0], len(buf)), 20, 20) {
			got++
		}
	}
	return got
}

// peekDenied counts how many of probes fresh keys would be denied one
// token (read only).
func peekDenied(e *Engine, probes int) int {
	buf := make([]byte, 0, 32)
	n := 0
	for i := range probes {
		buf = strconv.AppendInt(append(buf[:0], "fresh-"...), int64(i), 10)
		if e.Query(unsafe.String(&buf[0], len(buf)))+1 > 20 {
			n++
		}
	}
	return n
}

// agrees reports whether an estimate p agrees with a measured count of
// k out of n: within rel (relative) of k/n when k is large enough for
// that to mean something, else inside a wide Poisson interval around p.
func agrees(p float64, k, n int, rel float64) bool {
	mean := p * float64(n)
	if k >= 400 {
		return math.Abs(p*float64(n)/float64(k)-1) <= rel
	}
	sd := math.Sqrt(math.Max(mean, 1))
	return math.Abs(float64(k)-mean) <= 4*sd+2
}

// TestSaturationReading: Saturation against the measured fresh-key
// denial rate across loads from empty to past the cliff.
func TestSaturationReading(t *testing.T) {
	testsize.Serial(t)
	lines := scale(4000, 4) // 56,000 slots
	for _, load := range []float64{0.02, 0.36, 0.71, 0.86, 0.89, 0.93, 0.98, 1.07, 1.43} {
		keys := int(load * float64(lines*SlotsPerLine))
		t.Run(fmt.Sprintf("load=%.2f", load), func(t *testing.T) {
			clk := frozenClock()
			e := MustNew(Config{Lines: lines, Law: Linear(10, 40), Clock: clk, SeedSet: true, Seed: 3})
			fillAtLimit(e, keys, "k")
			est := e.Saturation(1, 20)
			probes := scale(400_000, 8)
			k := peekDenied(e, probes)
			t.Logf("load %.2f: Saturation %.4f%%, measured %.4f%% (%d of %d)", load, 100*est, 100*float64(k)/float64(probes), k, probes)
			if !agrees(est, k, probes, 0.20) {
				t.Fatalf("Saturation %.5f does not agree with %d denied of %d", est, k, probes)
			}
			// The floors drain with the loads: 100 ms later every key at
			// its limit has a token back, and nothing denies one token.
			clk.Advance(100 * time.Millisecond)
			if est, k := e.Saturation(1, 20), peekDenied(e, probes/4); est > 0.0001 || k > 0 {
				t.Fatalf("100 ms later: Saturation %v, %d of %d denied", est, k, probes/4)
			}
		})
	}
}

// small reports whether the statistical tests run small (-short, -race).

// scale returns full, or full/div when small.
func scale(full, div int) int {
	if testsize.Small() {
		return full / div
	}
	return full
}

func frozenClock() *sketchtest.FakeClock {
	c := sketchtest.NewFakeClock()
	c.Set(1_000_000)
	return c
}

// TestCapacityModel: the fluid model (PredictDenial) against measured
// engines: the share that got the burst within 0.5 points everywhere;
// the denial rate within 20% below the onset of saturation and past it,
// within a factor 1.6 on the cliff between (a mean-field limit is
// coarsest where a small change of load changes the rate most).
func TestCapacityModel(t *testing.T) {
	testsize.Serial(t)
	lines := scale(20_000, 8) // 280,000 slots
	for _, load := range []float64{0.2, 0.5, 0.71, 0.86, 0.89, 0.93, 1.0, 1.25} {
		keys := int(load * float64(lines*SlotsPerLine))
		e := MustNew(Config{Lines: lines, Law: Linear(10, 40), Clock: frozenClock(), SeedSet: true, Seed: 5})
		got := fillAtLimit(e, keys, "m")
		probes := scale(400_000, 8)
		k := peekDenied(e, probes)
		pd, pg := PredictDenial(keys, lines)
		meas := float64(k) / float64(probes)
		t.Logf("load %.2f: denied measured %.4f%% model %.4f%%; got measured %.3f%% model %.3f%%", load, 100*meas, 100*pd, 100*float64(got)/float64(keys), 100*pg)
		tol := 0.20
		if load > 0.8 && load < 1.1 {
			tol = 0.6
		}
		if k >= 400 && (pd > meas*(1+tol) || pd < meas/(1+tol)) || k < 400 && !agrees(pd, k, probes, tol) {
			t.Errorf("load %.2f: model %.5f vs %d of %d denied", load, pd, k, probes)
		}
		if math.Abs(pg-float64(got)/float64(keys)) > 0.01 {
			t.Errorf("load %.2f: model got %.4f vs measured %.4f", load, pg, float64(got)/float64(keys))
		}
	}
}

// TestSuggest: an engine of the suggested size, filled to the capacity
// asked, denies at most the rate asked (measured), and one of 10% fewer
// lines would not be suggested.
func TestSuggest(t *testing.T) {
	testsize.Serial(t)
	for _, c := range []struct {
		keys int
		deny float64
	}{{30_000, 0.01}, {30_000, 0.001}, {100_000, 0.01}} {
		g, err := Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		if g.Deny > c.deny/2 || g.Bytes != MustNew(Config{Lines: g.Lines, Law: None(1)}).Bytes() {
			t.Fatalf("Suggest(%d, %v) = %+v", c.keys, c.deny, g)
		}
		if !Fits(c.keys, g.Lines, c.deny) || Fits(c.keys, g.Lines-1, c.deny) {
			t.Fatalf("Suggest(%d, %v) = %d lines, not the least that Fits", c.keys, c.deny, g.Lines)
		}
		e := MustNew(Config{Lines: g.Lines, Law: Linear(10, 40), Clock: frozenClock(), SeedSet: true, Seed: 9})
		fillAtLimit(e, c.keys, "s")
		probes := scale(300_000, 6)
		k := peekDenied(e, probes)
		t.Logf("Suggest(%d, %v): %d lines (%.2f MiB, %.1f bytes per key), measured %.4f%%", c.keys, c.deny, g.Lines,
			float64(g.Bytes)/(1<<20), float64(g.Bytes)/float64(c.keys), 100*float64(k)/float64(probes))
		if float64(k)/float64(probes) > c.deny+5.0/float64(probes) {
			t.Fatalf("measured %d of %d denied, above %v", k, probes, c.deny)
		}
	}
	for _, bad := range []struct {
		keys int
		deny float64
	}{{0, 0.01}, {10, 0}, {10, 1}, {10, math.NaN()}} {
		if _, err := Suggest(bad.keys, bad.deny); err == nil {
			t.Errorf("Suggest(%d, %v): no error", bad.keys, bad.deny)
		}
		if _, err := SuggestCountMin(bad.keys, bad.deny, 2); err == nil {
			t.Errorf("SuggestCountMin(%d, %v): no error", bad.keys, bad.deny)
		}
	}
}

// TestCountMinModel: the Bloom-filter formula against the count-min
// sketch (package sketch, Min, the limiter's law and clamp) at the
// geometry SuggestCountMin picks and at limit's default.
func TestCountMinModel(t *testing.T) {
	testsize.Serial(t)
	g, err := SuggestCountMin(20_000, 0.01, 2)
	if err != nil {
		t.Fatal(err)
	}
	if g.Deny > 0.01 || g.Bytes != 2*int(g.Levels)*int(g.Cells)*8 {
		t.Fatalf("SuggestCountMin = %+v", g)
	}
	for _, c := range []struct {
		keys          int
		levels, cells uint32
	}{{20_000, g.Levels, g.Cells}, {20_000, 4, 20_000}, {5_000, 4, 20_000}} {
		s, err := sketch.New(sketch.Config{Levels: c.levels, CellsPerLevel: c.cells, Decay: decay.Linear(10), Hi: 40,
			Clock: frozenClock(), Hasher: sketch.XXH3(), Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for i := range c.keys {
			if s.TryUpdateString("c"+strconv.Itoa(i), 20, 20) {
				got++
			}
		}
		probes := 100_000
		k := 0
		for i := range probes {
			if s.QueryString("fresh-"+strconv.Itoa(i))+1 > 20 {
				k++
			}
		}
		pd, pg := PredictCountMinDenial(c.keys, c.levels, c.cells)
		t.Logf("%d keys in %d x %d: denied %.3f%% (model %.3f%%), got %.3f%% (model %.3f%%)", c.keys, c.levels, c.cells,
			100*float64(k)/float64(probes), 100*pd, 100*float64(got)/float64(c.keys), 100*pg)
		if !agrees(pd, k, probes, 0.15) || math.Abs(pg-float64(got)/float64(c.keys)) > 0.01 {
			t.Errorf("count-min model off")
		}
	}
}

// TestFitsSmallEngines: in a small engine one floored line denies about
// 2/lines of fresh keys, far above the mean the model predicts, so Fits
// grows it until that is unlikely. Measured over seeds (the capacity
// audit: 1000 keys at 1% were given 80 lines by the mean alone, and 11 of
// 50 seeds denied 2-5%): at the size Suggest picks, no seed of 40 denies
// more than the target.
func TestFitsSmallEngines(t *testing.T) {
	for _, c := range []struct {
		keys int
		deny float64
	}{{1000, 0.01}, {300, 0.01}, {4000, 0.01}} {
		g, err := Suggest(c.keys, c.deny)
		if err != nil {
			t.Fatal(err)
		}
		if one := 1 - (1-1/float64(g.Lines))*(1-1/float64(g.Lines)); one <= c.deny {
			continue // one floor cannot break the target here
		}
		for seed := uint64(1); seed <= uint64(scale(40, 10)); seed++ {
			e := MustNew(Config{Lines: g.Lines, Law: Linear(10, 40), Clock: frozenClock(), SeedSet: true, Seed: seed})
			fillAtLimit(e, c.keys, "s")
			probes := scale(20_000, 4)
			if k := peekDenied(e, probes); float64(k)/float64(probes) > c.deny {
				t.Errorf("Suggest(%d, %v) = %d lines; seed %d denies %d of %d fresh keys", c.keys, c.deny, g.Lines, seed, k, probes)
			}
		}
	}
}
