package matrix

import (
	"slices"
	"testing"
	"time"
)

// README.md:184-193 and Makefile:171-182: make bench runs the default
// matrix: the lock-free sketch, the mutex reference and the atomic-add
// bound, 3 interleaved repeats of 250 ms after a 250 ms warm-up, both
// clocks, results in bench-results/. The procs are 1, 2, 4, ..., NumCPU
// (powers of two, then NumCPU), which README.md:186 writes "1, 2, ...
// NumCPU".
func TestAudit72MakeBenchDefaults(t *testing.T) {
	o := DefaultOptions()
	if !slices.Equal(o.Impls, []string{ImplLockfree, ImplReference, ImplAtomicAdd}) {
		t.Errorf("default impls %v", o.Impls)
	}
	if o.Count != 3 || o.Duration != 250*time.Millisecond || o.Warmup != 250*time.Millisecond {
		t.Errorf("count %d duration %v warmup %v", o.Count, o.Duration, o.Warmup)
	}
	if !o.Plots {
		t.Errorf("plots off by default")
	}
	ps := DefaultProcs()
	for i := 1; i < len(ps)-1; i++ {
		if ps[i] != 2*ps[i-1] {
			t.Errorf("DefaultProcs %v: not powers of two", ps)
		}
	}
	t.Logf("DefaultProcs on this machine: %v", ps)
}
