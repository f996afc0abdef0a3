package matrix

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

// TestAudit92BenchDefaultPlanArithmetic: the default plan on 2 CPUs, from
// the options alone: 280 cells (docs/benchmarks.md) x 3 rounds of 250 ms
// after a warm-up of the first row (the 3 default implementations, 250
// ms each) is 210.75 s of timed regions, which leaves about 1.5 minutes
// of set-up for "about 5 minutes on 2 cores" (docs/benchmarks.md, How to
// run; options.go, Defaults) and about 2 for README's 5.5; on 1 CPU the
// plan halves.
func TestAudit92BenchDefaultPlanArithmetic(t *testing.T) {
	o := DefaultOptions()
	for _, tc := range []struct {
		cpus, cells int
	}{{2, 280}, {1, 140}} {
		o.Procs = a92Procs(tc.cpus)
		cs, err := cells(&o)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != tc.cells {
			t.Errorf("%d CPUs: %d default cells; want %d", tc.cpus, len(cs), tc.cells)
		}
		row := 0
		for _, c := range cs {
			if c.clock != cs[0].clock || c.work != cs[0].work || c.dist != cs[0].dist || c.procs != cs[0].procs {
				break
			}
			row++
		}
		if row != len(DefaultImpls) {
			t.Errorf("warm-up row of %d cells; want the %d default implementations", row, len(DefaultImpls))
		}
		timed := time.Duration(len(cs)*o.Count)*o.Duration + time.Duration(row)*o.Warmup
		if tc.cpus == 2 && timed != 210750*time.Millisecond {
			t.Errorf("2 CPUs: %v of timed regions; want 3m30.75s", timed)
		}
		if timed >= 5*time.Minute {
			t.Errorf("%d CPUs: %v of timed regions alone: no room for about 5 minutes", tc.cpus, timed)
		}
	}
}

// TestAudit92BenchParseFlagsBadValues: more bad values, each refused
// with an error that names the flag (or the field) and the value; and
// lists with spaces, repeats and "all" are read as documented.
func TestAudit92BenchParseFlagsBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-procs", "-1"}, `-procs: "-1" is not a positive integer`},
		{[]string{"-procs", "1.5"}, `-procs: "1.5" is not a positive integer`},
		{[]string{"-count", "x"}, `invalid value "x" for flag -count`},
		{[]string{"-count", "-2"}, "count must be >= 1; got -2"},
		{[]string{"-levels", "-1"}, `invalid value "-1" for flag -levels`},
		{[]string{"-cells", "4294967296"}, "cells must be at most"},
		{[]string{"-keys", "4294967296"}, "keys must be in [8, 2^31]; got 4294967296"},
		{[]string{"-keys", "0"}, "keys must be in [8, 2^31]; got 0"},
		{[]string{"-sample", "0"}, "sample must be a power of two >= 1; got 0"},
		{[]string{"-sample", "-64"}, "sample must be a power of two >= 1; got -64"},
		{[]string{"-stream", "0"}, "stream must be a power of two >= 1; got 0"},
		{[]string{"-duration", "5"}, `invalid value "5" for flag -duration`},
		{[]string{"-warmup", "x"}, `invalid value "x" for flag -warmup`},
		{[]string{"-spread", "x"}, `invalid value "x" for flag -spread`},
		{[]string{"-seed", "-1"}, `invalid value "-1" for flag -seed`},
		{[]string{"-backoff", "1/"}, `backoff must be off or F/L with 1 <= F <= L <= 2^20; got "1/"`},
		{[]string{"-backoff", "0/0"}, `got "0/0"`},
		{[]string{"-backoff", "1/2097152"}, `got "1/2097152"`},
		{[]string{"-impls", "all,lockfree"}, `-impls: unknown name "all"`},
		{[]string{"-clock", " , "}, "-clock: empty list"},
		{[]string{"-dists", "uniform;zipf"}, `-dists: unknown name "uniform;zipf"`},
	} {
		_, err := ParseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%q): %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
	o, err := ParseFlags([]string{"-procs", " 8, 2 ,2,1 ", "-workloads", "all", "-dists", "hot1, hot8,hot1", "-clock", "shared", "-impls", " all "}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Procs, []int{1, 2, 8}) || len(o.Workloads) != len(AllWorkloads) || strings.Join(o.Dists, ",") != "hot8,hot1" ||
		strings.Join(o.Clocks, ",") != ClockShared || len(o.Impls) != len(AllImpls) {
		t.Errorf("parsed %v %v %v %v %v", o.Procs, o.Workloads, o.Dists, o.Clocks, o.Impls)
	}
}

// TestAudit92BenchFilesRegenerate: "-from results.json renders all of
// them again from a saved run" (doc.go, Outputs): results.csv,
// results.json and results.md written from a report, from its
// results.json read back, and from its results.csv read back are the
// same bytes, a stopped run's note included; the plots of a small report
// and of its results.json read back are the same images (not in -short).
func TestAudit92BenchFilesRegenerate(t *testing.T) {
	rep := a47Report(2, []int{1, 2, 16})
	rep.Meta.Stopped = "stopped after 5 of 9 cell runs (round 2 of 3): interrupt"
	rep.Meta.Command = `matrix -impls "lockfree,reference"` + "\n# not: metadata"
	first := t.TempDir()
	if _, err := WriteFiles(rep, first, false); err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct {
		name string
		read func(io.Reader) (*Report, error)
	}{{"results.json", ReadJSON}, {"results.csv", ReadCSV}} {
		f, err := os.Open(filepath.Join(first, src.name))
		if err != nil {
			t.Fatal(err)
		}
		back, err := src.read(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", src.name, err)
		}
		again := t.TempDir()
		if _, err := WriteFiles(back, again, false); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"results.csv", "results.json", "results.md"} {
			a, _ := os.ReadFile(filepath.Join(first, name))
			b, _ := os.ReadFile(filepath.Join(again, name))
			if !bytes.Equal(a, b) {
				t.Errorf("%s regenerated from %s differs:\n--- first\n%s\n--- again\n%s", name, src.name, a, b)
			}
		}
	}

	// Plots: one workload, one dist, one clock (rendering is slow under
	// -race and qemu; -short leaves it to TestWritePlots).
	if testing.Short() {
		return
	}
	small := &Report{Meta: rep.Meta}
	for _, r := range rep.Results {
		if r.Workload == WorkUpdate && r.Dist == DistHot1 && r.Clock == ClockDefault {
			small.Results = append(small.Results, r)
		}
	}
	pa, pb := t.TempDir(), t.TempDir()
	paths, err := WritePlots(small, pa)
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, small); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WritePlots(back, pb); err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 { // throughput, ratio and latency
		t.Errorf("plots: %v; want 3", paths)
	}
	for _, p := range paths {
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(filepath.Join(pb, filepath.Base(p)))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes, regenerated from results.json %d bytes, equal %v", filepath.Base(p), len(a), len(b), bytes.Equal(a, b))
		}
	}
}

// TestAudit92BenchUpdateSaturatedPinsAtHi: update-saturated "Update(k,
// 1e12 = Hi) on keys pre-filled with Hi: every cell pinned at Hi" (doc.go,
// Workloads): after the pre-fill and after every Update of the workload,
// across milliseconds and past the rotators' 1 s Period, each sketch's
// Query of every hot8 key is Hi on a fake clock; ratemap's buckets are
// drained (below one token) and stay so.
func TestAudit92BenchUpdateSaturatedPinsAtHi(t *testing.T) {
	w, err := workloadByName(WorkUpdateSaturated)
	if err != nil {
		t.Fatal(err)
	}
	if w.fill != Hi || w.delta != Hi || w.op != opUpdate {
		t.Fatalf("update-saturated: %+v; want fill and delta Hi, op Update", w)
	}
	u := NewUniverse(1<<10, 1)
	n := distSize(DistHot8, u.Len())
	o := DefaultOptions()
	o.Cells = 1024
	for _, im := range []string{ImplLockfree, ImplReference, ImplRotator, ImplRefRotator} {
		clk := sketchtest.NewFakeClock()
		inst, err := buildOn(&o, im, clk, time.Now, w)
		if err != nil {
			t.Fatal(err)
		}
		prefill(inst.target, u, n, w.fill)
		k := make([]byte, KeyLen)
		mix := 0
		for step := range 2600 { // 2.6 s in 1 ms steps
			for i := range n {
				u.Put(k, uint32(i))
				if step > 0 {
					do(inst.target, &w, k, &mix)
				}
				if q := inst.target.Query(k); q != Hi {
					t.Errorf("%s: key %d at %d ms: Query = %v; want Hi = %v", im, i, step, q, Hi)
					break
				}
			}
			if t.Failed() {
				break
			}
			clk.Advance(time.Millisecond)
		}
		inst.close()
	}

	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	inst, err := buildOn(&o, ImplRateMap, nil, clock, w)
	if err != nil {
		t.Fatal(err)
	}
	prefill(inst.target, u, n, w.fill)
	k := make([]byte, KeyLen)
	for step := range 100 {
		for i := range n {
			u.Put(k, uint32(i))
			do(inst.target, &w, k, new(int))
			if q := inst.target.Query(k); !(q < 1) {
				t.Fatalf("ratemap: key %d at %d ms: %v tokens; want a drained bucket (< 1)", i, step, q)
			}
		}
		now = now.Add(time.Millisecond)
	}
}

// TestAudit92BenchFixedNarrowAffinityNotInCores (audit 92; fixed at stop 58, the text below says what was wrong): Run pins worker i to
// CPU i mod n of "the process's allowed set" (doc.go, Measurement), which
// it reads from the calling thread's affinity at the start of the run,
// while Meta.Cores ("the CPUs the run may use", results.go) is NumCPU as
// the process started. When the set is smaller than NumCPU (a cpuset
// shrunk after start, or Run called from a thread bound to one CPU, as
// here), both workers of a P=2 cell run on one CPU, the report says
// "pinning: took: every worker ... read back its own CPU", Cores is 2, no
// "oversubscribed" line appears, and the P=2 targets are graded as if
// two CPUs had run them.
func TestAudit92BenchFixedNarrowAffinityNotInCores(t *testing.T) {
	cpus := hw.AllowedCPUs()
	if runtime.GOOS != "linux" {
		t.Skip("thread affinity is read and set on Linux only") // hw.PinThread; on one CPU the check holds trivially
	}
	o := tinyOptions()
	o.Impls, o.Workloads, o.Dists, o.Clocks = []string{ImplLockfree}, []string{WorkUpdate}, []string{DistHot1}, []string{ClockDefault}
	o.Procs, o.Count, o.Duration, o.Warmup = []int{2}, 1, 2*time.Millisecond, 0
	var (
		rep     *Report
		err     error
		allowed []int
		why     string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		undo, took, w := hw.PinThread(cpus[0])
		defer undo()
		if !took {
			why = w
			return
		}
		allowed = hw.AllowedCPUs()
		rep, err = Run(context.Background(), o, nil)
	}()
	<-done
	if why != "" {
		t.Fatalf("could not bind the calling thread to an allowed CPU: %s", why)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Procs != 2 {
		t.Fatalf("results %+v", rep.Results)
	}
	if rep.Meta.Cores > len(allowed) && len(oversubscribed(rep)) == 0 {
		t.Errorf("the run's workers were pinned within %v, but Meta.Cores = %d, no P is flagged oversubscribed, and pinning reads %q: the P=2 cell is reported as two workers on two CPUs",
			allowed, rep.Meta.Cores, rep.Meta.Pinning)
	}
}

// TestAudit92BenchFixedValidateAcceptsInvalidFields (audit 92; fixed at stop 58, the text below says what was wrong): Validate "reports
// the first invalid field" (options.go), and Options documents Clocks
// "in AllClocks order" and Procs "ascending, each >= 1", but Validate
// checks neither names nor order: Options{Clocks: ["wall"]} passes, and
// Run then measures every cell on the default clocks under the label
// "wall", which WriteMarkdown drops (no throughput or latency table, every
// target "not measured"); Procs [2, 1, 2] passes, and Run measures P=2
// twice as two cells of one key (results.json holds both, the tables
// show one). Only ParseFlags checks and sorts them.
func TestAudit92BenchFixedValidateAcceptsInvalidFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
	}{
		{"clock wall", func(o *Options) { o.Clocks = []string{"wall"} }},
		{"impl bogus", func(o *Options) { o.Impls = []string{ImplLockfree, "bogus"} }},
		{"workload bogus", func(o *Options) { o.Workloads = []string{"bogus"} }},
		{"dist bogus", func(o *Options) { o.Dists = []string{"bogus"} }},
		{"procs 2,1,2", func(o *Options) { o.Procs = []int{2, 1, 2} }},
	} {
		o := DefaultOptions()
		tc.set(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: Validate() = nil; want the invalid field reported", tc.name)
		}
	}
}
