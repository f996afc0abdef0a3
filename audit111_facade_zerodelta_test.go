package grudge_test

// Audit 111 (the grudge façade against the reference): a zero delta.
// Documented at stop 61 (docs/precision.md, "Frequent writes";
// docs/migrating.md, "float32 scores"): the text below says what the
// audit found; the test now asserts the documented bounds: never below
// the law, never above the starting score.
//
// grudge applies decay on every access, then the delta; Update(k, 0) (or
// UpdateAndQuery(k, 0), an admitted TryUpdate(k, 0, limit)) is a pure
// "decay to now" and changes nothing a later Query sees: its laws
// compose. docs/migrating.md's float32 section promises that the only
// difference is float32 rounding, "a few float32 ulps" against a float64
// model ("compare to about 1e-6 * max(1, |score|)"), and lists the costs
// of that rounding for increments (a decayed counter, a debt meter, tiny
// increments). It does not list this: a write of 0 re-stamps the cell
// with its decayed value rounded up to a float32, and where the law's
// drain between two such writes is below one float32 step of the score
// (Linear(0.05) at 1000 written each ms; any Exponential with a half-life
// of a day written every 10 ms) the rounding gives the whole drain back:
// the score never decays. The float64 reference (grudge's cells) drains
// as grudge does. package meter found and fixed the same thing in its
// own ObserveAt(t, k, 0) (audit 96: "an ObserveAt of 0 reads"); the
// façade's zero-delta writes still freeze the score.

import (
	"math"
	"testing"
	"time"

	"github.com/lfgrudge/grudge"
	"github.com/lfgrudge/grudge/grudgetest"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
)

// TestAudit111DocumentedZeroDeltaWritesKeepDrain: a key whose score is
// touched with a delta of 0 at a steady pace may keep up to its starting
// score however long it is touched, where grudge (and the float64
// reference with the same history) reads the decayed score; it never
// reads below the law, never above where it started, and decays once
// the touches stop.
func TestAudit111DocumentedZeroDeltaWritesKeepDrain(t *testing.T) {
	cases := []struct {
		name  string
		law   grudge.Decay
		start float64
		step  time.Duration
		steps int
		touch func(s *grudge.Sketch, k []byte)
	}{
		// A debt meter (Linear, toll's reading) draining 0.05 a second,
		// 1000 owed, Update(k, 0) every ms for 20 s: 999 owed.
		{"Linear(0.05)/Update0/1ms", grudge.Linear(0.05), 1000, time.Millisecond, 20_000,
			func(s *grudge.Sketch, k []byte) { s.Update(k, 0) }},
		// The same read through UpdateAndQuery(k, 0).
		{"Linear(0.05)/UpdateAndQuery0/1ms", grudge.Linear(0.05), 1000, time.Millisecond, 20_000,
			func(s *grudge.Sketch, k []byte) { s.UpdateAndQuery(k, 0) }},
		// An admitted TryUpdate of 0.
		{"Linear(0.05)/TryUpdate0/1ms", grudge.Linear(0.05), 1000, time.Millisecond, 20_000,
			func(s *grudge.Sketch, k []byte) { s.TryUpdate(k, 0, 1e6) }},
		// An abuse score with a one-day half-life, touched every ms for
		// 100 s: 1000 x 2^(-100/86400) = 999.2; touched every 10 ms for
		// 5 minutes: 1000 x 2^(-300/86400) = 997.6 (a quarter of the
		// drain is lost).
		{"Exponential(ln2/day)/Update0/1ms", grudge.Exponential(math.Ln2 / 86400), 1000, time.Millisecond, 100_000,
			func(s *grudge.Sketch, k []byte) { s.Update(k, 0) }},
		{"Exponential(ln2/day)/Update0/10ms", grudge.Exponential(math.Ln2 / 86400), 1000, 10 * time.Millisecond, 30_000,
			func(s *grudge.Sketch, k []byte) { s.Update(k, 0) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := grudgetest.NewFakeClock()
			s, err := grudge.New(grudge.Config{Levels: 1, CellsPerLevel: 64, Decay: c.law, Hi: 1e6, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := reference.New(sketch.Config{Levels: 1, CellsPerLevel: 64, Decay: c.law, Hi: 1e6, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			k := []byte("touched")
			s.Update(k, c.start)
			ref.Update(k, c.start)
			for range c.steps {
				clk.Advance(c.step)
				c.touch(s, k)
				ref.Update(k, 0)
			}
			elapsed := int64(c.steps) * c.step.Milliseconds()
			want := c.law.Apply(c.start, elapsed) // the law over the whole time: it composes
			got, gotRef := s.Query(k), ref.Query(k)
			if math.Abs(gotRef-want) > 1e-6*want {
				t.Fatalf("reference read %v, the law says %v: the reference does not model grudge here", gotRef, want)
			}
			// docs/precision.md, "Frequent writes": on the safe side and
			// bounded by the starting score.
			if got < want*(1-1e-9) || got > c.start {
				t.Errorf("after %d writes of 0 over %d ms: Query %v, the law %v, started at %v: outside [law, start]",
					c.steps, elapsed, got, want, c.start)
			}
			// Untouched, it decays from its last write's stamp: one more
			// hour of the law from got, rounded up to a float32 at most.
			clk.Advance(time.Hour)
			if after, lawAfter := s.Query(k), c.law.Apply(got, 3_600_000); after > lawAfter+1e-6*math.Max(1, lawAfter) || after >= got {
				t.Errorf("an hour without writes: Query %v, the law from %v says %v", after, got, lawAfter)
			}
		})
	}
}
