package matrix

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repeatsReport is a report of two workloads x two dists x P=1,2 with
// three repeats per cell, atomicadd far above the others, and one noisy
// cell.
func repeatsReport() *Report {
	rep := &Report{Meta: sampleReport().Meta}
	rep.Meta.Count, rep.Meta.Spread = 3, 0.25
	base := map[string]float64{ImplLockfree: 6, ImplReference: 3, ImplRotator: 4, ImplRefRotator: 2, ImplAtomicAdd: 40}
	for _, clk := range AllClocks {
		for _, wk := range []string{WorkUpdate, WorkQuery} {
			for _, d := range []string{DistUniform, DistHot1} {
				for _, p := range []int{1, 2} {
					for _, im := range []string{ImplLockfree, ImplReference, ImplRotator, ImplRefRotator, ImplAtomicAdd} {
						if !runsUnder(im, clk) {
							continue
						}
						var runs []Result
						for k, f := range []float64{0.95, 1, 1.05} {
							if im == ImplReference && wk == WorkQuery && d == DistHot1 && p == 2 && k == 0 {
								f = 0.5 // the noisy cell
							}
							v := base[im] * f / float64(p)
							runs = append(runs, Result{Clock: clk, Impl: im, Workload: wk, Dist: d, Procs: p, Count: 1,
								Ops: 1000, Seconds: 0.25, Mops: v, P50Ns: 100 * f, P99Ns: 1000 * f, P999Ns: 5000 * f, Samples: 10, Pinned: p, MemSource: "sizes"})
						}
						rep.Results = append(rep.Results, combine(runs, 0.25))
					}
				}
			}
		}
	}
	fillRatios(rep.Results)
	return rep
}

func TestWritePlots(t *testing.T) {
	rep := repeatsReport()
	dir := t.TempDir()
	paths, err := WritePlots(rep, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	want := "throughput-default.png ratio-default.png latency-default.png throughput-shared.png ratio-shared.png latency-shared.png"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("wrote %s; want %s", got, want)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r := img.Bounds(); r.Dx() < 500 || r.Dy() < 300 || len(b) < 5000 {
			t.Errorf("%s: %dx%d, %d bytes", p, r.Dx(), r.Dy(), len(b))
		}
	}
	if paths, err := WritePlots(&Report{}, dir); err != nil || len(paths) != 0 {
		t.Errorf("no results: %v %v", paths, err)
	}
}

// TestThroughputScale checks that atomicadd does not set the y-range.
func TestThroughputScale(t *testing.T) {
	rep := repeatsReport()
	ix := newIndex(rep.Results)
	impls := []string{ImplLockfree, ImplReference, ImplAtomicAdd}
	p, err := throughputTile(ix, ClockDefault, WorkUpdate, DistUniform, impls, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	top := 6 * 1.05 // lockfree's fastest repeat
	if p.Y.Min != 0 || p.Y.Max < top || p.Y.Max > 1.2*top {
		t.Errorf("y-range [%v, %v]; want [0, about %v], not atomicadd's 42", p.Y.Min, p.Y.Max, top)
	}
	// atomicadd alone sets its own scale.
	p, err = throughputTile(ix, ClockDefault, WorkUpdate, DistUniform, []string{ImplAtomicAdd}, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Max < 42 {
		t.Errorf("atomicadd alone: y max %v", p.Y.Max)
	}
	r, err := ratioTile(ix, ClockDefault, ImplLockfree, ImplReference, DistUniform, []string{WorkUpdate, WorkQuery}, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Y.Min >= 1 || r.Y.Max <= 2.2 {
		t.Errorf("ratio y-range [%v, %v]; want 1x and the 2x ratios inside", r.Y.Min, r.Y.Max)
	}
	if ts := (ratioTicks{}).Ticks(0.5, 4); len(ts) < 4 || ts[0].Label != "0.5x" {
		t.Errorf("ratio ticks: %+v", ts)
	}
}

func TestMarkdownRepeats(t *testing.T) {
	rep := repeatsReport()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, s := range []string{
		"- cells: 3 repeats of 20ms each, interleaved",
		"### Throughput, clock=default: each implementation on its own default clock",
		"### Throughput, clock=shared: every implementation on the shared clock",
		// Median (min–max); quiet cells unflagged, ratios of medians.
		"| update | uniform | 1 | 6.00 (5.70–6.30) | 3.00 (2.85–3.15) | 4.00 (3.80–4.20) | 2.00 (1.90–2.10) | 40.0 (38.0–42.0) | 2.00x | 2.00x | 6.67x |",
		// The noisy reference cell: flagged, and so is its ratio.
		"| query | hot1 | 2 | 3.00 (2.85–3.15) | 1.50 (0.75–1.58) ⚠ |",
		"| 2.00x ⚠ |",
		"⚠: the cell's repeats spread by more than 25% of their median",
		"### Clock vs cell design: both clocks side by side (one run)",
		"| workload | keys | P | lockfree default | lockfree shared | reference default | reference shared | lockfree/reference default | shared | clock share |",
		"| query | hot1 | 2 | 3.00 | 3.00 | 1.50 ⚠ | 1.50 ⚠ | 2.00x ⚠ | 2.00x ⚠ | 1.00x ⚠ |",
		"| uniform Update >= 4x reference at P=1 | 2.00x at P=1 (1.81–2.21x) | no |",
		"| hot1 Update >= 3x reference at P=16 | 2.00x at P=2 (1.81–2.21x) | needs 16 CPUs |",
		"medians of 3 repeats",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("Markdown lacks %q", s)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}
