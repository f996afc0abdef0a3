package matrix

import (
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// a93Subset returns the names of all whose bit is set in mask, in all's
// order.
func a93Subset(all []string, mask uint) []string {
	var out []string
	for i, n := range all {
		if mask&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// TestAudit93ReviewValidateAcceptsWhatParseFlagsBuilds: stop 58's
// Validate refuses names out of the All* order, repeated or unknown and
// Procs not strictly ascending ("ParseFlags always gave these",
// docs/migrating.md). So every command line ParseFlags takes must still
// pass: 300 random ones (a fixed seed) with the names shuffled, repeated,
// spaced and the procs unsorted and repeated; the Makefile's bench-arm64
// and docs' example command lines; and DefaultOptions with the default
// procs of every machine of 1 to 130 CPUs.
func TestAudit93ReviewValidateAcceptsWhatParseFlagsBuilds(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 1))
	list := func(all []string) string {
		var names []string
		for _, n := range all {
			for range rng.IntN(3) {
				names = append(names, strings.Repeat(" ", rng.IntN(2))+n)
			}
		}
		if len(names) == 0 {
			names = append(names, all[rng.IntN(len(all))])
		}
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		return strings.Join(names, ",")
	}
	for range 300 {
		var ps []string
		for range 1 + rng.IntN(5) {
			ps = append(ps, strconv.Itoa(1+rng.IntN(40)))
		}
		clock := list(AllClocks)
		if rng.IntN(3) == 0 {
			clock = "both"
		}
		args := []string{"-impls", list(AllImpls), "-workloads", list(AllWorkloads), "-dists", list(AllDists), "-clock", clock, "-procs", strings.Join(ps, ",")}
		o, err := ParseFlags(args, io.Discard)
		if err != nil {
			t.Fatalf("ParseFlags(%q): %v", args, err)
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("ParseFlags(%q) gave options Validate refuses: %v", args, err)
		}
	}
	for _, line := range []string{
		// Makefile, bench-arm64
		"-impls lockfree,reference -workloads update,tryupdate-denied -dists uniform,hot8 -procs 1,2 -duration 20ms -count 2 -keys 4096 -stream 4096 -out x",
		// docs/benchmarks.md, How to run
		"-impls lockfree,reference -workloads update -dists hot1,hot8 -duration 1s",
		"-impls all -count 5",
		"-from ../bench-results/results.json -out /tmp/replot",
		// cmd/matrix
		"-impls lockfree,reference -workloads update -dists hot8 -duration 100ms",
	} {
		if _, err := ParseFlags(strings.Fields(line), io.Discard); err != nil {
			t.Errorf("ParseFlags(%q): %v", line, err)
		}
	}
	for n := 1; n <= 130; n++ {
		o := DefaultOptions()
		o.Procs = a92Procs(n)
		if err := o.Validate(); err != nil {
			t.Errorf("default options on %d CPUs (procs %v): %v", n, o.Procs, err)
		}
	}
	// Every ordered subset of every field passes.
	for _, f := range []struct {
		all []string
		set func(*Options, []string)
	}{
		{AllImpls, func(o *Options, s []string) { o.Impls = s }},
		{AllWorkloads, func(o *Options, s []string) { o.Workloads = s }},
		{AllDists, func(o *Options, s []string) { o.Dists = s }},
		{AllClocks, func(o *Options, s []string) { o.Clocks = s }},
	} {
		for mask := uint(1); mask < 1<<len(f.all); mask++ {
			o := DefaultOptions()
			f.set(&o, a93Subset(f.all, mask))
			if err := o.Validate(); err != nil {
				t.Errorf("ordered subset %v: %v", a93Subset(f.all, mask), err)
			}
		}
	}
}

// TestAudit93ReviewValidateRefusesBadLists: Validate refuses, naming the
// field, an empty name, a name with spaces (ParseFlags trims them,
// Validate must not run " lockfree" as an unknown implementation), a
// name in another field's list, a repeat, two names out of order, and
// Procs repeated, descending, 0 or negative anywhere in the list.
func TestAudit93ReviewValidateRefusesBadLists(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*Options)
	}{
		{"impls", func(o *Options) { o.Impls = []string{""} }},
		{"impls", func(o *Options) { o.Impls = []string{" lockfree"} }},
		{"impls", func(o *Options) { o.Impls = []string{ImplLockfree, ImplLockfree} }},
		{"impls", func(o *Options) { o.Impls = []string{ImplReference, ImplLockfree} }},
		{"impls", func(o *Options) { o.Impls = []string{"LockFree"} }},
		{"workloads", func(o *Options) { o.Workloads = []string{WorkMix90, WorkUpdate} }},
		{"workloads", func(o *Options) { o.Workloads = []string{DistHot1} }},
		{"dists", func(o *Options) { o.Dists = []string{DistHot1, DistHot8} }},
		{"dists", func(o *Options) { o.Dists = []string{DistUniform, "all"} }},
		{"clocks", func(o *Options) { o.Clocks = []string{"both"} }},
		{"clocks", func(o *Options) { o.Clocks = []string{ClockShared, ClockDefault} }},
		{"clocks", func(o *Options) { o.Clocks = []string{ClockDefault, ClockDefault} }},
		{"procs", func(o *Options) { o.Procs = []int{1, 1} }},
		{"procs", func(o *Options) { o.Procs = []int{1, 4, 2} }},
		{"procs", func(o *Options) { o.Procs = []int{1, 2, 0} }},
		{"procs", func(o *Options) { o.Procs = []int{-2, 1} }},
	} {
		o := DefaultOptions()
		tc.set(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%s %v %v %v %v %v) = %v; want an error naming %s", tc.field, o.Impls, o.Workloads, o.Dists, o.Clocks, o.Procs, err, tc.field)
		}
	}
	// Validate does not modify the lists it checks.
	o := DefaultOptions()
	o.Procs = []int{4, 2, 1}
	before := slices.Clone(o.Procs)
	_ = o.Validate()
	if !slices.Equal(o.Procs, before) {
		t.Errorf("Validate changed Procs %v to %v", before, o.Procs)
	}
}
