package matrix

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// index finds results by cell.
type index map[resultKey]*Result

type resultKey struct {
	clock, impl, work, dist string
	procs                   int
}

func newIndex(rs []Result) index {
	ix := index{}
	for i := range rs {
		r := &rs[i]
		ix[resultKey{r.Clock, r.Impl, r.Workload, r.Dist, r.Procs}] = r
	}
	return ix
}

func (ix index) get(clock, impl, work, dist string, procs int) *Result {
	return ix[resultKey{clock, impl, work, dist, procs}]
}

// ratioRange returns a/b from the medians with its bounds and flag.
func (ix index) ratioRange(clock, a, b, work, dist string, procs int) ratioRange {
	return ratioOf(ix.get(clock, a, work, dist, procs), ix.get(clock, b, work, dist, procs))
}

// flagMark marks a noisy cell or ratio in the tables; the footnote under
// each table explains it.
const flagMark = "⚠"

// fmtCell renders a cell's throughput: the median, the range of the
// repeats when there are several, "[n=k]" when it got k repeats, fewer
// than want (a stopped run's; want 0 marks none), and the flag when it is
// noisy. The median and range are printed with as many digits as it
// takes for the printed (max−min)/median to fall on the flag's side of
// spread (the run's Meta.Spread), so the numbers never contradict the
// flag (audit 137).
func fmtCell(r *Result, want int, spread float64) string {
	if r == nil {
		return "–"
	}
	s := fmtMops(r.Mops)
	if r.Count > 1 {
		med, lo, hi := fmtRange(r, spread)
		s = med + " (" + lo + "–" + hi + ")"
	}
	if n := max(r.Count, 1); n < want {
		s += fmt.Sprintf(" [n=%d]", n)
	}
	if r.Noisy {
		s += " " + flagMark
	}
	return s
}

// fmtRange renders a cell's median, min and max with fmtMops' decimals,
// and up to six more where the printed spread, read as exact decimals,
// would fall on the other side of spread than the cell's flag; past
// that, with as many decimals as the longest of the shortest forms that
// read back as the measured values (audit 139).
func fmtRange(r *Result, spread float64) (med, lo, hi string) {
	for extra := 0; extra <= 6; extra++ {
		med, lo, hi = fmtMopsPlus(r.Mops, extra), fmtMopsPlus(r.MopsMin, extra), fmtMopsPlus(r.MopsMax, extra)
		if agrees, ok := printedSpreadAgrees(med, lo, hi, spread, r.Noisy); agrees || !ok {
			return med, lo, hi
		}
	}
	d := 0
	for _, v := range []float64{r.Mops, r.MopsMin, r.MopsMax} {
		if _, frac, ok := strings.Cut(strconv.FormatFloat(v, 'f', -1, 64), "."); ok {
			d = max(d, len(frac))
		}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', d, 64) }
	return f(r.Mops), f(r.MopsMin), f(r.MopsMax)
}

// printedSpreadAgrees reports whether (hi-lo)/med, the decimals as
// printed, exactly, is above spread just when noisy; ok is false where a
// string is not a positive median's decimal (nothing to compare).
func printedSpreadAgrees(med, lo, hi string, spread float64, noisy bool) (agrees, ok bool) {
	m, okM := new(big.Rat).SetString(med)
	l, okL := new(big.Rat).SetString(lo)
	h, okH := new(big.Rat).SetString(hi)
	// The threshold as the footnote prints it (%g: the shortest decimal).
	sp, okS := new(big.Rat).SetString(strconv.FormatFloat(spread, 'g', -1, 64))
	if !okM || !okL || !okH || !okS || m.Sign() <= 0 {
		return false, false
	}
	read := new(big.Rat).Quo(new(big.Rat).Sub(h, l), m)
	return (read.Cmp(sp) > 0) == noisy, true
}

// fmtMedian renders a cell's median throughput and its flag.
func fmtMedian(r *Result) string {
	if r == nil {
		return "–"
	}
	s := fmtMops(r.Mops)
	if r.Noisy {
		s += " " + flagMark
	}
	return s
}

// fmtRatioFlag renders a ratio of medians, flagged when either side is.
func fmtRatioFlag(rr ratioRange) string {
	s := fmtRatio(rr.v)
	if rr.noisy && s != "–" {
		s += " " + flagMark
	}
	return s
}

// flagNote is the footnote under a table that may carry flagMark.
func flagNote(m *Meta) string {
	if m.Count <= 1 {
		return ""
	}
	return fmt.Sprintf("%s: the cell's repeats spread by more than %.0f%% of their median ((max−min)/median > %g), or, on a ratio, either side's do; read such a number as noise.\n\n",
		flagMark, 100*m.Spread, m.Spread)
}

// present returns the names of order that occur in rs under field f.
func present(rs []Result, order []string, f func(*Result) string) []string {
	seen := map[string]bool{}
	for i := range rs {
		seen[f(&rs[i])] = true
	}
	var out []string
	for _, n := range order {
		if seen[n] {
			out = append(out, n)
		}
	}
	return out
}

func fmtMops(v float64) string { return fmtMopsPlus(v, 0) }

// fmtMopsPlus is fmtMops with extra more decimals.
func fmtMopsPlus(v float64, extra int) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', extra, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1+extra, 64)
	}
	return strconv.FormatFloat(v, 'f', 2+extra, 64)
}

// fmtRatio renders a ratio: "–" where it is missing (NaN), "∞" where its
// base measured nothing, and a measured 0 as "0.00x".
func fmtRatio(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "∞"
	case v >= 10:
		return fmt.Sprintf("%.0fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

// meets reports whether x meets a target of want: at least want, or at
// most want where atMost.
func meets(x, want float64, atMost bool) bool {
	if atMost {
		return x <= want
	}
	return x >= want
}

// targetDigits prints a target's ratio with two decimals, or with as
// many more (up to six) as it takes for the printed number to be graded
// as v is (1.1996 against 1.2 reads 1.1996x, graded no), and past six
// with the sixth stepped toward v's side (2.9999999999999996 against 3
// reads 2.999999x), so the printed number never contradicts the grade.
func targetDigits(v, want float64, atMost bool) string {
	ok := meets(v, want, atMost)
	for d := 2; d <= 6; d++ {
		s := strconv.FormatFloat(v, 'f', d, 64)
		if x, err := strconv.ParseFloat(s, 64); err == nil && meets(x, want, atMost) == ok {
			return s
		}
	}
	// Six decimals still read as the other grade: step the last digit
	// toward v's side of want.
	n := math.Round(v * 1e6)
	if meets(n/1e6, want, atMost) != ok {
		if ok != atMost {
			n++
		} else {
			n--
		}
	}
	return strconv.FormatFloat(n/1e6, 'f', 6, 64)
}

// fmtOperands prints a and b (ns) whole, or with as many more decimals
// (up to three) as it takes for the printed a/b to grade against want as
// a/b does (medians of an even count are halves: 400.4 against 2000
// printed as 400 would read 0.2, meeting "<= 0.2", where 0.2002 does not).
func fmtOperands(a, b, want float64, atMost bool) (string, string) {
	ok := meets(a/b, want, atMost)
	for d := 0; ; d++ {
		as, bs := strconv.FormatFloat(a, 'f', d, 64), strconv.FormatFloat(b, 'f', d, 64)
		x, errX := strconv.ParseFloat(as, 64)
		y, errY := strconv.ParseFloat(bs, 64)
		if d == 3 || (errX == nil && errY == nil && y > 0 && meets(x/y, want, atMost) == ok) {
			return as, bs
		}
	}
}

// fmtBound prints a ratio's bound with two decimals; "∞" where a repeat
// of the base measured 0.
func fmtBound(v float64) string {
	if math.IsInf(v, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtNs(v float64) string { return fmt.Sprintf("%.0f", v) }

func fmtBytes(b int64) string {
	switch {
	case b >= 1<<20 || b <= -1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10 || b <= -1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// WriteMarkdown writes the report as Markdown: the metadata, per clock
// mode a throughput table (median (min–max) of the repeats, with the
// lockfree/reference, rotator/refrotator and atomicadd/lockfree ratios of
// the medians; noisy cells and ratios flagged) and a latency table
// (medians), with both clocks in one run the two clocks' medians side by
// side and the clock-vs-design split, memory and allocations, and the
// issue's targets (from the medians).
func WriteMarkdown(out io.Writer, rep *Report) error {
	w := bufio.NewWriter(out)
	m := &rep.Meta
	fmt.Fprintf(w, "## Contention matrix\n\n")
	fmt.Fprintf(w, "- command: `%s`\n", m.Command)
	fmt.Fprintf(w, "- machine: %s, %d CPUs, %s/%s, %s, commit %s, %s\n", m.CPUModel, m.Cores, m.GOOS, m.GOARCH, m.GoVersion, m.Commit, m.Date)
	fmt.Fprintf(w, "- pinning: %s\n", m.Pinning)
	if over := oversubscribed(rep); len(over) > 0 {
		// Workers are pinned round-robin: at P above the CPUs two or more
		// share one, which the pinning line cannot show.
		fmt.Fprintf(w, "- oversubscribed: P=%v run more workers than this machine's %d CPUs (workers share CPUs; those cells measure time-slicing, not contention between cores)\n", over, m.Cores)
	}
	if m.Stopped != "" {
		fmt.Fprintf(w, "- **incomplete**: %s\n", m.Stopped)
	}
	// A stopped run's cells summarise the repeats they got (Run), fewer
	// than Count in some or all of them: say what they got, and mark
	// the short cells (short is 0, marking none, when every cell got
	// Count).
	want := max(m.Count, 1)
	lo, hi, short := want, want, 0
	if m.Stopped != "" {
		if lo, hi = repeatsGot(rep.Results); lo < want {
			short = want
		}
	}
	if short > 0 {
		fmt.Fprintf(w, "- cells: asked for %d repeats of %v each, interleaved (round r runs every cell once, then round r+1), got %s before the run stopped; [n=k] marks a cell with k < %d repeats; wall time of the whole run %.0f s\n",
			want, fmtDurMs(m.DurationMs), repeatRange(lo, hi), want, m.WallSeconds)
	} else {
		fmt.Fprintf(w, "- cells: %d repeats of %v each, interleaved (round r runs every cell once, then round r+1); wall time of the whole run %.0f s\n",
			want, fmtDurMs(m.DurationMs), m.WallSeconds)
	}
	if m.WarmupMs > 0 {
		fmt.Fprintf(w, "- warm-up: before round 1, each implementation of the first row ran %v, not recorded\n", fmtDurMs(m.WarmupMs))
	}
	if m.Count > 1 {
		fmt.Fprintf(w, "- throughput: median (min–max) of the repeats; ratios are of the medians; latency: medians of the repeats' percentiles; %s marks a spread (max−min)/median above %g\n", flagMark, m.Spread)
	}
	fmt.Fprintf(w, "- latency: 1 op in %d timed with %s; two back-to-back reads cost %.1f ns (included in every sample); a sample costs %.1f ns, %.2f ns per op on average\n",
		m.SampleEvery, m.Timer, m.TimerPairNs, m.SampleCostNs, m.SampleCostNs/float64(max(m.SampleEvery, 1)))
	fmt.Fprintf(w, "- config: %s\n\n", m.Config)

	rs := rep.Results
	ix := newIndex(rs)
	impls := present(rs, AllImpls, func(r *Result) string { return r.Impl })
	works := present(rs, AllWorkloads, func(r *Result) string { return r.Workload })
	dists := present(rs, AllDists, func(r *Result) string { return r.Dist })
	clocks := present(rs, AllClocks, func(r *Result) string { return r.Clock })
	procs := sortedProcs(rs)
	has := func(impl string) bool { return slices.Contains(impls, impl) }

	for _, clk := range clocks {
		ci := slices.DeleteFunc(slices.Clone(impls), func(im string) bool { return !runsUnder(im, clk) })
		fmt.Fprintf(w, "### Throughput, clock=%s: %s (Mops/s, all workers together)\n\n", clk, clockWords(clk))
		hdr := append([]string{"workload", "keys", "P"}, ci...)
		if has(ImplLockfree) && has(ImplReference) {
			hdr = append(hdr, "lockfree/reference")
		}
		if has(ImplRotator) && has(ImplRefRotator) {
			hdr = append(hdr, "rotator/refrotator")
		}
		if clk == ClockDefault && has(ImplLockfree) && has(ImplAtomicAdd) {
			hdr = append(hdr, "atomicadd/lockfree")
		}
		tableHeader(w, hdr)
		for _, wk := range works {
			for _, d := range dists {
				for _, p := range procs {
					row := []string{wk, d, fmt.Sprint(p)}
					found := false
					for _, im := range ci {
						r := ix.get(clk, im, wk, d, p)
						found = found || r != nil
						row = append(row, fmtCell(r, short, m.Spread))
					}
					if !found {
						continue
					}
					if has(ImplLockfree) && has(ImplReference) {
						row = append(row, fmtRatioFlag(ix.ratioRange(clk, ImplLockfree, ImplReference, wk, d, p)))
					}
					if has(ImplRotator) && has(ImplRefRotator) {
						row = append(row, fmtRatioFlag(ix.ratioRange(clk, ImplRotator, ImplRefRotator, wk, d, p)))
					}
					if clk == ClockDefault && has(ImplLockfree) && has(ImplAtomicAdd) {
						row = append(row, fmtRatioFlag(ix.ratioRange(clk, ImplAtomicAdd, ImplLockfree, wk, d, p)))
					}
					tableRow(w, row)
				}
			}
		}
		fmt.Fprintln(w)
		fmt.Fprint(w, flagNote(m))
	}

	for _, clk := range clocks {
		ci := slices.DeleteFunc(slices.Clone(impls), func(im string) bool { return !runsUnder(im, clk) })
		fmt.Fprintf(w, "### Latency, clock=%s (ns, p50 / p99 / p99.9 of 1 op in %d%s)\n\n", clk, m.SampleEvery, medianWords(lo, hi))
		tableHeader(w, append([]string{"workload", "keys", "P"}, ci...))
		for _, wk := range works {
			for _, d := range dists {
				for _, p := range procs {
					row := []string{wk, d, fmt.Sprint(p)}
					found := false
					for _, im := range ci {
						s := "–"
						if r := ix.get(clk, im, wk, d, p); r != nil {
							s, found = fmtNs(r.P50Ns)+" / "+fmtNs(r.P99Ns)+" / "+fmtNs(r.P999Ns), true
						}
						row = append(row, s)
					}
					if found {
						tableRow(w, row)
					}
				}
			}
		}
		fmt.Fprintln(w)
	}

	if len(clocks) == 2 && has(ImplLockfree) && has(ImplReference) {
		fmt.Fprintf(w, "### Clock vs cell design: both clocks side by side (one run)\n\n")
		fmt.Fprintf(w, "Medians of the same run's cells under clock=default (each implementation on its own clock) and clock=shared (all on hw.Nanotime()/1e6). lockfree/reference under shared is the cell design's gain; default/shared is the clock's share.\n\n")
		hdr := []string{"workload", "keys", "P", "lockfree default", "lockfree shared", "reference default", "reference shared",
			"lockfree/reference default", "shared", "clock share"}
		if has(ImplRotator) && has(ImplRefRotator) {
			hdr = append(hdr, "rotator/refrotator default", "shared")
		}
		tableHeader(w, hdr)
		for _, wk := range works {
			for _, d := range dists {
				for _, p := range procs {
					a := ix.ratioRange(ClockDefault, ImplLockfree, ImplReference, wk, d, p)
					b := ix.ratioRange(ClockShared, ImplLockfree, ImplReference, wk, d, p)
					if math.IsNaN(a.v) && math.IsNaN(b.v) {
						continue
					}
					share := ratioRange{v: a.v / b.v, noisy: a.noisy || b.noisy}
					row := []string{wk, d, fmt.Sprint(p),
						fmtMedian(ix.get(ClockDefault, ImplLockfree, wk, d, p)), fmtMedian(ix.get(ClockShared, ImplLockfree, wk, d, p)),
						fmtMedian(ix.get(ClockDefault, ImplReference, wk, d, p)), fmtMedian(ix.get(ClockShared, ImplReference, wk, d, p)),
						fmtRatioFlag(a), fmtRatioFlag(b), fmtRatioFlag(share)}
					if has(ImplRotator) && has(ImplRefRotator) {
						row = append(row, fmtRatioFlag(ix.ratioRange(ClockDefault, ImplRotator, ImplRefRotator, wk, d, p)),
							fmtRatioFlag(ix.ratioRange(ClockShared, ImplRotator, ImplRefRotator, wk, d, p)))
					}
					tableRow(w, row)
				}
			}
		}
		fmt.Fprintln(w)
		fmt.Fprint(w, flagNote(m))
	}

	fmt.Fprintf(w, "### Memory, allocations, admissions\n\n")
	fmt.Fprintf(w, "Memory: Sizes().Total, or for ratemap the live-heap delta after filling every key of the largest universe (it grows with the keys). Allocations: Mallocs over the timed region / ops (the rotators' once-per-Period generation is included). Admit rate: admitted / ops in tryupdate-denied.\n\n")
	tableHeader(w, []string{"impl", "memory", "allocs/op max", "allocs/op median", "tryupdate-denied admit rate max"})
	for _, im := range impls {
		var mem int64
		var allocs, admits []float64
		src := ""
		for _, r := range rs {
			if r.Impl != im {
				continue
			}
			mem, src = max(mem, r.MemBytes), r.MemSource
			allocs = append(allocs, r.AllocsPerOp)
			if r.Workload == WorkTryUpdateDenied {
				admits = append(admits, r.AdmitRate)
			}
		}
		med := Summarize(allocs).Median // type 7, as every median of the report
		adm := "–"
		if len(admits) > 0 {
			adm = fmt.Sprintf("%.3g", slices.Max(admits))
		}
		tableRow(w, []string{im, fmtBytes(mem) + " (" + src + ")", fmt.Sprintf("%.3g", slices.Max(allocs)), fmt.Sprintf("%.3g", med), adm})
	}
	fmt.Fprintln(w)

	tg := Targets(rep)
	if len(tg) > 0 {
		fmt.Fprintf(w, "### Targets (clock=default unless stated; each graded at the P it names, on a machine with that many CPUs%s)\n\n", medianWords(lo, hi))
		tableHeader(w, []string{"target", "measured here", "met here"})
		for _, t := range tg {
			tableRow(w, []string{t.Target, t.Measured, t.Met})
		}
		fmt.Fprintln(w)
		fmt.Fprint(w, flagNote(m))
	}
	return w.Flush()
}

// clockWords says what a clock mode means, for table headings.
func clockWords(clk string) string {
	if clk == ClockShared {
		return "every implementation on the shared clock"
	}
	return "each implementation on its own default clock"
}

// medianWords says, when there are repeats, that a table shows medians,
// of the lo to hi repeats its cells got.
func medianWords(lo, hi int) string {
	if hi > 1 {
		return "; medians of " + repeatRange(lo, hi) + " repeats"
	}
	return ""
}

// repeatsGot returns the fewest and the most repeats a cell of rs got (0
// and 0 when rs is empty); a cell's Count is its repeats (combine).
func repeatsGot(rs []Result) (lo, hi int) {
	for i := range rs {
		n := max(rs[i].Count, 1)
		if i == 0 {
			lo, hi = n, n
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

// repeatRange renders lo to hi repeats: "3", or "1–2".
func repeatRange(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

func fmtDurMs(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%gs", ms/1000)
	}
	return fmt.Sprintf("%gms", ms)
}

func tableHeader(w io.Writer, cols []string) {
	tableRow(w, cols)
	seps := make([]string, len(cols))
	for i := range seps {
		seps[i] = "---"
		if i >= 2 {
			seps[i] = "--:"
		}
	}
	tableRow(w, seps)
}

func tableRow(w io.Writer, cols []string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
}

// TargetCheck is one of the issues' targets with what this run shows.
type TargetCheck struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	// Met is "yes" or "no" where the run graded the target, with " (noisy)"
	// when a ratio's cell is flagged; "needs N CPUs" where the target is
	// stated at P=N and the machine has fewer (Measured then shows the
	// largest P run that fits the machine's CPUs, for information only);
	// "CPU count unknown" where the report does not say how many CPUs
	// the machine had (Meta.Cores 0: a hand-made results.json);
	// "not measured" where the run has no cell for it.
	Met string `json:"met"`
}

// targetSpec is a throughput target: the ratio a/b of the medians on one
// workload, dist and clock, at P = p, at least want (at most, atMost).
type targetSpec struct {
	name       string
	clock      string
	a, b       string
	work, dist string
	p          int
	want       float64
	atMost     bool
}

// targetSpecs lists the throughput targets: the 16-core targets of the
// original issue (default clock) and the cached-line targets of the
// cheaper-cell issue (atomic-add bound at P=1 on the default clock, the
// rest on the shared clock, where both sketches pay the same clock read).
func targetSpecs() []targetSpec {
	specs := []targetSpec{
		{"uniform Update >= 4x reference at P=1", ClockDefault, ImplLockfree, ImplReference, WorkUpdate, DistUniform, 1, 4, false},
		{"uniform Update >= 3x reference at P=16", ClockDefault, ImplLockfree, ImplReference, WorkUpdate, DistUniform, 16, 3, false},
		{"uniform Update within 1.5x of atomic-add at P=16 (atomicadd/lockfree <= 1.5)", ClockDefault, ImplAtomicAdd, ImplLockfree, WorkUpdate, DistUniform, 16, 1.5, true},
		{"hot1 Update >= 3x reference at P=16", ClockDefault, ImplLockfree, ImplReference, WorkUpdate, DistHot1, 16, 3, false},
		{"hot8 Update >= 3x reference at P=16", ClockDefault, ImplLockfree, ImplReference, WorkUpdate, DistHot8, 16, 3, false},
		{"abuse (tryupdate-denied, hot8) >= 20x reference at P=16", ClockDefault, ImplLockfree, ImplReference, WorkTryUpdateDenied, DistHot8, 16, 20, false},
		{"hot1 serial Update within 2x of atomic-add (atomicadd/lockfree <= 2 at P=1)", ClockDefault, ImplAtomicAdd, ImplLockfree, WorkUpdate, DistHot1, 1, 2, true},
		{"uniform Update >= 3x reference at P=1, shared clock", ClockShared, ImplLockfree, ImplReference, WorkUpdate, DistUniform, 1, 3, false},
	}
	hot := []struct{ work, dist string }{
		{WorkUpdate, DistHot1}, {WorkUpdate, DistHot8}, {WorkUpdateAndQuery, DistHot1}, {WorkTryUpdateAdmit, DistHot1},
	}
	for _, p := range []struct {
		p    int
		want float64
	}{{1, 1.2}, {2, 1.0}} {
		for _, h := range hot {
			specs = append(specs, targetSpec{fmt.Sprintf("%s %s >= %.1fx reference at P=%d, shared clock", h.dist, h.work, p.want, p.p),
				ClockShared, ImplLockfree, ImplReference, h.work, h.dist, p.p, p.want, false})
		}
	}
	return specs
}

// p999Share is the p99.9 latency target: lock-free at most this share of
// the reference's.
const p999Share = 0.2

// Targets evaluates the targets on rep, from the cells' medians. A target
// stated at P=N is graded on the run's cell at P=N, and only on a machine
// with at least N CPUs (rep.Meta.Cores): on fewer, a hot key's line moves
// between fewer cores than the target is about, so Met says "needs N
// CPUs" and Measured shows the largest P run that fits the machine's
// CPUs, for information. A ratio
// shows its range (the min over the other's max to the max over the
// other's min) and the flag when either cell is noisy.
func Targets(rep *Report) []TargetCheck {
	rs := rep.Results
	if len(rs) == 0 {
		return nil
	}
	ix := newIndex(rs)
	procs := sortedProcs(rs)
	cores := rep.Meta.Cores
	// at returns the P to measure a target stated at p, and whether the
	// run can grade it there.
	at := func(p int) (int, bool) {
		if cores >= p && slices.Contains(procs, p) {
			return p, true
		}
		q := 0
		for _, x := range procs {
			if x <= p && (cores <= 0 || x <= cores) {
				q = x
			}
		}
		return q, false
	}
	ungraded := func(p int) string {
		switch {
		case cores <= 0:
			return "CPU count unknown"
		case cores < p:
			return fmt.Sprintf("needs %d CPUs", p)
		}
		return "not measured"
	}
	var out []TargetCheck
	for _, sp := range targetSpecs() {
		p, graded := at(sp.p)
		tc := TargetCheck{Target: sp.name, Met: ungraded(sp.p), Measured: "–"}
		rr := ix.ratioRange(sp.clock, sp.a, sp.b, sp.work, sp.dist, p)
		if v := rr.v; p > 0 && !math.IsNaN(v) {
			tc.Measured = fmt.Sprintf("%sx at P=%d", targetDigits(v, sp.want, sp.atMost), p)
			if x, y := ix.get(sp.clock, sp.a, sp.work, sp.dist, p), ix.get(sp.clock, sp.b, sp.work, sp.dist, p); x.Count > 1 || y.Count > 1 {
				tc.Measured += fmt.Sprintf(" (%s–%sx)", fmtBound(rr.lo), fmtBound(rr.hi))
			}
			if rr.noisy {
				tc.Measured += " " + flagMark
			}
			if graded {
				tc.Met = yesNo(meets(v, sp.want, sp.atMost))
				if rr.noisy {
					tc.Met += " (noisy)"
				}
			}
		} else if graded {
			tc.Met = "not measured"
		}
		out = append(out, tc)
	}
	for _, d := range []string{DistHot1, DistHot8} {
		p, graded := at(16)
		tc := TargetCheck{Target: "p99.9 latency of Update on " + d + " at P=16 <= 1/5 of reference", Met: ungraded(16), Measured: "–"}
		a, b := ix.get(ClockDefault, ImplLockfree, WorkUpdate, d, p), ix.get(ClockDefault, ImplReference, WorkUpdate, d, p)
		if a != nil && b != nil && b.P999Ns > 0 {
			v := a.P999Ns / b.P999Ns
			as, bs := fmtOperands(a.P999Ns, b.P999Ns, p999Share, true)
			tc.Measured = fmt.Sprintf("%s ns vs %s ns = %s at P=%d", as, bs, targetDigits(v, p999Share, true), p)
			if a.Count > 1 || b.Count > 1 {
				tc.Measured += " (medians)"
			}
			if graded {
				tc.Met = yesNo(meets(v, p999Share, true))
			}
		} else if graded {
			tc.Met = "not measured"
		}
		out = append(out, tc)
	}
	// As go test -benchmem counts it: allocs/op is the integer part of
	// mallocs/ops, so a cell meets "zero" while it saw fewer mallocs than
	// ops (the count includes the runtime's own, from any goroutine).
	tc := TargetCheck{Target: "zero allocs/op (lockfree, every cell, as -benchmem rounds)", Met: "not measured", Measured: "–"}
	var worst, fewest uint64 = 0, math.MaxUint64
	n, ok := 0, true
	for _, r := range rs {
		if r.Impl == ImplLockfree {
			worst, fewest = max(worst, r.Mallocs), min(fewest, r.Ops)
			ok = ok && r.Mallocs < r.Ops
			n++
		}
	}
	if n > 0 {
		tc.Measured = fmt.Sprintf("at most %d mallocs in a cell (all its repeats); %d cells of at least %d ops", worst, n, fewest)
		tc.Met = yesNo(ok)
	}
	return append(out, tc)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// oversubscribed returns the P values of rep's cells above the machine's
// CPU count (rep.Meta.Cores), in increasing order; none when it is unknown.
func oversubscribed(rep *Report) []int {
	if rep.Meta.Cores <= 0 {
		return nil
	}
	var ps []int
	for _, r := range rep.Results {
		if r.Procs > rep.Meta.Cores && !slices.Contains(ps, r.Procs) {
			ps = append(ps, r.Procs)
		}
	}
	slices.Sort(ps)
	return ps
}
