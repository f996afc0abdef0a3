package meter_test

import (
	"testing"
	"time"

	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// Audit 154 (flake hunt): TestAudit146MetersAcrossEndsHold failed about
// 1 run in 125 (32 of 4000 with -count=4000, purego; 1 of 400 under
// -race), and TestAudit143RateRoundingRule could fail about 1 run in 2500:
// both built Rates and Novelties of 2 x 64 cells without WithSeed, so
// each run hashes under a fresh crypto/rand seed, and two of their keys
// ("old" and "k"; "batch" and "big") share both cells about once in 4096
// constructions. A count-min reading then includes the other key's
// count: a documented over-estimate, not a defect of the clock handling
// these tests check. The tests below pin the two seeds that show it and
// the seeds that the suggested fix (WithSeed at
// meter/audit146_ends_test.go:68,72 and meter/audit143_doc_test.go:122,
// applied at stop 66) use.

// TestAudit154EndsFlakeIsAKeyCollision: the root cause. Under seed 4148
// (one of 5 in 0..19999) "old" and "k" share both cells of the Novelty's
// primary and of the Rate: a fresh Novelty that saw only "old" already
// Contains("k"), which failed the matrix as the flaky runs did
// ("Novelty: a key seen now is not kept"; "Rate ..., Novelty ... for a
// key seen at New; want 0, false"). TestAudit146MetersAcrossEndsHold now
// builds its meters with WithSeed(146), under which the matrix holds.
func TestAudit154EndsFlakeIsAKeyCollision(t *testing.T) {
	clk := sketchtest.NewFakeClock()
	clk.Set(0)
	opts := []meter.Option{meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(4148)}
	nv, err := meter.NewNovelty(time.Minute, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := meter.NewRate(time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	nv.Seen("old")
	r.Observe("old")
	if !nv.Contains("k") || r.PerSecond("k") != r.PerSecond("old") {
		t.Fatalf("seed 4148: Contains(k) %v, PerSecond k %v old %v; want k to read old's cells", nv.Contains("k"), r.PerSecond("k"), r.PerSecond("old"))
	}
}

// TestAudit154RateRoundingFlakeIsAKeyCollision: TestAudit143RateRoundingRule
// reads "big" (2^24) after writing 1008 to "batch" in a 2 x 64 Rate: under
// seed 6536 (one of 16 in 0..39999) the two share both cells and "big"
// reads 2^24 + 1008, the test's Fatalf. Under seed 143 they do not.
func TestAudit154RateRoundingFlakeIsAKeyCollision(t *testing.T) {
	read := func(seed uint64) float64 {
		clk := sketchtest.NewFakeClock()
		clk.Set(1_780_000_000_000)
		r, err := meter.NewRate(time.Second, meter.WithClock(clk), meter.WithSize(2, 64), meter.WithSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		at := clk.Now()
		r.ObserveAt(at, "batch", 1008)
		r.ObserveAt(at, "big", 1<<24)
		return r.PerSecondAt(at, "big")
	}
	if got := read(6536); got != 1<<24+1008 {
		t.Errorf("seed 6536: big reads %v; want 2^24 + 1008 (batch's cells)", got)
	}
	if got := read(143); got != 1<<24 {
		t.Errorf("seed 143: big reads %v; want exactly 2^24", got)
	}
}
