package matrix

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// a101StoppedReport builds the report Run returns when its context is
// done after round 1 and the first cell of round 2 (lockfree measured
// twice, reference once), through the same steps Run takes: rounds with
// a fake measurement, combine, fillRatios, Meta.Stopped.
func a101StoppedReport(t *testing.T) *Report {
	t.Helper()
	o := Options{
		Impls: []string{ImplLockfree, ImplReference}, Workloads: []string{WorkUpdate},
		Dists: []string{DistUniform}, Clocks: []string{ClockDefault}, Procs: []int{1},
		Duration: 250 * time.Millisecond, Count: 3, Spread: DefaultSpread, SampleEvery: 64,
		Keys: 8, Stream: 1, Levels: 4, Cells: 100, Out: "", Quiet: true,
	}
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mops := map[string][]float64{ImplLockfree: {10, 10, 10}, ImplReference: {5, 5, 5}}
	calls := 0
	r := &runner{o: &o}
	r.measure = func(c cell) (Result, string, error) {
		calls++
		if calls == len(cs)+1 {
			cancel() // stop after round 2's first cell
		}
		m := mops[c.impl][0]
		mops[c.impl] = mops[c.impl][1:]
		return Result{Clock: c.clock, Impl: c.impl, Workload: c.work.name, Dist: c.dist, Procs: c.procs, Count: 1,
			Pinned: c.procs, Mops: m, Ops: uint64(m * 1e6 / 4), Seconds: 0.25, P50Ns: 20, P99Ns: 40, P999Ns: 80}, "", nil
	}
	rs, err := r.rounds(ctx, cs, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Meta: Meta{Cores: 2, Count: o.Count, Spread: o.Spread, DurationMs: 250, SampleEvery: 64,
		Procs: o.Procs, Impls: o.Impls, Workloads: o.Workloads, Dists: o.Dists, Clocks: o.Clocks}}
	for i, runs := range rs.runs {
		if len(runs) == 0 {
			continue
		}
		res := combine(runs, o.Spread)
		res.Clock, res.Impl, res.Workload, res.Dist, res.Procs = cs[i].clock, cs[i].impl, cs[i].work.name, cs[i].dist, cs[i].procs
		rep.Results = append(rep.Results, res)
	}
	fillRatios(rep.Results)
	rep.Meta.Stopped = rs.stopped
	if rs.stopped == "" {
		t.Fatal("the fake run did not stop")
	}
	return rep
}

// TestAudit101BenchFixedStoppedRunClaimsCountRepeats (audit 101; fixed at stop 60, the text
// below says what was wrong).
//
// Doc (bench/matrix/run.go, Run): "When ctx is done, Run finishes the
// repeat in progress and returns the cells measured so far, each
// summarising the repeats it got"; docs/benchmarks.md: "The first
// SIGINT/SIGTERM ends the run after the repeat in progress and still
// writes what was measured" (bench/run16.sh and backoff16.sh rely on it:
// every matrix step runs under timeout(1)).
//
// Code: WriteMarkdown labels every table from Meta.Count, the repeats
// asked for: "- cells: 3 repeats of 250ms each", "### Latency ...
// medians of 3 repeats", "### Targets (...; medians of 3 repeats)",
// and no cell shows how many it got (fmtCell prints a 1-repeat cell as
// a bare number, a 2-repeat one as "median (min–max)"). The ratio of a
// row then sets lockfree's median of rounds 1-2 against reference's
// round 1 alone, while the page says both are medians of 3 interleaved
// repeats.
//
// Repro: a run of lockfree and reference with -count 3 stopped after
// round 1 and the first cell of round 2: no cell has 3 repeats, yet the
// Markdown says "3 repeats" and "medians of 3 repeats".
func TestAudit101BenchFixedStoppedRunClaimsCountRepeats(t *testing.T) {
	rep := a101StoppedReport(t)
	most := 0
	for _, r := range rep.Results {
		most = max(most, r.Count)
	}
	if most != 2 {
		t.Fatalf("fake stopped run: most repeats %d; want 2", most)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, claim := range []string{"cells: 3 repeats", "medians of 3 repeats"} {
		if strings.Contains(md, claim) {
			t.Errorf("a stopped run whose cells have at most %d repeats (lockfree 2, reference 1) is labelled %q:\n%s", most, claim, md)
		}
	}
}

// TestAudit101BenchStoppedRunKeepsWhatItMeasured (passes): the stopped
// run's cells summarise the repeats they got (lockfree 2, reference 1),
// its ratio is of those medians, and the Markdown says it is incomplete.
func TestAudit101BenchStoppedRunKeepsWhatItMeasured(t *testing.T) {
	rep := a101StoppedReport(t)
	if len(rep.Results) != 2 {
		t.Fatalf("%d results; want 2", len(rep.Results))
	}
	lf, ref := rep.Results[0], rep.Results[1]
	if lf.Impl != ImplLockfree || lf.Count != 2 || len(lf.MopsRuns) != 2 || ref.Count != 1 || len(ref.MopsRuns) != 1 {
		t.Fatalf("results %+v / %+v", lf, ref)
	}
	if lf.Ratio != 2 || lf.Base != ImplReference {
		t.Errorf("lockfree ratio %v over %q; want 2 over reference", lf.Ratio, lf.Base)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "- **incomplete**: stopped after 3 of 6 cell runs (round 2 of 3)") {
		t.Errorf("no incomplete note:\n%s", b.String())
	}
}
