package matrix

// The harness audit's checks of bench/run16.sh, the one-shot script for a
// lent 16-core machine, read statically (the script is not run: it takes
// minutes): every matrix step's flags are parsed with ParseFlags, each
// step's cells are fabricated as a 16-CPU run would record them, and the
// targets and the files are checked as the script's header promises.

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// run16Steps returns the argument lists of the script's matrix commands
// (bin/matrix and bin/matrix-nobackoff), in the order they run, with the
// shell's "$D" read as the script's default cell duration and "$OUT" as a
// folder name.
func run16Steps(t *testing.T) (script string, steps [][]string) {
	t.Helper()
	script, steps = scriptSteps(t, "../run16.sh", map[string][]string{`"$D"`: {"200ms"}, `"$OUT"`: {"out"}})
	if len(steps) < 2 {
		t.Fatalf("found %d matrix commands in run16.sh; want the matrix and the clock split at least", len(steps))
	}
	return script, steps
}

// scriptSteps reads a bench script and returns it with the argument lists
// of its matrix commands (bin/matrix*, the binary dropped, up to the first
// redirection), each shell word found in subst replaced by its words
// (`""` always reads as one empty argument).
func scriptSteps(t *testing.T, path string, subst map[string][]string) (script string, steps [][]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script = string(b)
	joined := strings.ReplaceAll(script, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.Index(line, "bin/matrix")
		if i < 0 || strings.Contains(line, "[ ! -x") || strings.Contains(line, "for b in") {
			continue
		}
		rest := line[i:]
		if j := strings.IndexAny(rest, ">"); j >= 0 {
			rest = rest[:j]
		}
		args := []string{}
		for _, a := range strings.Fields(rest)[1:] { // drop the binary
			if a == `""` {
				args = append(args, "")
			} else if w, ok := subst[a]; ok {
				args = append(args, w...)
			} else {
				args = append(args, a)
			}
		}
		steps = append(steps, args)
	}
	return script, steps
}

// fakeRun16 is what a 16-CPU run of o records: every cell, one repeat,
// the lock-free sketch 4 times the others (any positive numbers grade).
func fakeRun16(t *testing.T, o Options) *Report {
	t.Helper()
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Meta: Meta{Cores: 16, Count: o.Count, Spread: o.Spread, SampleEvery: 64, Commit: "audit4",
		Procs: o.Procs, Impls: o.Impls, Workloads: o.Workloads, Dists: o.Dists, Clocks: o.Clocks}}
	for _, c := range cs {
		mops := 1.0
		if c.impl == ImplLockfree {
			mops = 4
		}
		rep.Results = append(rep.Results, Result{Clock: c.clock, Impl: c.impl, Workload: c.work.name, Dist: c.dist,
			Procs: c.procs, Count: 1, Mops: mops, MopsRuns: []float64{mops}, P50Ns: 10, P99Ns: 20, P999Ns: 30,
			P50Runs: []float64{10}, P99Runs: []float64{20}, P999Runs: []float64{30}, Ops: 1000, Seconds: 0.2,
			MemSource: "sizes", Pinned: c.procs})
	}
	fillRatios(rep.Results)
	return rep
}

// TestAudit4Run16GradesEveryTarget: run16.sh's header says step 1's
// results.md grades the targets "at the P they name: P=1, 2 and 16", and
// the verdict prints the shared-clock ones as step 2 (the clock split)
// graded them. On a 16-CPU machine, then, every default-clock target must
// be graded (yes/no) by step 1's cells and every shared-clock one by step
// 2's: a target left "not measured" is lost for the one device run.
func TestAudit4Run16GradesEveryTarget(t *testing.T) {
	_, steps := run16Steps(t)
	var reps []*Report
	for i, args := range steps[:2] {
		o, err := ParseFlags(args, io.Discard)
		if err != nil {
			t.Fatalf("step %d: %v (args %q)", i+1, err, args)
		}
		reps = append(reps, fakeRun16(t, o))
	}
	graded := func(tc TargetCheck) bool { return tc.Met == "yes" || tc.Met == "no" }
	for _, tc := range Targets(reps[0]) {
		if strings.Contains(tc.Target, "shared clock") {
			continue
		}
		if !graded(tc) {
			t.Errorf("step 1 (results.md) leaves %q as %q on 16 CPUs", tc.Target, tc.Met)
		}
	}
	for _, tc := range Targets(reps[1]) {
		if !strings.Contains(tc.Target, "shared clock") {
			continue
		}
		if !graded(tc) {
			t.Errorf("step 2 (clock split) leaves %q as %q on 16 CPUs", tc.Target, tc.Met)
		}
	}
}

// TestAudit4Run16FilesFitTheDevice: the script is written for one run on
// a lent machine whose tool brings back at most 8 files from $OUT
// (/work/.library/device/README.md, "Limits": "at most 8 files, ... no
// more than 2 folders down"); what does not fit is left out. The files
// are those the script names under "$OUT/" and those step 1's matrix
// writes into -out "$OUT" (WriteFiles, plots included unless -plots=false).
func TestAudit4Run16FilesFitTheDevice(t *testing.T) {
	script, steps := run16Steps(t)
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$OUT/([A-Za-z0-9._-]+)`).FindAllStringSubmatch(script, -1) {
		names[m[1]] = true
	}
	for i, args := range steps {
		o, err := ParseFlags(args, io.Discard)
		if err != nil {
			t.Fatalf("step %d: %v (args %q)", i+1, err, args)
		}
		if o.Out != "out" {
			continue // no folder, or one outside $OUT (what the script moves from it is named "$OUT/...")
		}
		// The file names depend on the clocks and implementations, not
		// on how many cells there are: one workload, dist and P keep the
		// plots cheap to render.
		o.Workloads, o.Dists, o.Procs = o.Workloads[:1], o.Dists[:1], o.Procs[:1]
		dir := t.TempDir()
		paths, err := WriteFiles(fakeRun16(t, o), dir, o.Plots)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			names[strings.TrimPrefix(p, dir+string(os.PathSeparator))] = true
		}
	}
	var all []string
	for n := range names {
		all = append(all, n)
	}
	slices.Sort(all)
	if len(all) > 8 {
		t.Errorf("run16.sh leaves %d files in $OUT; the device brings back at most 8, so %d would be left out: %v",
			len(all), len(all)-8, all)
	}
}

// TestAudit4FromGradesOnTheRunsMachine: the device run's results.json
// comes back here and is re-rendered with -from (docs/benchmarks.md: "tables
// and plots again, no run"). The targets must be graded for the machine
// that ran the cells (Meta.Cores, "graded only where the machine has the
// CPUs they need"), not for the machine that renders: a 16-CPU run
// re-rendered on 2 CPUs still grades its P=16 targets, and a 2-CPU run
// re-rendered anywhere still says "needs 16 CPUs".
func TestAudit4FromGradesOnTheRunsMachine(t *testing.T) {
	o := DefaultOptions()
	o.Impls = []string{ImplLockfree, ImplReference, ImplAtomicAdd}
	o.Workloads = []string{WorkUpdate}
	o.Dists = []string{DistUniform}
	o.Clocks = []string{ClockDefault}
	o.Procs = []int{1, 2, 16}
	o.Count = 1
	rep := fakeRun16(t, o)
	for _, cores := range []int{16, 2} {
		rep.Meta.Cores = cores
		var b bytes.Buffer
		if err := WriteJSON(&b, rep); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJSON(&b)
		if err != nil {
			t.Fatal(err)
		}
		var md bytes.Buffer
		if err := WriteMarkdown(&md, back); err != nil {
			t.Fatal(err)
		}
		want := "| uniform Update >= 3x reference at P=16 | 4.00x at P=16 | yes |"
		if cores < 16 {
			want = "| uniform Update >= 3x reference at P=16 | 4.00x at P=2 | needs 16 CPUs |"
		}
		if !strings.Contains(md.String(), want) {
			t.Errorf("a %d-CPU run re-rendered from results.json: no %q in\n%s", cores, want, md.String())
		}
	}
}

// TestTargetDigits: a ratio that two decimals would round across its
// threshold is printed with three (the harness audit saw "1.20x ... no").
func TestTargetDigits(t *testing.T) {
	for _, c := range []struct {
		v, want float64
		atMost  bool
		out     string
	}{{1.1996, 1.2, false, "1.1996"}, {1.2, 1.2, false, "1.20"}, {1.23, 1.2, false, "1.23"}, {0.996, 1, false, "0.996"}, {2.004, 2, true, "2.004"}, {1.996, 2, true, "2.00"}} {
		if got := targetDigits(c.v, c.want, c.atMost); got != c.out {
			t.Errorf("targetDigits(%v, %v, %v) = %q, want %q", c.v, c.want, c.atMost, got, c.out)
		}
	}
}
