package limit_test

// Audit 4: keys returning after a few seconds of idleness, with
// concurrent first requests on their lines.
//
// limit/doc.go, "Exactness": "For a key alone in its cells, the limiter
// is the exact token bucket at millisecond resolution: every decision
// ... is that of the rational bucket ... The Buckets engine is always
// exact (it is chosen only where it is ...)"; "Engines": "a key shares
// its debt only with a key of the same fingerprint in one of its lines,
// for as long as both are live, or inherits a line's eviction floor once
// the table is past its capacity"; WithStrict: strict mode is "exact
// under contention".

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit4BucketsIdleLineRace: twelve keys of New(10, 20) (the
// defaults: MaxDebt 40 tokens, 4 s) in a Buckets engine of two lines
// (WithCapacity(1, 0.5): every key shares both lines, with distinct
// fingerprints and far below the 28 slots, so none shares a debt or
// meets an eviction floor; run on one goroutine, every decision below is
// exact). Cycle after cycle, every key takes its whole burst (2 s of
// debt), then the clock moves on by gap: every debt has drained, and
// every key must be admitted its whole burst again, however the four
// goroutines sharing out the keys interleave.
//
// What the numbers say (inferred from the phantom debts the failures
// read, which match to the ms): the engine counts 15 ticks a ms here
// (MaxDebt's 4 s are 60,000 of its at most 61,438 ticks), keeps a stamp's
// low 16 bits (65,536 ticks: 4.37 s) and sweeps the entries older than
// 65,536 - 60,000 - 1 ticks (0.37 s) when a write moves a line's time;
// an entry older than that read in the moved window reads one wrap (4.37
// s) later, here 3.37 s in the future. With a gap of 3 s, each key's
// entry (2 s of debt) is 1 s old when its lines move: past the sweep age.
// The failures show a request reading such an entry during another
// request's move of the line (the new line time published before the
// sweep), and being denied; sometimes the phantom stays (a later read
// finds 3370 ms of debt on a key that owes nothing). A gap of 2.2 s
// (entries 0.2 s old: within the sweep age) is the control, and passes.
// It failed under -race at GOMAXPROCS 2 and 8 in nearly every run of 500
// cycles, and in some runs without -race (at GOMAXPROCS 1 it passed),
// until moves of a line's time cleared before publishing and readers
// read the header around the entries (docs/design.md, "Moving a line's
// time"; internal/bucket's TestReplayReadDuringMove is the deterministic
// replay).
func TestAudit4BucketsIdleLineRace(t *testing.T) {
	a4procs(t, func(t *testing.T, procs int, e limit.Engine) {
		for _, gap := range []time.Duration{2200 * time.Millisecond, 3 * time.Second} {
			clk := sketchtest.NewFakeClock()
			clk.Set(1 << 34)
			opts := append(a4opts(e, 33), limit.WithClock(clk))
			if e == limit.Buckets {
				opts = append(opts, limit.WithCapacity(1, 0.5))
			}
			l, err := limit.New(10, 20, opts...)
			if err != nil {
				t.Fatal(err)
			}
			probe, _ := l.Tier("probe", 10, 1)
			keys := a4keys("idle", 12)
			const G, cycles = 4, 500
			for cyc := range cycles {
				now := clk.Now()
				var mu sync.Mutex
				var bad []string
				a4race(G, func(g int) {
					for i := g; i < len(keys); i += G {
						if !l.AllowN(now, keys[i], 20) {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("%s (reads %d ms of debt now)", keys[i], a4debt(probe, now, keys[i])))
							mu.Unlock()
						}
					}
				})
				if len(bad) > 0 {
					t.Fatalf("gap %v, cycle %d: keys idle for %v (their 2 s of debt drained %v ago) denied their burst when requested again, concurrently on their lines: %v", gap, cyc, gap, gap-2*time.Second, bad)
				}
				for _, k := range keys {
					if got := a4debt(probe, now, k); got != 2000 {
						t.Fatalf("gap %v, cycle %d: key %s owes %d ms after its burst, want 2000", gap, cyc, k, got)
					}
				}
				clk.Advance(gap)
			}
		}
	})
}
