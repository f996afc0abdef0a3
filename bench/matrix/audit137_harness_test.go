package matrix

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/asm"
	"github.com/lfgrudge/grudge/internal/atom"
)

// Audit 137: honesty of the benchmark harness (bench/cmd/matrix,
// bench/matrix): spreads and flags, ratios of medians as the Markdown
// prints them, target grading by CPU count, and what a run leaves behind.

// a137Cell is one combined cell of repeats mops under spread.
func a137Cell(clk, impl, work, dist string, procs int, spread float64, mops ...float64) Result {
	var runs []Result
	for _, m := range mops {
		runs = append(runs, Result{Clock: clk, Impl: impl, Workload: work, Dist: dist, Procs: procs, Count: 1,
			Ops: 1000, Seconds: 0.25, Mops: m, P50Ns: 10, P99Ns: 20, P999Ns: 30, Samples: 10, Pinned: procs, MemSource: "sizes"})
	}
	return combine(runs, spread)
}

// a137Table returns the rows of the Markdown table under the heading that
// starts with prefix, each split into trimmed cells, the header first.
func a137Table(t *testing.T, md, prefix string) [][]string {
	t.Helper()
	i := strings.Index(md, prefix)
	if i < 0 {
		t.Fatalf("no heading %q in:\n%s", prefix, md)
	}
	var rows [][]string
	started := false
	for line := range strings.Lines(md[i:]) {
		line = strings.TrimRight(line, "\n")
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if cells[0] == "---" {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

// a137Parse reads a printed number ("12.5", "3.00x", "∞"), dropping a
// trailing ⚠ and x.
func a137Parse(t *testing.T, s string) float64 {
	t.Helper()
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), flagMark))
	s = strings.TrimSuffix(s, "x")
	if s == "∞" {
		return math.Inf(1)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cannot parse %q: %v", s, err)
	}
	return v
}

// TestAudit137SpreadFlagAcrossThresholds: for every -spread, Noisy is
// exactly (max-min)/median > spread with at least two repeats (doc.go
// "Repeats": "Spread is (MopsMax-MopsMin)/Mops and Noisy is Spread >
// -spread"), computed here independently of Summarize, and a single
// repeat is never flagged.
func TestAudit137SpreadFlagAcrossThresholds(t *testing.T) {
	rng := rand.New(rand.NewPCG(137, 1))
	for _, spread := range []float64{0, 0.05, 0.1, 0.25, 0.5, 1, 3} {
		for range 300 {
			n := 1 + rng.IntN(5)
			ms := make([]float64, n)
			for i := range ms {
				ms[i] = 1 + rng.Float64()*rng.Float64()*20
			}
			r := a137Cell(ClockDefault, ImplLockfree, WorkUpdate, DistUniform, 1, spread, ms...)
			lo, hi := ms[0], ms[0]
			for _, m := range ms {
				lo, hi = min(lo, m), max(hi, m)
			}
			sorted := append([]float64(nil), ms...)
			for i := range sorted {
				for j := i + 1; j < len(sorted); j++ {
					if sorted[j] < sorted[i] {
						sorted[i], sorted[j] = sorted[j], sorted[i]
					}
				}
			}
			med := sorted[n/2]
			if n%2 == 0 {
				med = (sorted[n/2-1] + sorted[n/2]) / 2
			}
			want := n > 1 && (hi-lo)/med > spread
			if math.Abs(r.Mops-med) > 1e-12*med || r.MopsMin != lo || r.MopsMax != hi || r.Noisy != want || r.Count != n {
				t.Fatalf("spread %v repeats %v: median %v min %v max %v noisy %v count %d; want %v %v %v %v %d",
					spread, ms, r.Mops, r.MopsMin, r.MopsMax, r.Noisy, r.Count, med, lo, hi, want, n)
			}
			if math.Abs(r.Spread-(hi-lo)/med) > 1e-12 {
				t.Fatalf("Spread %v; want %v", r.Spread, (hi-lo)/med)
			}
		}
	}
}

// a137Report builds a seeded synthetic report: lockfree, reference and
// atomicadd on both clocks, two workloads, two dists, P=1,2, three
// repeats each, some of them spread past the threshold.
func a137Report(seed uint64) *Report {
	rng := rand.New(rand.NewPCG(seed, 137))
	var rs []Result
	for _, clk := range AllClocks {
		for _, w := range []string{WorkUpdate, WorkQuery} {
			for _, d := range []string{DistUniform, DistHot8} {
				for _, p := range []int{1, 2} {
					for _, im := range []string{ImplLockfree, ImplReference, ImplAtomicAdd} {
						if !runsUnder(im, clk) {
							continue
						}
						base := 0.5 + rng.Float64()*150
						ms := make([]float64, 3)
						for i := range ms {
							ms[i] = base * (1 + rng.Float64()*0.6)
						}
						rs = append(rs, a137Cell(clk, im, w, d, p, DefaultSpread, ms...))
					}
				}
			}
		}
	}
	fillRatios(rs)
	return &Report{Meta: Meta{Cores: 2, Count: 3, Spread: DefaultSpread, SampleEvery: 64, DurationMs: 250,
		Procs: []int{1, 2}, Impls: DefaultImpls, Clocks: AllClocks}, Results: rs}
}

// TestAudit137MarkdownFlagsAndRatiosMatchCells: in every throughput
// table, each cell prints its median (min–max) with ⚠ exactly where the
// cell is Noisy; each ratio column carries ⚠ exactly where either side is
// Noisy and reads, within the printing's rounding, as the ratio of the
// medians printed beside it (doc.go "Outputs"; docs/benchmarks.md
// "Repeats, medians, flags"). The clock share column is the default
// ratio over the shared one.
func TestAudit137MarkdownFlagsAndRatiosMatchCells(t *testing.T) {
	for seed := range uint64(6) {
		rep := a137Report(seed)
		var b bytes.Buffer
		if err := WriteMarkdown(&b, rep); err != nil {
			t.Fatal(err)
		}
		md := b.String()
		ix := newIndex(rep.Results)
		for _, clk := range AllClocks {
			rows := a137Table(t, md, "### Throughput, clock="+clk)
			hdr := rows[0]
			col := map[string]int{}
			for i, h := range hdr {
				col[h] = i
			}
			for _, row := range rows[1:] {
				p, _ := strconv.Atoi(row[2])
				cell := func(im string) *Result { return ix.get(clk, im, row[0], row[1], p) }
				for _, im := range []string{ImplLockfree, ImplReference, ImplAtomicAdd} {
					i, ok := col[im]
					if !ok {
						continue
					}
					r := cell(im)
					if got := strings.HasSuffix(row[i], flagMark); got != r.Noisy {
						t.Errorf("seed %d %s %v: %q flagged %v; Noisy %v (spread %v)", seed, im, row[:3], row[i], got, r.Noisy, r.Spread)
					}
					if want := fmtCell(r, 0, DefaultSpread); row[i] != want {
						t.Errorf("seed %d %s %v: printed %q; want %q", seed, im, row[:3], row[i], want)
					}
				}
				for _, pr := range [][2]string{{ImplLockfree, ImplReference}, {ImplAtomicAdd, ImplLockfree}} {
					i, ok := col[pr[0]+"/"+pr[1]]
					if !ok {
						continue
					}
					a, bb := cell(pr[0]), cell(pr[1])
					if got, want := strings.HasSuffix(row[i], flagMark), a.Noisy || bb.Noisy; got != want {
						t.Errorf("seed %d %s/%s %v: %q flagged %v; sides noisy %v %v", seed, pr[0], pr[1], row[:3], row[i], got, a.Noisy, bb.Noisy)
					}
					printed := a137Parse(t, row[i])
					am := a137Parse(t, strings.Fields(row[col[pr[0]]])[0])
					bm := a137Parse(t, strings.Fields(row[col[pr[1]]])[0])
					// Each median is printed to 3 significant digits or
					// better; the ratio to 2 decimals below 10x, whole
					// from 10x.
					unit := 0.005
					if printed >= 10 {
						unit = 0.5
					}
					rel := 0.005/am + 0.005/bm + 0.006
					if math.Abs(printed-am/bm) > rel*am/bm+unit {
						t.Errorf("seed %d %s/%s %v: printed ratio %v, printed medians %v/%v = %v", seed, pr[0], pr[1], row[:3], printed, am, bm, am/bm)
					}
					if math.Abs(printed-a.Mops/bb.Mops) > unit*1.0001 {
						t.Errorf("seed %d %s/%s %v: printed ratio %v; medians' ratio %v", seed, pr[0], pr[1], row[:3], printed, a.Mops/bb.Mops)
					}
				}
			}
		}
		rows := a137Table(t, md, "### Clock vs cell design")
		for _, row := range rows[1:] {
			p, _ := strconv.Atoi(row[2])
			def := ix.ratioRange(ClockDefault, ImplLockfree, ImplReference, row[0], row[1], p).v
			sh := ix.ratioRange(ClockShared, ImplLockfree, ImplReference, row[0], row[1], p).v
			if share, want := row[9], fmtRatio(def/sh); strings.TrimSpace(strings.TrimSuffix(share, flagMark)) != want {
				t.Errorf("seed %d %v: clock share %q; want default ratio / shared ratio = %s", seed, row[:3], share, want)
			}
			noisy := false
			for _, clk := range AllClocks {
				for _, im := range []string{ImplLockfree, ImplReference} {
					noisy = noisy || ix.get(clk, im, row[0], row[1], p).Noisy
				}
			}
			if got := strings.HasSuffix(row[9], flagMark); got != noisy {
				t.Errorf("seed %d %v: clock share %q flagged %v; a side noisy %v", seed, row[:3], row[9], got, noisy)
			}
		}
	}
}

// TestAudit137FixedPrintedCellContradictsFlag (audit 137; fixed at stop 64, the text
// below says what was wrong): the footnote under each
// throughput table says (report.go flagNote) "⚠: the cell's repeats
// spread by more than 25% of their median ((max−min)/median > 0.25)", and
// the cell prints "median (min–max)". The flag is decided on the
// unrounded values while the cell prints 3 significant digits, so the
// printed numbers can contradict the printed flag, the kind of
// contradiction targetDigits and fmtOperands were written to rule out for
// the targets (audit 92/93):
//
//   - repeats 10.0, 10.049, 12.549: spread 2.549/10.049 = 0.2537, flagged;
//     printed "10.0 (10.0–12.5) ⚠", whose spread reads 2.5/10.0 = 0.25,
//     not above 0.25;
//   - repeats 7.56, 10.04, 10.06: spread 2.5/10.04 = 0.249, not
//     flagged; printed "10.0 (7.56–10.1)", whose spread reads 2.54/10.0 =
//     0.254, above 0.25, with no ⚠.
//
// Suggested fix: report.go fmtCell: print median, min and max with as
// many more digits as it takes for the printed (max−min)/median to fall
// on the same side of Meta.Spread as Spread does (as targetDigits does).
func TestAudit137FixedPrintedCellContradictsFlag(t *testing.T) {
	for _, ms := range [][]float64{{10.0, 10.049, 12.549}, {7.56, 10.04, 10.06}} {
		r := a137Cell(ClockDefault, ImplLockfree, WorkUpdate, DistUniform, 1, DefaultSpread, ms...)
		s := fmtCell(&r, 0, DefaultSpread)
		f := strings.Fields(strings.NewReplacer("(", " ", ")", " ", "–", " ").Replace(s))
		med, lo, hi := a137Parse(t, f[0]), a137Parse(t, f[1]), a137Parse(t, f[2])
		printedSpread := (hi - lo) / med
		if flagged := strings.HasSuffix(s, flagMark); flagged != (printedSpread > DefaultSpread) {
			t.Errorf("repeats %v: cell prints %q (flag %v) but its printed (max−min)/median is %.4f, %s 0.25 (the unrounded spread is %.5f)",
				ms, s, flagged, printedSpread, map[bool]string{true: "above", false: "not above"}[printedSpread > DefaultSpread], r.Spread)
		}
	}
}

// TestAudit137TargetsGradedOnlyWithTheirCPUs: over every CPU count 0-20
// and several -procs lists, a target stated at P=N is graded ("yes"/"no",
// maybe "(noisy)") exactly when the machine has >= N CPUs and the run has
// a cell at P=N; else "needs N CPUs" where the CPUs are fewer, "CPU count
// unknown" where Cores is 0, "not measured" otherwise; and Measured, when
// ungraded, names the largest P run that fits both N and the CPUs (docs/
// benchmarks.md "Targets, graded where they can be"; TargetCheck.Met).
func TestAudit137TargetsGradedOnlyWithTheirCPUs(t *testing.T) {
	specs := targetSpecs()
	for _, procs := range [][]int{{1}, {1, 2}, {1, 2, 4, 8}, {2, 16}, {1, 2, 4, 8, 16}, {4, 32}} {
		var rs []Result
		for _, clk := range AllClocks {
			for _, w := range []string{WorkUpdate, WorkUpdateAndQuery, WorkTryUpdateAdmit, WorkTryUpdateDenied} {
				for _, d := range AllDists {
					for _, p := range procs {
						for _, im := range DefaultImpls {
							if runsUnder(im, clk) {
								rs = append(rs, a137Cell(clk, im, w, d, p, DefaultSpread, 5, 5.1, 5.2))
							}
						}
					}
				}
			}
		}
		fillRatios(rs)
		for cores := 0; cores <= 20; cores++ {
			tg := Targets(&Report{Meta: Meta{Cores: cores, Count: 3, Spread: DefaultSpread}, Results: rs})
			for i, tc := range tg[:len(tg)-1] { // the last: zero allocs, no P
				p := 16
				if i < len(specs) {
					p = specs[i].p
				}
				has := false
				for _, x := range procs {
					has = has || x == p
				}
				graded := cores >= p && has
				isGrade := tc.Met == "yes" || tc.Met == "no" || strings.HasSuffix(tc.Met, "(noisy)")
				if isGrade != graded {
					t.Errorf("procs %v cores %d %q: met %q; graded should be %v", procs, cores, tc.Target, tc.Met, graded)
					continue
				}
				if graded {
					if !strings.Contains(tc.Measured, fmt.Sprintf("at P=%d", p)) {
						t.Errorf("procs %v cores %d %q: measured %q, not at P=%d", procs, cores, tc.Target, tc.Measured, p)
					}
					continue
				}
				want := "not measured"
				switch {
				case cores == 0:
					want = "CPU count unknown"
				case cores < p:
					want = fmt.Sprintf("needs %d CPUs", p)
				}
				if tc.Met != want {
					t.Errorf("procs %v cores %d %q: met %q; want %q", procs, cores, tc.Target, tc.Met, want)
				}
				q := 0
				for _, x := range procs {
					if x <= p && (cores == 0 || x <= cores) {
						q = x
					}
				}
				if q == 0 && tc.Measured != "–" || q > 0 && !strings.Contains(tc.Measured, fmt.Sprintf("at P=%d", q)) {
					t.Errorf("procs %v cores %d %q: measured %q; want the largest fitting P %d", procs, cores, tc.Target, tc.Measured, q)
				}
			}
		}
	}
}

// TestAudit137FixedBackoffOutlivesRun (audit 137; fixed at stop 64, the text
// below says what was wrong): Options.Backoff says it is "the
// lock-free writers' contention backoff for this run
// (atom.SetContentionBackoff): "" keeps the build's (32/1024, or off
// under -tags grudge_nobackoff)". Run sets the process-wide schedule and
// never restores it: after a Run with Backoff "off" the backoff stays
// off, so a later Run in the same process with Backoff "" measures the
// lock-free sketch without its backoff while its Config line (which
// mentions a backoff only when Backoff is set) claims the build's.
// Observed: ContentionBackoff() is the zero Backoff after the first Run.
// Suggested fix: bench/matrix/run.go Run (the `if o.Backoff != ""` block
// line 152): save atom.ContentionBackoff() and spin-on-loss first and
// restore them with a defer (atom would need a restore entry point), or
// document that Backoff is process-wide and sticky.
func TestAudit137FixedBackoffOutlivesRun(t *testing.T) {
	build := atom.ContentionBackoff()
	t.Cleanup(func() {
		if build == asm.NewBackoff(32, 1024) {
			atom.SetContentionBackoff(32, 1024)
		} else if build == (asm.Backoff{}) {
			atom.SetContentionBackoff(0, 0)
		}
	})
	if build != asm.NewBackoff(32, 1024) && build != (asm.Backoff{}) {
		t.Skip("the build's backoff is neither 32/1024 nor off; cannot restore it")
	}
	o := DefaultOptions()
	o.Impls, o.Workloads, o.Dists, o.Clocks, o.Procs = []string{ImplLockfree}, []string{WorkUpdate}, []string{DistHot1}, []string{ClockDefault}, []int{1}
	o.Duration, o.Warmup, o.Count = 2*time.Millisecond, 0, 1
	o.Keys, o.Stream, o.Cells = 8, 1024, 1024
	o.Out, o.Quiet, o.Plots, o.Commit = "", true, false, "audit137"
	o.Backoff = "off"
	if _, err := Run(context.Background(), o, nil); err != nil {
		t.Fatal(err)
	}
	after := atom.ContentionBackoff()
	o.Backoff = ""
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if build != (asm.Backoff{}) && after != build {
		t.Errorf("after Run with -backoff off the process's contention backoff is %+v, not the build's %+v: a later Run with Backoff \"\" (config %q) measures without the backoff while its report claims the build's",
			after, build, rep.Meta.Config)
	}
}

// TestAudit137TinyRunNumbersAgree: a tiny real run (5 ms cells, 2
// repeats, lockfree and reference at P=1,2): every cell's median, bounds,
// Spread and Noisy are what its own MopsRuns give under Meta.Spread; its
// Ratio is its median over the reference's of the same clock, workload,
// dist and P; RatioMin and RatioMax are min/base max and max/base min;
// the pinning line agrees with the cells' Pinned; and Cores is what
// UsableCPUs says.
func TestAudit137TinyRunNumbersAgree(t *testing.T) {
	o := DefaultOptions()
	o.Impls, o.Workloads, o.Dists, o.Clocks, o.Procs = []string{ImplLockfree, ImplReference}, []string{WorkUpdate}, []string{DistHot8}, []string{ClockShared}, []int{1, 2}
	o.Duration, o.Warmup, o.Count = 5*time.Millisecond, 2*time.Millisecond, 2
	o.Keys, o.Stream, o.Cells = 64, 1024, 1024
	o.Out, o.Quiet, o.Commit = "", true, "audit137"
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Meta.Cores != UsableCPUs() || rep.Meta.WarmupMs != 2 || rep.Meta.Count != 2 || rep.Meta.Spread != DefaultSpread {
		t.Errorf("meta: cores %d (usable %d) warm-up %v count %d spread %v", rep.Meta.Cores, UsableCPUs(), rep.Meta.WarmupMs, rep.Meta.Count, rep.Meta.Spread)
	}
	ix := newIndex(rep.Results)
	allPinned := true
	for _, r := range rep.Results {
		st := Summarize(r.MopsRuns)
		if r.Count != 2 || st.N != 2 || r.Mops != st.Median || r.MopsMin != st.Min || r.MopsMax != st.Max || r.Noisy != (st.RelativeSpread > rep.Meta.Spread) {
			t.Errorf("%s P=%d: %+v against its runs %v", r.Impl, r.Procs, r, r.MopsRuns)
		}
		allPinned = allPinned && r.Pinned == r.Procs
		b := ix.get(r.Clock, ImplReference, r.Workload, r.Dist, r.Procs)
		if r.Impl == ImplReference {
			continue
		}
		if r.Ratio != r.Mops/b.Mops || r.RatioMin != r.MopsMin/b.MopsMax || r.RatioMax != r.MopsMax/b.MopsMin || r.RatioNoisy != (r.Noisy || b.Noisy) {
			t.Errorf("%s P=%d: ratio %v (%v–%v, noisy %v); medians %v/%v", r.Impl, r.Procs, r.Ratio, r.RatioMin, r.RatioMax, r.RatioNoisy, r.Mops, b.Mops)
		}
	}
	if allPinned != strings.HasPrefix(rep.Meta.Pinning, "took") {
		t.Errorf("pinning %q; every cell pinned: %v", rep.Meta.Pinning, allPinned)
	}
}
