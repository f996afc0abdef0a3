package matrix

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/internal/hw"
)

// tinyOptions is a matrix small enough for a unit test, under -race and
// under qemu too: a 4096-key universe and M=1024 keep the pre-fill cheap.
func tinyOptions() Options {
	o := DefaultOptions()
	o.Duration, o.Warmup = 20*time.Millisecond, 5*time.Millisecond
	o.Keys, o.Stream, o.Cells = 4096, 4096, 1024
	o.Out, o.Quiet = "", true
	o.Impls = AllImpls
	o.Count = 1
	return o
}

func checkResults(t *testing.T, rep *Report, want int) {
	t.Helper()
	if len(rep.Results) != want {
		t.Fatalf("%d results; want %d", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		name := r.Clock + "/" + r.Impl + "/" + r.Workload + "/" + r.Dist
		if r.Ops == 0 || r.Mops <= 0 || r.Seconds <= 0 || r.Samples == 0 {
			t.Errorf("%s P=%d: ops %d, %v Mops/s, %v s, %d samples", name, r.Procs, r.Ops, r.Mops, r.Seconds, r.Samples)
		}
		if !(r.P50Ns > 0 && r.P50Ns <= r.P99Ns && r.P99Ns <= r.P999Ns) {
			t.Errorf("%s P=%d: percentiles %v %v %v not ordered", name, r.Procs, r.P50Ns, r.P99Ns, r.P999Ns)
		}
		if r.MemBytes <= 0 && r.Impl != ImplRateMap {
			t.Errorf("%s: memory %d", name, r.MemBytes)
		}
		if r.Base == "" {
			t.Errorf("%s: no ratio base", name)
		}
	}
	if rep.Meta.GoVersion != runtime.Version() || rep.Meta.GOARCH != runtime.GOARCH || rep.Meta.Cores != runtime.NumCPU() ||
		rep.Meta.CPUModel == "" || rep.Meta.Commit == "" || rep.Meta.Pinning == "" || rep.Meta.Date == "" {
		t.Errorf("meta: %+v", rep.Meta)
	}
}

// TestTinyMatrix is the tiny matrix: 2 implementations x 1
// workload x 1 dist, 20ms cells, end to end through the files.
func TestTinyMatrix(t *testing.T) {
	o := tinyOptions()
	o.Impls = []string{ImplLockfree, ImplReference}
	o.Workloads = []string{WorkUpdate}
	o.Dists = []string{DistHot8}
	o.Clocks = []string{ClockDefault}
	o.Count = 2
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, rep, 2*len(o.Procs))
	for _, r := range rep.Results {
		if r.Count != 2 || len(r.MopsRuns) != 2 || len(r.P99Runs) != 2 || r.MopsMin > r.Mops || r.Mops > r.MopsMax {
			t.Errorf("%s P=%d: count %d, runs %v, %v <= %v <= %v", r.Impl, r.Procs, r.Count, r.MopsRuns, r.MopsMin, r.Mops, r.MopsMax)
		}
	}
	if rep.Meta.Count != 2 || rep.Meta.Spread != DefaultSpread {
		t.Errorf("meta count %d spread %v", rep.Meta.Count, rep.Meta.Spread)
	}
	t.Logf("pinning: %s", rep.Meta.Pinning)
	for _, r := range rep.Results {
		if r.Impl == ImplLockfree && r.Ratio <= 0 {
			t.Errorf("lockfree P=%d: ratio %v", r.Procs, r.Ratio)
		}
	}

	dir := t.TempDir()
	paths, err := WriteFiles(rep, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.csv", "results.json", "results.md", "throughput-default.png", "latency-default.png", "ratio-default.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v (wrote %v)", name, err, paths)
		}
		if strings.HasSuffix(name, ".png") && (!bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000) {
			t.Errorf("%s is not a PNG, or empty (%d bytes)", name, len(b))
		}
	}
	f, _ := os.Open(filepath.Join(dir, "results.csv"))
	defer f.Close()
	back, err := ReadCSV(f)
	if err != nil || len(back.Results) != len(rep.Results) || back.Meta.Commit != rep.Meta.Commit {
		t.Fatalf("results.csv read back: %v, %d results", err, len(back.Results))
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if !strings.Contains(string(md), "| update | hot8 | 1 |") {
		t.Errorf("results.md lacks the update/hot8/P=1 row:\n%s", md)
	}
}

// TestEveryPath runs every implementation and workload once on a few
// keys and checks the admission rates of the TryUpdate workloads.
func TestEveryPath(t *testing.T) {
	o := tinyOptions()
	o.Duration = 5 * time.Millisecond
	o.Dists = []string{DistHot8}
	o.Procs = []int{2}
	if testing.Short() {
		o.Clocks = []string{ClockDefault}
		o.Workloads = []string{WorkTryUpdateAdmit, WorkTryUpdateDenied, WorkMix90}
	}
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, clk := range o.Clocks {
		for _, im := range o.Impls {
			if runsUnder(im, clk) {
				n += len(o.Workloads)
			}
		}
	}
	checkResults(t, rep, n)
	for _, r := range rep.Results {
		switch r.Workload {
		case WorkTryUpdateAdmit:
			if r.AdmitRate != 1 {
				t.Errorf("%s/%s: tryupdate-admitted admit rate %v; want 1", r.Clock, r.Impl, r.AdmitRate)
			}
		case WorkTryUpdateDenied:
			// Sketches: never (the fill stays above the limit for 20 s);
			// ratemap: one token per key per 100 s.
			if r.AdmitRate != 0 {
				t.Errorf("%s/%s: tryupdate-denied admit rate %v; want about 0", r.Clock, r.Impl, r.AdmitRate)
			}
		default:
			if r.AdmitRate != 0 {
				t.Errorf("%s/%s/%s: admit rate %v outside TryUpdate", r.Clock, r.Impl, r.Workload, r.AdmitRate)
			}
		}
	}
}

// cancelOnWrite cancels a context at the first progress line.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (c cancelOnWrite) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("[round 1/1 cell 1/")) {
		c.cancel()
	}
	return len(p), nil
}

func TestRunStops(t *testing.T) {
	o := tinyOptions()
	o.Duration = 5 * time.Millisecond
	o.Impls = []string{ImplLockfree, ImplAtomicAdd}
	o.Workloads = []string{WorkQuery}
	o.Dists = []string{DistHot1}
	o.Procs = []int{1}
	o.Quiet = false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := Run(ctx, o, cancelOnWrite{cancel})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || !strings.Contains(rep.Meta.Stopped, "after 1 of 3 cell runs") {
		t.Fatalf("%d results, stopped %q; want 1 result, stopped after 1 of 3", len(rep.Results), rep.Meta.Stopped)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil || !strings.Contains(b.String(), "**incomplete**") {
		t.Fatalf("Markdown of a stopped run: %v\n%s", err, b.String())
	}
	rep.Results = nil
	if _, err := WriteFiles(rep, t.TempDir(), true); err != nil {
		t.Fatalf("files of an empty run: %v", err)
	}
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
}

func TestPinThread(t *testing.T) {
	cpus := hw.AllowedCPUs()
	if runtime.GOOS != "linux" {
		_, took, why := hw.PinThread(0)
		if took || why == "" {
			t.Fatalf("pinThread off Linux: took %v, why %q", took, why)
		}
		return
	}
	if len(cpus) == 0 {
		t.Fatal("no allowed CPUs read back")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cpu := cpus[len(cpus)-1]
		undo, took, why := hw.PinThread(cpu)
		defer undo()
		if !took {
			t.Errorf("pinning to allowed CPU %d did not take: %s", cpu, why)
		}
	}()
	<-done
}

func TestMeasureOverhead(t *testing.T) {
	tm := NewTimer()
	if tm.NsPerTick <= 0 {
		t.Fatalf("timer: %+v", tm)
	}
	if d := tm.Nanos(tm.Ticks(time.Second)); d < 0.99e9 || d > 1.01e9 {
		t.Fatalf("1s -> ticks -> %v ns", d)
	}
	a := tm.Now()
	time.Sleep(10 * time.Millisecond)
	if d := tm.Nanos(tm.Now() - a); d < 9e6 || d > 1e9 {
		t.Fatalf("a 10ms sleep measured %v ns with %s", d, tm.Name())
	}
	ov := MeasureOverhead(tm)
	if ov.PairNs < 0 || ov.SampleNs <= 0 {
		t.Fatalf("overhead: %+v", ov)
	}
	t.Logf("%s: pair %.1f ns, sample %.1f ns", tm.Name(), ov.PairNs, ov.SampleNs)
}
