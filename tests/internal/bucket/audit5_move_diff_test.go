package bucket_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a5DiffLaws: fast laws whose window's slack is a few ms or less (every
// gap of a few ms is a long move), and the limiter-like ones.
var a5DiffLaws = []bucket.Law{
	bucket.Linear(8e6, 30000),            // 8,000 ticks a ms, slack 35,535: 4.4 ms
	bucket.Linear(1e6, 60000),            // 1,000 ticks a ms, slack 5,535: 5.5 ms
	bucket.Linear(1000, 60),              // 1,023 ticks a ms, slack 4,155: 4 ms
	bucket.Linear(10, 40),                // 15 ticks a ms, slack 5,535: 369 ms
	bucket.Exponential(5000, 1, 0),       // 8,561 ticks a ms, slack 8,568: 1 ms
	bucket.Exponential(2000, 1000, 1e-3), // 8,287 ticks a ms, slack 8,290
	bucket.Exponential(50, 100, 0),       // 92 ticks a ms, slack 4,316: 47 ms
}

// TestAudit5MoveDifferentialIdle: TestDifferential's check (engine and
// bucket.Model agree answer for answer, and line for line at the end;
// every key reads at least its true load after every step) on the fast
// laws above, with the clock moving by gaps drawn around each law's
// slack, its span, the residue window (2^16 ticks) and its multiples, and
// idle times of hours to 1000 hours. design.md, "Moving a line's time":
// "The sequential model sees one move: lw to T, the entries whose stamp
// is at or below T's tick minus the slack cleared, nothing else
// (Model.Do, word for word with the engine in TestDifferential)".
func TestAudit5MoveDifferentialIdle(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		law := rapid.SampledFrom(a5DiffLaws).Draw(rt, "law")
		q, err := bucket.QuantumOf(law)
		if err != nil {
			rt.Fatal(err)
		}
		slack := 1<<16 - 1 - q.Span
		around := func(ticks uint64) []int64 {
			ms := int64(time.Duration(ticks) * q.Tick / time.Millisecond)
			return []int64{max(ms-1, 1), max(ms, 1), ms + 1, ms + 2}
		}
		var gaps []int64
		gaps = append(gaps, 1, 2, 3)
		gaps = append(gaps, around(slack)...)
		gaps = append(gaps, around(q.Span)...)
		gaps = append(gaps, around(1<<16)...)
		gaps = append(gaps, around(q.Span+slack)...)
		gaps = append(gaps, around(3<<16)...)
		// Hours; 1000 hours and 7 ms: 3.6e9 ms alone is a multiple of
		// 2^16 ticks at 8,000 ticks a ms, where the model's Refund
		// disagreed with the engine's (TestAudit5MoveModelRefundAfterWrap).
		gaps = append(gaps, 3_600_000, 3_600_000_007)
		lines := rapid.IntRange(2, 4).Draw(rt, "lines")
		nkeys := rapid.IntRange(1, 40).Draw(rt, "keys")
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := bucket.MustNew(bucket.Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: rapid.Uint64().Draw(rt, "seed")})
		d := newDiffRun(e, law, nkeys)
		steps := rapid.IntRange(60, 400).Draw(rt, "steps")
		for step := range steps {
			if rapid.IntRange(0, 2).Draw(rt, "advance") == 0 {
				clk.Advance(time.Duration(rapid.SampledFrom(gaps).Draw(rt, "gap")) * time.Millisecond)
			}
			key := d.keys[rapid.IntRange(0, nkeys-1).Draw(rt, "key")]
			n := float64(rapid.IntRange(0, int(min(law.Max, 40))).Draw(rt, "n"))
			if rapid.IntRange(0, 4).Draw(rt, "frac") == 0 {
				n = rapid.Float64Range(0, law.Max/4).Draw(rt, "nf")
			}
			limit := rapid.Float64Range(0, law.Max*1.1).Draw(rt, "limit")
			d.step(rt, step, key, n, limit)
			d.sameLines(rt, fmt.Sprintf("step %d", step))
		}
	})
}
