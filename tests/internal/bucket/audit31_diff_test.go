package bucket_test

import (
	"fmt"
	"math/bits"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lfgrudge/grudge/internal/bucket"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// a31SmallSlackLaws: laws whose span is near its maximum (61,438), so the
// window's slack is small and a give-back of slack - 2 seal ticks is a
// few tokens: refunds of larger writes go in steps (lower).
var a31SmallSlackLaws = []bucket.Law{
	bucket.Linear(1000, 61438), // u 1, 1 tick a ms, slack 4,097, seal 512: a step gives back 3,073 tokens
	bucket.Linear(1000, 60),    // u 1,023, 1,023 ticks a ms, slack 4,155, seal 512: 3.06 tokens a step
	bucket.Linear(100, 60),     // u 1,020, 102 ticks a ms, slack 4,335: 3.2 tokens a step
	bucket.Linear(10, 20),      // u 3,000, 30 ticks a ms, slack 5,535: 1.5 tokens a step
	bucket.Linear(0.7, 60),     // ticks longer than a ms
}

// a31Seal mirrors quant's seal: the largest power of two <= slack/8.
func a31Seal(slack uint64) uint64 { return 1 << (bits.Len64(slack/8) - 1) }

// TestAudit31DifferentialLargeRefunds: TestDifferential's check (engine
// and bucket.Model agree answer for answer and line for line after every
// step; no key reads below its true load) on the small-slack laws, with
// loads drawn up to Max (so reservations over a live debt are given back
// in many steps of slack - 2 seal ticks), few lines (so evictions), and
// the clock moving by gaps around the slack, the epoch (seal ticks), many
// epochs, the residue window and the period of the empty slots' versions
// (2^16 epochs). design.md: "Model.Do, word for word with the engine in
// TestDifferential"; doc.go: "a write larger than that is given back in
// steps".
func TestAudit31DifferentialLargeRefunds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		law := rapid.SampledFrom(a31SmallSlackLaws).Draw(rt, "law")
		q, err := bucket.QuantumOf(law)
		if err != nil {
			rt.Fatal(err)
		}
		slack := uint64(1<<16 - 1 - q.Span)
		seal := a31Seal(slack)
		toMs := func(ticks uint64) int64 {
			return max(int64(time.Duration(ticks)*q.Tick/time.Millisecond), 1)
		}
		var gaps []int64
		for _, tk := range []uint64{1, seal - 1, seal, seal + 1, 2 * seal, slack - 2*seal, slack - seal, slack, slack + 1, q.Span, 1 << 16, 7 * seal, 100 * seal, 1<<16*seal - seal, 1 << 16 * seal, 1<<16*seal + seal} {
			ms := toMs(tk)
			gaps = append(gaps, max(ms-1, 1), ms, ms+1)
		}
		lines := rapid.IntRange(2, 3).Draw(rt, "lines")
		nkeys := rapid.IntRange(1, 60).Draw(rt, "keys")
		clk := sketchtest.NewFakeClock()
		clk.Set(1_000_000)
		e := bucket.MustNew(bucket.Config{Lines: lines, Law: law, Clock: clk, SeedSet: true, Seed: rapid.Uint64().Draw(rt, "seed")})
		d := newDiffRun(e, law, nkeys)
		steps := rapid.IntRange(20, 300).Draw(rt, "steps")
		for step := range steps {
			if rapid.IntRange(0, 3).Draw(rt, "advance") == 0 {
				clk.Advance(time.Duration(rapid.SampledFrom(gaps).Draw(rt, "gap")) * time.Millisecond)
			}
			key := d.keys[rapid.IntRange(0, nkeys-1).Draw(rt, "key")]
			n := float64(rapid.IntRange(0, int(law.Max)).Draw(rt, "n"))
			if rapid.IntRange(0, 2).Draw(rt, "small") == 0 {
				n = float64(rapid.IntRange(0, 8).Draw(rt, "ns"))
			}
			limit := float64(rapid.IntRange(0, int(law.Max)+2).Draw(rt, "limit"))
			d.step(rt, step, key, n, limit)
			d.sameLines(rt, fmt.Sprintf("step %d", step))
		}
	})
}
