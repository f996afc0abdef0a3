package matrix

import (
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/lfgrudge/grudge/internal/hw"
)

// a93SetProcs sets GOMAXPROCS to n for the test and restores it after.
func a93SetProcs(t *testing.T, n int) {
	t.Helper()
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestAudit93ReviewUsableCPUsBounds: UsableCPUs (meta.go) is at least 1,
// at most NumCPU and at most the calling thread's affinity set where it
// can be read; it does not depend on GOMAXPROCS ("whatever the GOMAXPROCS
// environment variable says"; the run sets it per P) and leaves it as it
// was, at 1, at the usable CPUs and above them; DefaultProcs is 1, 2, 4,
// ... strictly ascending and ends at it; DefaultOptions and ParseFlags
// without flags pass Validate; Meta.Cores is it.
func TestAudit93ReviewUsableCPUsBounds(t *testing.T) {
	n := UsableCPUs()
	if n < 1 || n > runtime.NumCPU() {
		t.Fatalf("UsableCPUs() = %d; NumCPU %d", n, runtime.NumCPU())
	}
	if cpus := hw.AllowedCPUs(); len(cpus) > 0 && n > len(cpus) {
		t.Errorf("UsableCPUs() = %d above the affinity set %v", n, cpus)
	}
	for _, g := range []int{1, n, n + 3} {
		a93SetProcs(t, g)
		if got := UsableCPUs(); got != n {
			t.Errorf("GOMAXPROCS %d: UsableCPUs() = %d; want %d", g, got, n)
		}
		if got := runtime.GOMAXPROCS(0); got != g {
			t.Errorf("UsableCPUs changed GOMAXPROCS from %d to %d", g, got)
		}
	}
	ps := DefaultProcs()
	if ps[0] != 1 || ps[len(ps)-1] != n {
		t.Errorf("DefaultProcs() = %v; want 1 ... %d", ps, n)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i] <= ps[i-1] || (i < len(ps)-1 && ps[i] != 2*ps[i-1]) {
			t.Errorf("DefaultProcs() = %v: not 1, 2, 4, ... then %d", ps, n)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("DefaultOptions().Validate() = %v", err)
	}
	o, err := ParseFlags(nil, io.Discard)
	if err != nil || !slices.Equal(o.Procs, ps) {
		t.Errorf("ParseFlags(nil) = procs %v, %v; want %v, nil", o.Procs, err, ps)
	}
	if c := baseMeta(&Options{Commit: "audit93"}).Cores; c != n {
		t.Errorf("baseMeta Cores = %d; want UsableCPUs %d", c, n)
	}
}

// TestAudit93ReviewUsableCPUsPinnedThread: called from a thread bound to
// one CPU, UsableCPUs is 1 and DefaultProcs [1] (the calling thread's
// affinity set, meta.go); the thread's mask is restored after.
func TestAudit93ReviewUsableCPUsPinnedThread(t *testing.T) {
	cpus := hw.AllowedCPUs()
	if runtime.GOOS != "linux" {
		t.Skip("thread affinity is read and set on Linux only") // hw.PinThread
	}
	var (
		n   int
		ps  []int
		why string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		undo, took, w := hw.PinThread(cpus[len(cpus)-1])
		defer undo()
		if !took {
			why = w
			return
		}
		n, ps = UsableCPUs(), DefaultProcs()
	}()
	<-done
	if why != "" {
		t.Fatalf("could not bind the thread to an allowed CPU: %s", why)
	}
	if n != 1 || !slices.Equal(ps, []int{1}) {
		t.Errorf("on a thread bound to CPU %d: UsableCPUs() = %d, DefaultProcs() = %v; want 1, [1]", cpus[len(cpus)-1], n, ps)
	}
	if got := UsableCPUs(); got < 1 || got > len(cpus) {
		t.Errorf("after: UsableCPUs() = %d; allowed %v", got, cpus)
	}
}

// TestAudit93ReviewUsableCPUsFixedConcurrentCallsChangeGOMAXPROCS (audit 93; fixed at stop 58, the text below says what was wrong):
// UsableCPUs reads the runtime's default GOMAXPROCS by setting it
// (runtime.SetDefaultGOMAXPROCS) and putting the previous value back
// (meta.go, defaultGOMAXPROCS: "GOMAXPROCS is left as it was"). Two
// calls at once interleave: B reads "previous" while A has the default
// set, A restores, B restores the default, and GOMAXPROCS is left at the
// runtime's default instead of the caller's value. UsableCPUs is exported
// and called by DefaultProcs, DefaultOptions and ParseFlags, none of
// which says it must not run concurrently (or beside Run, whose repeats
// set GOMAXPROCS to P: "Run changes GOMAXPROCS during each repeat and
// restores it after", run.go). With GOMAXPROCS set one above the default,
// four goroutines calling UsableCPUs at once leave it changed within a
// few hundred rounds on 2 CPUs (4 to 74 rounds of 200 in three trials).
func TestAudit93ReviewUsableCPUsFixedConcurrentCallsChangeGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	want := runtime.GOMAXPROCS(0) + 1
	runtime.GOMAXPROCS(prev)
	a93SetProcs(t, want)
	rounds := 1000
	if testing.Short() {
		rounds = 200 // under qemu
	}
	for round := range rounds {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { UsableCPUs() })
		}
		wg.Wait()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Fatalf("round %d: after 4 concurrent UsableCPUs calls GOMAXPROCS is %d; it was %d", round, got, want)
		}
	}
}
