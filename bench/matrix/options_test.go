package matrix

import (
	"errors"
	"flag"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaultProcs(t *testing.T) {
	ps := DefaultProcs()
	if ps[0] != 1 || ps[len(ps)-1] != runtime.NumCPU() {
		t.Fatalf("DefaultProcs() = %v; want 1 ... %d", ps, runtime.NumCPU())
	}
	for i := 1; i < len(ps)-1; i++ {
		if ps[i] != 2*ps[i-1] {
			t.Fatalf("DefaultProcs() = %v; want powers of two then NumCPU", ps)
		}
	}
	if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
		t.Fatalf("DefaultProcs() = %v; want ascending, distinct", ps)
	}
}

func TestParseFlagsDefaults(t *testing.T) {
	o, err := ParseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultOptions()
	if !slices.Equal(o.Impls, DefaultImpls) || !slices.Equal(o.Workloads, AllWorkloads) ||
		!slices.Equal(o.Dists, AllDists) || !slices.Equal(o.Clocks, AllClocks) || !slices.Equal(o.Procs, d.Procs) {
		t.Fatalf("defaults: %+v", o)
	}
	if o.Duration != DefaultDuration || o.Warmup != DefaultWarmup || o.Warmup <= 0 || o.Out != "bench-results" || o.SampleEvery != 64 ||
		o.Keys != 1<<20 || o.Levels != 4 || o.Cells != 100_000 || !o.Plots ||
		o.Count != DefaultCount || o.Count < 3 || o.Spread != DefaultSpread || o.From != "" {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := ParseFlags([]string{
		"-impls", "reference, lockfree,reference", "-workloads", "mix90,update",
		"-dists", "hot1", "-clock", "shared", "-procs", "4,1,2,4",
		"-duration", "20ms", "-out", "", "-sample", "128", "-keys", "4096",
		"-stream", "1024", "-cells", "1000", "-levels", "3", "-commit", "abc", "-q",
		"-count", "5", "-spread", "0.1", "-from", "r.json", "-warmup", "0",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Lists come back de-duplicated, in the canonical order.
	if !slices.Equal(o.Impls, []string{"lockfree", "reference"}) ||
		!slices.Equal(o.Workloads, []string{"update", "mix90"}) ||
		!slices.Equal(o.Dists, []string{"hot1"}) || !slices.Equal(o.Clocks, []string{"shared"}) ||
		!slices.Equal(o.Procs, []int{1, 2, 4}) {
		t.Fatalf("lists: %+v", o)
	}
	if o.Duration != 20*time.Millisecond || o.Out != "" || o.SampleEvery != 128 || o.Keys != 4096 ||
		o.Stream != 1024 || o.Cells != 1000 || o.Levels != 3 || o.Commit != "abc" || !o.Quiet ||
		o.Count != 5 || o.Spread != 0.1 || o.From != "r.json" || o.Warmup != 0 {
		t.Fatalf("scalars: %+v", o)
	}
	o, err = ParseFlags([]string{"-clock", "both", "-impls", "all"}, io.Discard)
	if err != nil || !slices.Equal(o.Clocks, AllClocks) || !slices.Equal(o.Impls, AllImpls) {
		t.Fatalf("both/all: %v %+v", err, o)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-impls", "lockfree,mutex"}, `unknown name "mutex"`},
		{[]string{"-workloads", ","}, "empty list"},
		{[]string{"-dists", "pareto"}, `unknown name "pareto"`},
		{[]string{"-clock", "wall"}, `unknown name "wall"`},
		{[]string{"-procs", "1,0"}, "not a positive integer"},
		{[]string{"-procs", "x"}, "not a positive integer"},
		{[]string{"-duration", "0s"}, "duration must be > 0"},
		{[]string{"-warmup", "-1s"}, "warmup must be >= 0; got -1s"},
		{[]string{"-sample", "48"}, "power of two"},
		{[]string{"-stream", "1000"}, "power of two"},
		{[]string{"-keys", "4"}, "keys must be"},
		{[]string{"-levels", "9"}, "levels must be"},
		{[]string{"-cells", "0"}, "cells must be"},
		{[]string{"-count", "0"}, "count must be >= 1; got 0"},
		{[]string{"-spread", "-0.5"}, "spread must be >= 0; got -0.5"},
		{[]string{"-spread", "NaN"}, "spread must be >= 0; got NaN"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		_, err := ParseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlags(%q) = %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := ParseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v; want flag.ErrHelp", err)
	}
}

func TestCellsOrder(t *testing.T) {
	o := DefaultOptions()
	o.Impls = AllImpls
	o.Procs = []int{1, 2}
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	// 6 impls under default, 5 under shared (atomicadd reads no clock),
	// 7 workloads x 4 dists x 2 procs each.
	if want := (6 + 5) * 7 * 4 * 2; len(cs) != want {
		t.Fatalf("%d cells; want %d", len(cs), want)
	}
	// Within a clock pass, every ratemap cell comes after the others and
	// a (dist, drain) group is contiguous.
	groups := map[rateGroup]bool{}
	var last *rateGroup
	for i, c := range cs {
		if c.impl != ImplRateMap {
			if last != nil && last.clock == c.clock {
				t.Fatalf("cell %d (%s) after a ratemap cell of its clock", i, c.impl)
			}
			continue
		}
		g := rateGroup{c.clock, c.dist, rateDrains(c.work)}
		if (last == nil || *last != g) && groups[g] {
			t.Fatalf("ratemap group %+v split", g)
		}
		groups[g], last = true, &g
	}
	if len(groups) != 2*4*2 {
		t.Fatalf("%d ratemap groups; want 16", len(groups))
	}
}

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"/tmp/go-build123/b001/exe/matrix", "-duration", "1s"}, "go run ./cmd/matrix -duration 1s"},
		{[]string{"bin/matrix"}, "bin/matrix"},
		{nil, ""},
	} {
		if got := command(tc.args); got != tc.want {
			t.Errorf("command(%q) = %q; want %q", tc.args, got, tc.want)
		}
	}
}

// TestDefaultMatrixSize pins the size of `make bench`'s default matrix,
// whose wall time the Makefile states: 3 impls under clock=default, 2
// under shared (atomicadd reads no clock), x 7 workloads x 4 dists x
// DefaultProcs, DefaultCount rounds of DefaultDuration.
func TestDefaultMatrixSize(t *testing.T) {
	o := DefaultOptions()
	o.Procs = []int{1, 2}
	cs, err := cells(&o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (3 + 2) * 7 * 4 * 2; len(cs) != want {
		t.Fatalf("%d default cells at P=1,2; want %d", len(cs), want)
	}
	if timed := time.Duration(len(cs)*o.Count) * o.Duration; timed > 4*time.Minute {
		t.Fatalf("default matrix at P=1,2: %v timed; keep it near 3 minutes so make bench takes about 5", timed)
	}
}

func TestParseBackoff(t *testing.T) {
	for _, tc := range []struct {
		in          string
		first, last uint32
		ok          bool
	}{
		{"", 0, 0, true}, {"off", 0, 0, true}, {"32/1024", 32, 1024, true}, {"1/1", 1, 1, true},
		{"1048576/1048576", 1 << 20, 1 << 20, true},
		{"0/8", 0, 0, false}, {"8/4", 0, 0, false}, {"8", 0, 0, false}, {"8/x", 0, 0, false},
		{"1/2097152", 0, 0, false}, {"-1/4", 0, 0, false}, {"on", 0, 0, false},
	} {
		f, l, err := ParseBackoff(tc.in)
		if (err == nil) != tc.ok || f != tc.first || l != tc.last {
			t.Errorf("ParseBackoff(%q) = %d, %d, %v; want %d, %d, ok %v", tc.in, f, l, err, tc.first, tc.last, tc.ok)
		}
		o := DefaultOptions()
		o.Backoff = tc.in
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate with -backoff %q: %v; want ok %v", tc.in, err, tc.ok)
		}
	}
}
